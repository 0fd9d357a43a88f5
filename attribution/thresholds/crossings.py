"""Threshold crossings: for each catalogue feature, which requests crossed its threshold (count, share,
share of the prefill tokens they carry, per workload and per day), and for step-scoped features how often
and how long the engine's own step lines were over it (decode batches above the CUDA-graph size, time at the
running-request cap, state-pool-full episodes). Exact counts from per-request rows in DuckDB.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import duckdb
import polars as pl

from attribution import queries
from attribution.analyses.common import Analysis, Selection, selection_serial, selections_database
from attribution.analyses.concurrency import scrape_intervals
from attribution.queries import materialize
from attribution.thresholds import steps as step_kernel
from attribution.thresholds.buckets import DEFINITIONS as BUCKET_DEFINITIONS
from attribution.thresholds.buckets import bucket_crossings
from attribution.thresholds.catalogue import QUANTITIES, Catalogue, load_catalogue
from attribution.thresholds.settings import effective_settings, engine_starts
from attribution.views import scrapes_stored

MAX_GAP_S = 60.0
DEFINITIONS = {
    "requests": "requests evaluated for the feature: served by an engine start where it is on, or possibly on "
    "(status unknown: not an engine flag), in the window",
    "crossed": "requests whose quantity is beyond the threshold effective for the start that served them",
    "share_of_engine_requests": "crossed / requests: of the requests served by engine starts where the feature "
    "is on or possibly on (e.g. only the SGLang ones for an SGLang feature)",
    "share_of_all_requests": "crossed / every request of the group in the window (all engines)",
    "prefill_token_share_of_all_requests": "uncached prompt tokens (prompt - cached; the prompt where cached is "
    "unknown) of the crossing requests / those of every request of the group (all engines): the share of "
    "prefill work the feature touches",
    "prompt_token_share_of_all_requests": "the same for prompt tokens, cached or not",
    "kv_len_at_prefill": "KV length at prefill = cached + new tokens = the prompt",
    "peak_kv_len": "prompt + output tokens",
    "time_share": "step features: time the quantity was over the threshold / time covered by the rows, a row "
    f"standing for the time until the next row of its file (at most {MAX_GAP_S:g} s)",
    "episodes": "step features: runs of consecutive rows over the threshold",
    "method": "exact: counted from per-request rows; estimate: the logs give a proxy (see count_from); "
    "step rows: SGLang decode lines come every --decode-log-interval steps (a sample), vLLM's periodic line "
    "every ~10 s (running requests stand in for the decode batch)",
    "status": "on / off / unknown (not in the logs; counted as if on) / not in version / not applicable "
    "(model) / not countable (needs data the logs do not have)",
}


def _method(count_from: str, scope: str, estimated: int = 0, unknown: int = 0) -> str:
    m = re.match(r"\s*(R\*|R|S|C)", count_from or "")
    kind = m.group(1) if m else ""
    if scope == "request":
        text = "exact (request logs)" if kind == "R" else f"estimate from request logs ({count_from})"
        if estimated:
            text = (f"estimated: {estimated:,} crossings assume no cached tokens (the logs do not give them: "
                    "uncached = the whole prompt, an upper bound)")
        if unknown:
            text += f"; {unknown:,} requests have no value for the quantity and are not counted"
        return text
    if scope == "deployment":
        return "configuration: every request of a deployment whose setting crossed"
    return f"step logs ({count_from})" if count_from else "step logs"


def prepare(con: duckdb.DuckDBPyConnection, catalogue: Catalogue, *, gpu_mem_gib: float | None = None,
            tp_size: int | None = None) -> pl.DataFrame:
    """Register the engine starts (`thr_starts`) and their effective settings (`thr_settings`) on `con`."""
    return prepare_starts(con, catalogue, gpu_mem_gib=gpu_mem_gib, tp_size=tp_size)[1]


def prepare_starts(con: duckdb.DuckDBPyConnection, catalogue: Catalogue, *, gpu_mem_gib: float | None = None,
                   tp_size: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`prepare`, returning the engine starts too."""
    starts = engine_starts(con)
    settings = effective_settings(starts, catalogue, gpu_mem_gib=gpu_mem_gib, tp_size=tp_size)
    register(con, starts, settings)
    return starts, settings


# On a DuckDB connection: the engine starts last registered as thr_starts, and what the int_threshold_requests on
# it was made from (the selection's serial, those starts). A report's thresholds and its changes' compare of the
# window's cohorts read one selection: the table is made once, not twice (a 1M-request window: ~400 MB of
# DuckDB memory; bench/scale/README.md, 2026-12-03 report32).
_STARTS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, pl.DataFrame] = weakref.WeakKeyDictionary()
_MADE: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, tuple[int, pl.DataFrame]] = weakref.WeakKeyDictionary()


def register(con: duckdb.DuckDBPyConnection, starts: pl.DataFrame, settings: pl.DataFrame) -> None:
    rows = starts.select("config_id", "deployment", "engine", "ts")
    con.register("thr_starts", rows.to_arrow())
    con.register("thr_settings", settings.to_arrow())
    if isinstance(con, duckdb.DuckDBPyConnection):
        _STARTS[con] = rows
    step_kernel.settings_registered(con)


def mark_requests(con: duckdb.DuckDBPyConnection, *, requests: bool = True, flags: bool = True) -> None:
    """Materialise `int_threshold_requests` (the window's requests with their engine start) and the view
    `int_threshold_request_flags` (one row per request and evaluated request/deployment feature) from
    `int_analysis_requests`; each is named as its file. On DuckDB a table still there from the same selection
    and engine starts is kept, not made again."""
    if requests and not _made(con):
        if (database := selections_database(con)) is not None:
            # beside the selections, compressed, and read through a temporary view of its name: in memory it
            # took DuckDB's cap (a 6M-request window: ~1.3 GB; 1M: 222 MB in memory, 28 MB in the file)
            materialize(con, "int_threshold_requests", database=database)
            con.execute(f"create or replace temp view int_threshold_requests as "
                        f"select * from {database}.int_threshold_requests")
        else:
            materialize(con, "int_threshold_requests")
        serial, starts = selection_serial(con), _STARTS.get(con) if isinstance(con, duckdb.DuckDBPyConnection) \
            else None
        if serial is not None and starts is not None:
            _MADE[con] = (serial, starts)
    if flags:
        # a view: each reader aggregates or filters it as it goes (tens of millions of rows on a busy week), and
        # it always reads the thr_settings registered at that time
        queries.create_view(con, "int_threshold_request_flags", temp=True)


def _made(con: duckdb.DuckDBPyConnection) -> bool:
    """`int_threshold_requests` on `con` holds what it would be made from now: the same selection and the same
    registered engine starts (a table that release() has not dropped)."""
    if not isinstance(con, duckdb.DuckDBPyConnection) or (made := _MADE.get(con)) is None:
        return False
    starts = _STARTS.get(con)
    if made[0] != selection_serial(con) or starts is None or not starts.equals(made[1]):
        return False
    database = selections_database(con)
    return bool(con.execute("select count(*) from duckdb_tables() where table_name = 'int_threshold_requests' "
                            "and (temporary or database_name = $d)", {"d": database}).fetchall()[0][0])


def _summary(settings: pl.DataFrame, used: set[str]) -> pl.DataFrame:
    """Per feature: the thresholds in effect and how many starts had it on, over the config ids in use."""
    rows = []
    for part in settings.filter(pl.col("config_id").is_in(list(used))).partition_by("feature", maintain_order=True):
        ev = part.filter(pl.col("evaluate"))
        counts = part["status"].value_counts(sort=True)
        rows.append({
            "feature": part["feature"][0], "title": part["title"][0], "quantity": part["quantity"][0],
            "op": part["op"][0], "scope": part["scope"][0], "count_from": part["count_from"][0],
            "threshold": " / ".join(f"{x:g}" for x in sorted(ev["threshold"].unique().to_list())),
            "status": "; ".join(f"{s} ({n} start{'s' if n > 1 else ''})" for s, n in counts.iter_rows()),
            "evaluated": ev.height > 0,
            "threshold_source": ev["threshold_source"][0] if ev.height else part["threshold_source"][0],
        })  # fmt: skip
    schema = {"feature": pl.Utf8, "title": pl.Utf8, "quantity": pl.Utf8, "op": pl.Utf8, "scope": pl.Utf8,
              "count_from": pl.Utf8, "threshold": pl.Utf8, "status": pl.Utf8, "evaluated": pl.Boolean,
              "threshold_source": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def thresholds(sel: Selection, catalogue: Catalogue | None = None, *, features: list[str] | None = None,
               gpu_mem_gib: float | None = None, tp_size: int | None = None,
               max_gap_s: float = MAX_GAP_S) -> Analysis:
    """Crossings of every catalogue feature over the selection's window: request-scoped features per
    feature, workload and day; step-scoped ones per deployment and day; the effective settings per start."""
    cat = (catalogue or load_catalogue()).select(features)
    con = sel.con
    starts, settings = prepare_starts(con, cat, gpu_mem_gib=gpu_mem_gib, tp_size=tp_size)
    mark_requests(con)
    used_req = set(queries.run(con, "threshold_config_use")["config_id"].to_list())
    # step-scoped features: how often, how long and in how many episodes (attribution.thresholds.steps)
    steps = step_kernel.steps_table(con, step_kernel.step_rows(con, sel.window.since, sel.window.until),
                                    float(max_gap_s))
    used = used_req | _starts_in_window(starts, sel)
    summary = _summary(settings, used)
    cross = queries.run(con, "threshold_crossings")
    info = summary.select("feature", "title", "quantity", "op", "threshold", "status", "count_from", "scope")
    req_feats = info.filter(pl.col("scope") != "step")
    main = cross.filter(pl.col("level") == "all").drop("level", "grp")
    requests = req_feats.join(main, on="feature", how="inner").with_columns(
        pl.struct("count_from", "scope", "crossed_estimated", "unknown").map_elements(
            lambda d: _method(d["count_from"], d["scope"], d["crossed_estimated"], d["unknown"]),
            return_dtype=pl.Utf8).alias("method")
    ).drop("count_from", "scope").sort("feature")
    per = {lvl: cross.filter(pl.col("level") == lvl).drop("level").rename({"grp": lvl}).select(
        "feature", lvl, "requests", "crossed", "share_of_engine_requests", "all_requests", "share_of_all_requests",
        "prefill_token_share_of_all_requests")
        for lvl in ("workload", "day")}
    step_info = info.filter(pl.col("scope") == "step").drop("scope")
    step_rows = {lvl: step_info.join(steps.filter(pl.col("level") == lvl).drop("level").rename({"grp": lvl}),
                                     on="feature", how="inner").with_columns(
        pl.when(pl.col("estimated")).then(pl.lit("estimate: running requests of the periodic line"))
        .otherwise(pl.lit("step lines: ") + pl.col("kinds")).alias("method")).drop("count_from", "estimated")
        for lvl in ("deployment", "day")}
    not_counted = summary.filter(~pl.col("evaluated")).select(
        "feature", "title", "quantity", "status", pl.col("count_from").alias("needs"))
    quiet_steps = step_info.filter(~pl.col("feature").is_in(steps["feature"].unique().to_list())
                                   & pl.col("feature").is_in(summary.filter("evaluated")["feature"].to_list()))
    notes = _notes(con, settings, used, quiet_steps)
    scrapes = (scrape_intervals(con, sel.window.since, sel.window.until)
               if scrapes_stored(con) and step_kernel.scrapes_possible(con) else None)
    if scrapes is not None and scrapes.height:  # Prometheus gauges stand in for step lines there (engine_steps kind `scrape`)
        every = [f"{d} (every {i:g} s)" if i is not None else d
                 for d, i in scrapes.select("deployment", "interval_s").rows()]
        notes.append("step rows of " + ", ".join(every) + " are Prometheus scrapes, sampled at the scrape interval "
                     "where the logs print no step lines: a crossing between two scrapes is missed")
    # without per-request rows the engines' token histograms answer, in a table of their own
    from_buckets, bucket_notes = bucket_crossings(sel, settings, starts) if sel.requests == 0 else (None, [])
    notes += bucket_notes
    tables = {
        "requests": requests,
        "by_workload": per["workload"],
        "by_day": per["day"],
        "steps": step_rows["deployment"],
        "steps_by_day": step_rows["day"],
        "settings": settings.filter(pl.col("config_id").is_in(list(used))).select(
            "deployment", "start_ts", "engine", "version", "feature", "status", "threshold", "threshold_source",
            "assumed"),
        "not_counted": not_counted,
    }
    titles = {
        "requests": "request-scoped features: requests over the threshold",
        "by_workload": "per workload",
        "by_day": "per day (UTC)",
        "steps": "step-scoped features, per deployment (from the engine's step and periodic lines)",
        "steps_by_day": "step-scoped features, per day",
        "settings": "effective settings per engine start",
        "not_counted": "features not counted (off, not applicable, or not in these logs)",
    }
    if from_buckets is not None and from_buckets.height:
        tables["histogram_requests"] = from_buckets
        titles["histogram_requests"] = ("request-scoped features from the engines' token histograms (bucket-derived: "
                                        "exact on a bucket edge, else a bound), per deployment and model")
    params = {**sel.window.to_dict(), "requests": sel.requests, "features": len(cat),
              "catalogues": cat.files, "gpu_mem_gib": gpu_mem_gib, "max_gap_s": max_gap_s}
    return Analysis("thresholds", params, tables, titles, {**DEFINITIONS, **_quantity_defs(cat), **(
        BUCKET_DEFINITIONS if "histogram_requests" in tables else {})}, notes)


def _quantity_defs(cat: Catalogue) -> dict[str, str]:
    used = {f.quantity for f in cat if f.countable}
    return {f"quantity {q}": QUANTITIES[q][1] for q in sorted(used)}


def _starts_in_window(starts: pl.DataFrame, sel: Selection) -> set[str]:
    """Engine starts (queries/engine_starts.sql, as prepare_starts read them: one query less on Spark) whose
    life [ts, next start) overlaps the window."""
    since, until = sel.window.since, sel.window.until
    keep = pl.lit(True)
    if until is not None:
        keep = keep & (pl.col("ts") < until)
    if since is not None:
        keep = keep & (pl.col("next_ts").is_null() | (pl.col("next_ts") > since))
    return set(starts.filter(keep)["config_id"].to_list())


def _notes(con: duckdb.DuckDBPyConnection, settings: pl.DataFrame, used: set[str],
           quiet_steps: pl.DataFrame) -> list[str]:
    notes: list[str] = []
    use = queries.run(con, "threshold_config_use")
    fallback = use.filter(pl.col("config_id").str.starts_with("default:"))
    if fallback.height:
        n = int(fallback["requests"].sum())
        notes.append(f"{n:,} requests have no engine start in the store (no startup lines for their deployment): "
                     "their thresholds are the engine's defaults; requests of an unknown engine are counted only "
                     "for features of any engine")
    assumed = sorted({a for a, c in zip(settings["assumed"], settings["config_id"], strict=True)
                      if a and c in used for a in a.split("; ")})
    if assumed:
        notes.append("not in the logs, assumed (catalogue [assume]): " + "; ".join(assumed))
    unknown = settings.filter(pl.col("config_id").is_in(list(used)), pl.col("status") == "unknown",
                              pl.col("evaluate"))["feature"].unique().sort().to_list()
    if unknown:
        notes.append("counted as if on, since the logs cannot say whether it was (in-house kernel, environment "
                     "variable or user threshold): " + ", ".join(unknown))
    if quiet_steps.height:
        notes.append("no step rows carry the quantity of " + ", ".join(quiet_steps["feature"].to_list())
                     + " (vLLM logs only a periodic line: per-step batch sizes and tokens need step logs)")
    return notes


def feature_table(cat: Catalogue) -> pl.DataFrame:
    """The catalogue itself, one row per feature (for `attribution thresholds --list`)."""
    rows: list[dict[str, Any]] = []
    for f in cat:
        rows.append({
            "feature": f.id, "engine": ",".join(f.engines), "title": f.title, "flag": f.flag or "",
            "quantity": f.quantity, "op": f.op, "scope": f.scope,
            "default": " | ".join(f"{r.value}" + (f" ({r.note})" if r.note else "") for r in f.default)
            if f.override is None else f"{f.override:g} (--threshold)",
            "count_from": f.count_from, "source": f.source, "unverified": f.unverified,
        })  # fmt: skip
    return pl.DataFrame(rows)
