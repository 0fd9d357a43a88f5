"""The concurrency sweep as SQL window functions, for an engine where the per-request rows should stay on the
executors (Spark): queries/int_concurrency_sweep.sql builds the step functions there, and only their
per-value histogram, peaks and (if asked) time series come back; the stats are then made from them with
attribution.analyses.sweep's own definitions (`weighted`, `seen_weighted`, `stats_frame`), so both engines
give the same table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from attribution import queries
from attribution.analyses import sweep
from attribution.analyses.common import Selection

TIMED = ("running", "waiting", "in_system", "kv_tokens")  # the time-weighted metrics, in sweep.stats' order
_PART = ["by_group", "deployment", "grp"]


def exact_frames(sel: Selection, *, per_group: bool, timeseries: bool, bucket_s: int | None,
                 percentiles: list[float]) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """attribution.analyses.exact.exact_frames, swept by the connection's engine."""
    sel._check()
    return sweep_frames(sel.con, sel.window.since, sel.window.until, per_group=per_group, timeseries=timeseries,
                        bucket_s=bucket_s, percentiles=percentiles)


def sweep_frames(con: Any, since: datetime | None, until: datetime | None, *, per_group: bool,
                 timeseries: bool, bucket_s: int | None, percentiles: list[float]
                 ) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """The stats (sweep.stats + source) and, if asked, the time series (sweep.timeseries) of the sweep of the
    connection's int_analysis_requests over [since, until), and the series' bucket in seconds."""

    sweep_states(con, since, until, per_group)
    ps = tuple(percentiles)
    peaks = queries.run(con, "concurrency_sweep_peaks")
    stats = stats_from(queries.run(con, "concurrency_sweep_histogram"), peaks, ps)
    stats = stats.with_columns(source=pl.lit("exact"))
    series = None
    if timeseries:
        if bucket_s is None:
            bucket_s = sweep.pick_bucket_s(span_s(peaks))
        series = queries.run(con, "concurrency_sweep_timeseries", bucket_us=int(bucket_s * 1_000_000))
        series = series.select(pl.col("deployment"), pl.col("ts").cast(pl.Datetime("us", "UTC")),
                               *(pl.col(c).cast(pl.Int64) for c in ("running_max", "waiting_max", "in_system_max")),
                               *(pl.col(c).cast(pl.Float64) for c in ("in_system_mean", "kv_tokens_max", "covered_s")))
    return stats, series, bucket_s


def sweep_states(con: Any, since: datetime | None, until: datetime | None, per_group: bool) -> None:
    """The temporary table int_concurrency_sweep: the sweep's states, kept where the engine runs (the requests
    it reads, concurrency_requests, likewise)."""
    queries.materialize(con, "concurrency_requests", since=since, until=until)
    queries.materialize(con, "int_concurrency_sweep", since=since, until=until, per_group=per_group)


def span_s(peaks: pl.DataFrame) -> float:
    """sweep.span_s from concurrency_sweep_peaks: the longest deployment's sweep, in seconds."""
    whole = peaks.filter(~pl.col("by_group") & (pl.col("metric") == "in_system"))
    spans = ((whole["t_last"] - whole["t_first"]) / 1e6).to_list()
    return max(spans, default=0.0)


def stats_from(hist: pl.DataFrame, peaks: pl.DataFrame, percentiles: tuple[float, ...]) -> pl.DataFrame:
    """sweep.stats from the histogram (concurrency_sweep_histogram) and peaks (concurrency_sweep_peaks): each
    deployment's rows, then each group's, then the seen_at_arrival rows, as sweep.stats orders them."""
    top = {(r["by_group"], r["deployment"], r["grp"], r["metric"]): r for r in peaks.iter_rows(named=True)}
    by_part = hist.sort(*_PART, "metric", "value", nulls_last=True).partition_by(
        [*_PART, "metric"], as_dict=True, maintain_order=True)
    parts = sorted({k[:3] for k in top}, key=lambda k: (k[0], k[1] is None, k[1] or "", k[2] is None, k[2] or ""))
    rows: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []
    for part in parts:
        by_group, deployment, grp = part
        split_known = top[(*part, "running")]["peak"] > 0
        for metric in TIMED:
            if metric != "in_system" and not split_known:
                continue
            h = by_part[(*part, metric)]
            p = top[(*part, metric)]
            rows.append({"deployment": deployment, "grp": grp, "metric": metric, "peak": p["peak"],
                         "peak_t": p["peak_t"], "arrivals": None,
                         **sweep.weighted(h["value"].to_numpy(), h["weight"].to_numpy().astype(np.int64),
                                          percentiles)})
        if (*part, "seen_at_arrival") in by_part:
            h = by_part[(*part, "seen_at_arrival")]
            p = top[(*part, "seen_at_arrival")]
            seen.append({"deployment": deployment, "grp": grp, "metric": "seen_at_arrival", "peak": p["peak"],
                         "peak_t": p["peak_t"], **sweep.seen_weighted(h["value"].to_numpy(),
                                                                      h["weight"].to_numpy(), percentiles)})
    return sweep.stats_frame(rows + seen, percentiles)
