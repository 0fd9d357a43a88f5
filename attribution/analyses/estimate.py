"""Concurrency for arrival-only sources (public traces): replay each deployment's arrivals through the
simulator's service model (a scenario of attribution.simulate, one pod), then run the same sweep over the
simulated intervals. The result is an estimate and says which assumptions made it."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from attribution.analyses.common import Selection, frames_connection, select
from attribution.analyses.exact import exact_frames
from attribution.db import as_int
from attribution.errors import AttributionError

TS = pl.Datetime("us", "UTC")


MAX_PODS = 256
# Longer requests are not replayed: beyond any served model's context (10M tokens), a count the schema admits
# (up to 2^53) but no engine ran, and replaying it would take the simulator minutes of chunked prefill.
MAX_REPLAY_TOKENS = 10_000_000


def _service_model(name: str, longest: int):
    try:
        from attribution.simulate import load_scenario
    except ImportError:  # pragma: no cover - the simulator ships with the package
        raise AttributionError("arrival-only deployments need the simulator (attribution.simulate)") from None
    scn = load_scenario(name)
    # Room for the longest replayed request: a trace's prompt must never be refused.
    max_len = max(scn.max_model_len, longest + 1)
    memory = replace(scn.memory, kv_pool_tokens=max(scn.memory.kv_pool_tokens, max_len))
    return replace(scn, pods=1, max_model_len=max_len, memory=memory, prefix_cache=False)


def assumptions(scn, max_queue_p99_s: float) -> str:
    prof = scn.phases[0].profile
    return (
        f"service model `{scn.name}`: pods with the {prof.name} step-cost profile ({prof.engine} {prof.version}, "
        f"{prof.batching} batching), each running at most {scn.running_cap} requests, "
        f"{scn.max_num_batched_tokens:,} batched tokens per step and a KV pool of {scn.memory.kv_pool_tokens:,} "
        f"tokens, no prefix cache, first come first served; requests dealt round robin to the fewest pods (a "
        f"power of two, at most {MAX_PODS}) that keep the replay's p99 queue time under {max_queue_p99_s:g} s; "
        "the counts are summed over those pods"
    )


def simulated_requests(arrivals: pl.DataFrame, scn, max_queue_p99_s: float) -> tuple[pl.DataFrame, int]:
    """The replayed requests in the joined_requests shape (the trace's own columns, simulated timings) and
    the number of pods used."""
    from attribution.simulate import simulate

    arrivals = arrivals.sort("arrival", maintain_order=True).with_row_index("session")
    replay = arrivals.select("arrival", "prompt_tokens", "output_tokens")
    pods = 1
    while True:
        sim = simulate(replace(scn, pods=pods), arrivals=replay, workers=1, steps=False).requests
        p99 = sim["queue_s"].quantile(0.99, interpolation="linear") or 0.0
        if p99 <= max_queue_p99_s or pods >= MAX_PODS:
            break
        pods *= 2
    # the simulator numbers replayed requests (its `session`) in arrival order: join them back on it
    sim = sim.select(pl.col("session").cast(pl.UInt32), "arrival", "first_token", "finished", "queue_s", "ttft_s",
                     "tpot_s", "e2e_s", "prompt_tokens", "output_tokens")
    out = arrivals.drop("arrival", "prompt_tokens", "output_tokens").join(sim, on="session", how="inner")
    if out.height != arrivals.height:
        raise AttributionError("the simulator did not return every replayed request")
    return out.drop("session").with_columns(
        pl.lit("ok").alias("status"), pl.col("arrival", "first_token", "finished").cast(TS)
    ), pods


def estimate_concurrency(sel: Selection, deployments: list[str], *, service_model: str, per_group: bool,
                         timeseries: bool, bucket_s: int | None, max_queue_p99_s: float = 1.0,
                         percentiles: list[float] | None = None
                         ) -> tuple[pl.DataFrame, pl.DataFrame | None, list[str]]:
    """Stats (and a time series) for arrival-only `deployments`, each replayed on its own simulated pod."""
    arrivals = sel.run("estimate_arrivals", deployments=deployments)
    size = pl.col("prompt_tokens") + pl.col("output_tokens").fill_null(1)
    too_long = arrivals.filter(size > MAX_REPLAY_TOKENS).height
    arrivals = arrivals.filter(size.fill_null(0) <= MAX_REPLAY_TOKENS)
    skipped = [f"{too_long:,} arrivals longer than {MAX_REPLAY_TOKENS:,} tokens (beyond any model's context) were "
               "not replayed"] if too_long else []
    if arrivals.is_empty():
        return pl.DataFrame(), None, skipped
    longest = as_int((arrivals["prompt_tokens"] + arrivals["output_tokens"].fill_null(1)).max())
    scn = _service_model(service_model, longest)
    parts, pods = [], {}
    for (dep,), part in arrivals.group_by("deployment", maintain_order=True):
        rows, pods[dep] = simulated_requests(part, scn, max_queue_p99_s)
        parts.append(rows)
    replayed = pl.concat(parts, how="vertical_relaxed")
    con = frames_connection(replayed)
    # the simulated rows go through the same selection and sweep as real ones
    est_sel = select(con, since=sel.window, by=sel.by)
    stats, series, _bucket_s = exact_frames(est_sel, per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                                            percentiles=percentiles)
    n = dict(est_sel.run("estimate_arrivals_by_deployment").iter_rows())
    notes = [
        f"ESTIMATE for {', '.join(f'{d} ({n.get(d, 0):,} arrivals, {k} pods)' for d, k in pods.items())}: the "
        f"trace has arrivals but no completion times, so they were replayed through the simulator; "
        f"{assumptions(scn, max_queue_p99_s)}. Real concurrency depends on the hardware, engine and settings "
        "that served the trace."
    ] + skipped
    return stats.with_columns(source=pl.lit("estimate")), series, notes
