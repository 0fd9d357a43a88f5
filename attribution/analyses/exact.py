"""Exact concurrency of a selection: the event sweep over its per-request intervals (attribution.analyses.sweep)
as stats and a time series, and the series' bucket width. Shared by the concurrency analysis and by its
estimate for arrival-only traces, which sweeps the simulator's replayed requests the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import polars as pl

from attribution import queries
from attribution.analyses import sweep, sweep_sql
from attribution.analyses.common import Selection, percentile_list

_SHARED: dict[int, dict[tuple[object, ...], list[sweep.Segments]]] = {}  # id(selection) -> its sweeps, inside shared_sweeps


@contextlib.contextmanager
def shared_sweeps(sel: Selection) -> Iterator[None]:
    """Inside it, the sweep of `sel` is computed once per `per_group` and given to every caller (capacity sweeps
    the window for its estimates after its concurrency analysis swept the same window: half its time on a
    million requests). Only for its duration, so nothing holds the segments after."""
    outer = id(sel) in _SHARED
    _SHARED.setdefault(id(sel), {})
    try:
        yield
    finally:
        if not outer:
            _SHARED.pop(id(sel), None)


def selection_segments(sel: Selection, per_group: bool, kv: bool = True) -> list[sweep.Segments]:
    """sweep.segments of the selection's window (shared inside shared_sweeps: a sweep with the live KV tokens
    serves a caller that does not need them)."""
    memo = _SHARED.get(id(sel))
    key = (sel.serial, sel.window.since, sel.window.until, per_group)
    for has_kv in (True,) if kv else (True, False):
        if memo is not None and (*key, has_kv) in memo:
            return memo[(*key, has_kv)]
    parts = sweep.segments(sel.con, sel.window.since, sel.window.until, per_group, kv=kv)
    if memo is not None:
        memo[(*key, kv)] = parts
    return parts


def exact_frames(sel: Selection, *, per_group: bool, timeseries: bool, bucket_s: int | None,
                 percentiles: list[float] | None = None, metrics: tuple[str, ...] | None = None
                 ) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """Sweep the intervals of `sel` (its connection's int_analysis_requests): stats (of `metrics` only, when
    given: sweep.stats) and, if asked, a time series (attribution.analyses.sweep) and its bucket in seconds
    (picked from the sweep's span when not given)."""
    if queries.spark_connection(sel.con) is not None:
        # swept where the rows are: only the histograms, peaks and series come back (sweep_sql)
        return sweep_sql.exact_frames(sel, per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                                      percentiles=percentile_list(percentiles))
    kv = timeseries or metrics is None or "kv_tokens" in metrics
    parts = selection_segments(sel, per_group, kv)
    stats = sweep.stats(parts, tuple(percentile_list(percentiles)), metrics).with_columns(source=pl.lit("exact"))
    series = None
    if timeseries:
        if bucket_s is None:
            bucket_s = sweep.pick_bucket_s(sweep.span_s(parts))
        series = sweep.timeseries(parts, int(bucket_s * 1_000_000))
    return stats, series, bucket_s
