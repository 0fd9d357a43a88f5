"""Exact concurrency of a selection: the event sweep over its per-request intervals (attribution.analyses.sweep)
as stats and a time series, and the series' bucket width. Shared by the concurrency analysis and by its
estimate for arrival-only traces, which sweeps the simulator's replayed requests the same way. The sweep is
reduced one deployment at a time, so only one deployment's step function is held at once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from attribution import queries
from attribution.analyses import sweep, sweep_sql
from attribution.analyses.common import Selection, percentile_list
from attribution.db import shed_cache


@dataclass
class Held:
    """What capacity's estimates read of one part's step function (sweep.Segments), in 14 bytes a segment
    instead of 56-72: its instants, the requests holding a slot (running + unknown), whether any waited and
    whether any was in the system; the durations follow from the instants and the last one."""

    deployment: str | None
    grp: str | None
    t: np.ndarray
    held: np.ndarray  # int32
    waiting: np.ndarray  # bool: waiting > 0
    busy: np.ndarray  # bool: in_system > 0
    last_dur: int

    @classmethod
    def of(cls, s: sweep.Segments) -> Held:
        return cls(s.deployment, s.grp, s.t, (s.running + s.unknown).astype(np.int32), s.waiting > 0,
                   s.in_system > 0, int(s.dur[-1]) if s.dur.size else 0)

    @property
    def dur(self) -> np.ndarray:
        """The segments' durations in microseconds (sweep.Segments.dur)."""
        d = np.empty_like(self.t)
        np.subtract(self.t[1:], self.t[:-1], out=d[:-1])
        if d.size:
            d[-1] = self.last_dur
        return d


_SHARED: dict[int, dict[tuple[object, ...], list[Held]]] = {}  # id(selection) -> its sweeps, inside shared_sweeps


@contextlib.contextmanager
def shared_sweeps(sel: Selection) -> Iterator[None]:
    """Inside it, the sweep of `sel` keeps what capacity's estimates read of it (Held) for every caller: capacity
    sweeps the window for its estimates after its concurrency analysis swept the same window (half its time
    on a million requests). Only for its duration, so nothing holds the arrays after."""
    outer = id(sel) in _SHARED
    _SHARED.setdefault(id(sel), {})
    try:
        yield
    finally:
        if not outer:
            _SHARED.pop(id(sel), None)


def _key(sel: Selection, per_group: bool) -> tuple[object, ...]:
    return sel.serial, sel.window.since, sel.window.until, per_group


def selection_held(sel: Selection, per_group: bool) -> list[Held]:
    """The Held arrays of each part of the selection's sweep (each deployment's, then, with `per_group`, its
    groups'): those an exact_frames call inside the same shared_sweeps kept, else swept without the live KV
    tokens."""
    memo = _SHARED.get(id(sel))
    if memo is not None and _key(sel, per_group) in memo:
        return memo[_key(sel, per_group)]
    kept: tuple[list[Held], list[Held]] = ([], [])  # sweep.segments' order: deployments, then groups
    if queries.spark_connection(sel.con) is not None:  # (every row in one fetch there)
        df = sweep.interval_requests(sel.con, sel.window.since, sel.window.until, per_group, kv=False)
        b = sweep.bounds(df, sel.window.since, sel.window.until)
        swept = sweep.iter_segments(df, b, per_group, kv=False)
    else:
        b, _, parts = _request_parts(sel)
        swept = sweep.part_segments(parts(sweep.interval_columns(per_group, False)), b, per_group, kv=False)
    for whole, s in swept:
        kept[not whole].append(Held.of(s))
    held = kept[0] + kept[1]
    if memo is not None:
        memo[_key(sel, per_group)] = held
    return held


def _request_parts(sel: Selection) -> tuple[Any, list[str | None],
                                            Callable[[list[str]], Iterator[tuple[str | None, pl.DataFrame]]]]:
    """The sweep's bounds over the rows of `sel` it reads (sweep.interval_requests), their deployments in order of
    first appearance, and those rows' given columns one deployment at a time in that order: at 6M requests no frame of every deployment's rows
    sits beside the sweep's arrays. DuckDB's cached blocks are shed after each fetch (shed_cache)."""
    con, since, until = sel.con, sel.window.since, sel.window.until
    b = sweep.request_bounds(con, since, until)
    deployments = sweep.request_deployments(con, since, until)

    def parts(columns: list[str]) -> Iterator[tuple[str | None, pl.DataFrame]]:
        for dep in deployments:
            part = sweep.deployment_requests(con, since, until, dep, columns)
            shed_cache(con)
            yield dep, part
            del part  # (before the next is fetched)
    return b, deployments, parts


def exact_frames(sel: Selection, *, per_group: bool, timeseries: bool, bucket_s: int | None,
                 percentiles: list[float] | None = None, metrics: tuple[str, ...] | None = None
                 ) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """Sweep the intervals of `sel` (its connection's int_analysis_requests): stats (of `metrics` only, when
    given: sweep.stats) and, if asked, a time series (attribution.analyses.sweep) and its bucket in seconds
    (picked from the sweep's span when not given). Each deployment is reduced before the next is swept."""
    if queries.spark_connection(sel.con) is not None:
        # swept where the rows are: only the histograms, peaks and series come back (sweep_sql)
        return sweep_sql.exact_frames(sel, per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                                      percentiles=percentile_list(percentiles))
    kv = timeseries or metrics is None or "kv_tokens" in metrics
    ps = tuple(percentile_list(percentiles))
    b, deployments, parts = _request_parts(sel)
    if timeseries and bucket_s is None:  # (the span from aggregate queries: the rows are fetched once, to sweep)
        bucket_s = sweep.pick_bucket_s(sweep.deployment_span_s(sel.con, sel.window.since, sel.window.until,
                                                               deployments, b))
    memo = _SHARED.get(id(sel))
    held: tuple[list[Held], list[Held]] | None = ([], []) if memo is not None and _key(sel, per_group) not in memo \
        else None
    # sweep.stats' order: every deployment's metric rows, every group's, then their seen_at_arrival rows
    rows: dict[str, list[dict[str, Any]]] = {"whole": [], "groups": [], "whole_seen": [], "groups_seen": []}
    series = []
    for whole, s in sweep.part_segments(parts(sweep.interval_columns(per_group, kv)), b, per_group, kv=kv):
        r, seen = sweep.stat_rows(s, ps, metrics)
        rows["whole" if whole else "groups"].extend(r)
        rows["whole_seen" if whole else "groups_seen"].extend(seen)
        if timeseries and whole:
            assert bucket_s is not None  # picked above when a series is asked for
            series.append(sweep.timeseries([s], int(bucket_s * 1_000_000)))
        if held is not None:
            held[not whole].append(Held.of(s))
        del s  # (before the next part is swept)
    if held is not None and memo is not None:
        memo[_key(sel, per_group)] = held[0] + held[1]
    stats = sweep.stats_frame([r for k in rows for r in rows[k]], ps).with_columns(source=pl.lit("exact"))
    ts = None
    if timeseries:
        ts = pl.concat([sweep.timeseries([], 1), *series]).sort("deployment", "ts", nulls_last=True,
                                                                 maintain_order=True)
    return stats, ts, bucket_s
