"""Exact concurrency of a selection: the event sweep over its per-request intervals (attribution.analyses.sweep)
as stats and a time series, and the series' bucket width. Shared by the concurrency analysis and by its
estimate for arrival-only traces, which sweeps the simulator's replayed requests the same way."""

from __future__ import annotations

import polars as pl

from attribution.analyses import sweep
from attribution.analyses.common import Selection, percentile_list

NICE_BUCKETS_S = (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def pick_bucket_s(span_s: float, points: int = 500) -> int:
    """The smallest round bucket width giving at most `points` buckets over `span_s`."""
    for b in NICE_BUCKETS_S:
        if span_s / b <= points:
            return b
    return NICE_BUCKETS_S[-1]


def exact_frames(sel: Selection, *, per_group: bool, timeseries: bool, bucket_s: int | None,
                 percentiles: list[float] | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """Sweep the intervals of `sel` (its connection's int_analysis_requests): stats and, if asked, a time series
    (attribution.analyses.sweep) and its bucket in seconds (picked from the sweep's span when not given)."""
    parts = sweep.segments(sel.con, sel.window.since, sel.window.until, per_group)
    stats = sweep.stats(parts, tuple(percentile_list(percentiles))).with_columns(source=pl.lit("exact"))
    series = None
    if timeseries:
        if bucket_s is None:
            bucket_s = pick_bucket_s(sweep.span_s(parts))
        series = sweep.timeseries(parts, int(bucket_s * 1_000_000))
    return stats, series, bucket_s
