"""`memsplit()`: the whole answer for the engine starts of a store, as one Analysis of named frames (summary,
current, diagnosis, episodes, demand, recommendation, flags, whatif) with definitions and notes, so that the
CLI, the dashboard and the report render it without computing anything.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from attribution.analyses.common import Analysis, resolve_window
from attribution.analyses.concurrency import scrape_sampling
from attribution.errors import UsageError
from attribution.labels import version_label
from attribution.memory.profile import GiB
from attribution.memsplit.current import CurrentSplit, Overrides, current_split
from attribution.memsplit.current import when as _when
from attribution.memsplit.diagnosis import (
    LIMITS,
    Settings,
    drop_step_tables,
    exact_in_system,
    limit_of,
    load_starts,
    step_frames,
)
from attribution.memsplit.recommend import STATUS, Recommendation, recommend
from attribution.memsplit.whatif import start_arrivals, whatif

SCRAPE_DEFINITION = {
    "scrape_interval_s": "present when a deployment's step rows include Prometheus scrapes (engine_steps kind "
    "`scrape`, where its logs print no step lines): running, waiting and KV usage sampled at the scrape interval "
    "(median seconds between scrapes), so the demand peak and percentiles are lower bounds of the true ones",
}
DEFINITIONS = {
    "R (cache_bytes)": "memory per GPU the engine gave its caches: --cache-gib; else SGLang's KV + Mamba "
    "allocation "
    "lines, vLLM's `Available KV cache memory`; else an estimate from the pool sizes (cache_source says "
    "which)",
    "pool_sizes": "logged: the KV pool tokens and state slots are the ones the engine printed at start-up "
    "(SGLang's `KV Cache is allocated` / `Mamba Cache is allocated` / max_total_num_tokens lines, vLLM's `GPU "
    "KV cache size`); reconstructed: the log had none, so the size is rebuilt from R, the other pool and the "
    "model's B and S (current.kv_pool_source / state_pool_source say which pool)",
    "B, S, k": "KV bytes per token of the full-attention layers, state bytes per slot, state slots per "
    "running "
    "request (attribution.memory; vLLM: its padded page layout, k = blocks per state group)",
    "line weight": "each step line stands for the time to the next line of its engine, at most max_gap_s",
    "at cap": "running >= the start's cap (SGLang's max_running_requests, vLLM's max_num_seqs; else the "
    "highest "
    "running count seen, cap_source = observed)",
    "binding line": "at cap, requests waiting, and KV usage below kv_low: the cap, not the KV pool, holds "
    "requests "
    "back",
    "episode": "binding lines of one engine: runs of consecutive binding lines (no silence longer than "
    "max_gap_s), "
    "merged when less than merge_s passes between one run's end and the next run's start; duration_s = the "
    "sum of its binding lines' weights, from `began` to `ended`",
    "binding_share": "binding seconds / (first to last step line) per engine",
    "waiting_request_s": "sum over lines of waiting x weight: the request-seconds spent queueing (Little's "
    "law), "
    "binding_waiting_request_s over binding lines only; episode_queue_*: queue_s of requests arriving inside "
    "an "
    "episode, where the source logs it",
    "limit": "; ".join(f"{k}: {v}" for k, v in LIMITS.items()),
    "demand": "running + waiting per step line; demand_q = its time-weighted percentile (the smallest value "
    "that "
    "lines at or below it cover for that share of the weighted time); in_system_*_exact: the concurrency "
    "analysis' sweep over per-request intervals, arrival to end",
    "C* (concurrency)": "ceil(demand_q x (1 + headroom))",
    "L (mean_live_tokens)": "live KV tokens per running request, time-weighted over the step lines; vLLM "
    "adds half "
    "an attention block (its allocation rounding)",
    "T* (live_tokens)": "max(C* x L, the percentile of demand tokens x (1 + headroom), the longest request + "
    "1; "
    "vLLM: also max_model_len)",
    "need": "state k x S x C* (+1 padding slot on SGLang), KV B x T*; feasible iff their sum <= R",
    "status": "; ".join(f"{k}: {v}" for k, v in STATUS.items()),
    "recommended split": "resize: C* x k state slots, the KV pool takes the rest of R; short: the largest C "
    "with "
    "C x (k x S + B x L) <= R and room for the longest request, the KV pool takes the rest",
    "ratio": "state bytes / KV bytes (SGLang's --mamba-full-memory-ratio); balanced_ratio = need state / "
    "need KV",
    "whatif": "the start's arrivals (prompt, output, cached tokens) replayed through the simulator with a KV "
    "pool "
    "of kv_pool_tokens and at most cap running requests, first come first served; queue = arrival to "
    "admission; "
    "waited_share = queue >= 1 s; capacity_per_day = cap / mean service time (admission to end) x 86400 "
    "(Little's law at the cap); source = measured rows are the logs' own figures",
}


def _gib(n: float | None) -> str:
    return "?" if n is None else f"{n / GiB:.2f} GiB"


def _split_text(slots: int | None, running: int | None, tokens: int | None) -> str:
    return "" if slots is None else f"{running} running, {slots} slots + {tokens:,} KV tokens"


def _summary(c: CurrentSplit, b: dict[str, Any] | None, limit: str, rec: Recommendation,
             what: list[dict[str, Any]]) -> dict[str, Any]:
    sim = {r["split"]: r for r in what if r["source"] == "simulated"}
    cur, new = sim.get("current", {}), sim.get("recommended", sim.get("current", {}))
    return {
        "deployment": c.deployment, "engine": version_label(c.engine, c.version), "started": c.started,
        "cache": _gib(c.cache_bytes), "limit": limit, "binding_share": (b or {}).get("binding_share"),
        "episodes": (b or {}).get("episodes"),
        "current": _split_text(c.state_slots, c.cap, c.kv_pool_tokens), "pool_sizes": c.pool_sizes,
        "status": rec.status,
        "recommended": _split_text(rec.state_slots, rec.max_running, rec.kv_tokens),
        "queue_p99_now": cur.get("queue_p99"), "queue_p99_after": new.get("queue_p99"),
        "capacity_per_day_now": cur.get("capacity_per_day"),
        "capacity_per_day_after": new.get("capacity_per_day"),
    }  # fmt: skip


def _limit_note(c: CurrentSplit, b: dict[str, Any] | None, limit: str, status: str) -> list[str]:
    if not b or limit != "compute" or status not in ("resize", "short") or not b["waiting_request_s"]:
        return []
    share = b["below_cap_waiting_request_s"] / b["waiting_request_s"]
    return [
        f"{c.deployment} ({_when(c.started)}): {share:.0%} of the queueing happened below the "
        f"running "
        "cap with KV to spare, so a new split changes little (see the what-if): the engine's throughput is "
        "the limit"
    ]


def _split(row: dict[str, Any], model: str | None, ov: Overrides, notes: list[str]) -> CurrentSplit | None:
    """The start's current split; with the model taken from the log, starts of models that are no hybrid (or
    not a preset) are skipped with a note instead of failing the whole answer."""
    if model:
        return current_split(row, model, ov)
    if not (row.get("model") or "").strip():
        # A start whose model line was not logged (or was rotated away): its model profile is unknown. (An
        # empty name would be read as the path `.`, a directory without a config.json.)
        notes.append(
            f"{row['deployment']} ({_when(row['started'])}) skipped: the engine start names no model, "
            "so its model profile is unknown; pass --model PRESET or --model path/to/config.json"
        )
        return None
    try:
        return current_split(row, row.get("model") or "", ov)
    except UsageError as exc:
        notes.append(
            f"{row['deployment']} ({_when(row['started'])}) skipped: {exc}; pass --model "
            "PRESET or --model path/to/config.json"
        )
        return None


def memsplit(
    con: duckdb.DuckDBPyConnection,
    model: str | None = None,
    *,
    engine: str | None = None,
    deployments: list[str] | None = None,
    since: Any = None,
    until: Any = None,
    overrides: Overrides | None = None,
    settings: Settings | None = None,
    run_whatif: bool = True,
    service_model: str | None = None,
    exact: bool = True,
    replay: str | None = None,
) -> Analysis:
    """The memory-split answer for every engine start in the window (optionally one engine, some deployments).

    `model` is a preset name or a config.json path (default: each start's logged model, as a preset). Raises
    UsageError when no engine start matches."""
    s, ov = settings or Settings(), overrides or Overrides()
    if not 0 < s.percentile <= 1 or s.headroom < 0 or not 0 < s.kv_low <= 1:
        raise UsageError("percentile must be in (0, 1], headroom >= 0 and kv_low in (0, 1]")
    window = resolve_window(con, since, until)
    starts = load_starts(con, engine=engine, deployments=deployments, since=window.since, until=window.until)
    if starts.is_empty():
        raise UsageError(
            "no engine start (engine_config row) matches: ingest the engines' startup lines, or check "
            "--engine / --deployment / --since"
        )
    notes: list[str] = []
    splits = [c for row in starts.to_dicts() if (c := _split(row, model, ov, notes)) is not None]
    if not splits:
        raise UsageError("no engine start to analyse: " + "; ".join(notes))
    frames = step_frames(con, s)
    drop_step_tables(con)
    trace = None
    if replay is not None and run_whatif:  # the what-if replays this file's arrivals instead of each start's
        from attribution.replay import read_trace

        trace, more = read_trace(replay)
        notes += more
    notes += [f"{c.deployment} ({_when(c.started)}): {n}" for c in splits for n in c.notes]
    exact_df = pl.DataFrame()
    if exact:
        exact_df, more = exact_in_system(con, splits)
        notes += more
    measured = start_arrivals(con) if run_whatif and trace is None else {}
    binding = {r["start_id"]: r for r in frames["binding"].to_dicts()}
    demand = frames["demand"]
    if exact_df.height:
        demand = demand.join(exact_df, on="start_id", how="left")
    demand_rows = {r["start_id"]: r for r in demand.to_dicts()}
    summary, diag, recs, flags, what = [], [], [], [], []
    for c in splits:
        b, d = binding.get(c.start_id), demand_rows.get(c.start_id, {})
        limit = limit_of(c, b)
        diag.append(
            {
                **(b or {"start_id": c.start_id, "deployment": c.deployment}),
                "limit": limit,
                "in_system_peak_exact": d.get("in_system_peak_exact"),
                "in_system_p99_exact": d.get("in_system_p99_exact"),
            }
        )
        rec = recommend(c, d, s)
        notes += rec.notes + _limit_note(c, b, limit, rec.status)
        recs.append(rec.row())
        flags += [
            {
                "start_id": c.start_id,
                "deployment": c.deployment,
                "flag": f.flag,
                "value": f.value,
                "meaning": f.meaning,
            }
            for f in rec.flags
        ]
        rows: list[dict[str, Any]] = []
        if run_whatif and rec.status != "unknown":
            rows, more = whatif(c, rec, service_model, trace, str(replay), measured.get(c.start_id))
            notes += more
        what += rows
        summary.append(_summary(c, b, limit, rec, rows))
    summary_df = pl.DataFrame(summary, infer_schema_length=None)
    sampled = scrape_sampling(con, window.since, window.until, sorted({c.deployment for c in splits}))
    if sampled:  # demand from Prometheus gauges: its peak and percentiles are at most the true ones
        notes += [n for _, n in sampled]
        every = {r["deployment"]: r["interval_s"] for r, _ in sampled}
        summary_df = summary_df.with_columns(pl.col("deployment").replace_strict(
            every, default=None, return_dtype=pl.Float64).alias("scrape_interval_s"))
    tables = {
        "summary": summary_df,
        "current": pl.DataFrame([c.row() for c in splits], infer_schema_length=None),
        "diagnosis": pl.DataFrame(diag, infer_schema_length=None),
        "episodes": frames["episodes"],
        "demand": demand,
        "recommendation": pl.DataFrame(recs, infer_schema_length=None),
        "flags": pl.DataFrame(
            flags,
            schema={
                "start_id": pl.Int64,
                "deployment": pl.Utf8,
                "flag": pl.Utf8,
                "value": pl.Utf8,
                "meaning": pl.Utf8,
            },
        ),
        "whatif": pl.DataFrame(what, infer_schema_length=None),
    }
    titles = {
        "summary": "memory split per engine start",
        "current": "current split (per GPU)",
        "diagnosis": "when the cap bound with KV to spare",
        "episodes": "binding episodes",
        "demand": f"demand (p{s.percentile * 100:g} and peak, from the step lines)",
        "recommendation": f"recommended split (p{s.percentile * 100:g} demand, {s.headroom:.0%} headroom)",
        "flags": "flags that enact it",
        "whatif": "what-if: measured arrivals replayed under each split",
    }
    params = {
        "model": model,
        "engine": engine,
        "deployments": deployments,
        **window.to_dict(),
        "percentile": s.percentile,
        "headroom": s.headroom,
        "kv_low": s.kv_low,
        "max_gap_s": s.max_gap_s,
        "merge_s": s.merge_s,
        "cache_bytes": ov.cache_bytes,
        "tp": ov.tp,
        "kv_cache_dtype": ov.kv_cache_dtype,
        "mamba_ssm_dtype": ov.mamba_ssm_dtype,
        "slots_per_request": ov.slots_per_request,
        "service_model": service_model,
        "whatif": run_whatif,
    }
    definitions = {**DEFINITIONS, **SCRAPE_DEFINITION} if sampled else DEFINITIONS
    return Analysis("memsplit", params, tables, titles, definitions, list(dict.fromkeys(notes)))
