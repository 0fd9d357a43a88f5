"""The concurrency sweep (the product path): per-deployment step functions of running, waiting and live KV
tokens over per-request intervals, their time-weighted statistics and time series, computed with NumPy in
seconds on millions of requests (one sort and a few running sums per deployment).

The same sweep in SQL window functions (queries/int_concurrency_sweep.sql and concurrency_sweep_timeseries.sql,
run on Spark by attribution.analyses.sweep_sql) and the test oracle tests/oracle/concurrency_stats.sql over it
state it declaratively; tests/test_concurrency.py checks that both give the same rows. Counts, durations, peaks and percentiles of counts are exact integer
arithmetic in both. The live KV tokens are running sums of fractional growth rates: both round them to a
thousandth of a token, and the two summation orders may leave that last digit apart (1e-3 token) where a
value falls on the rounding boundary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import polars as pl

from attribution import queries
from attribution.analyses.common import percentile_column
from attribution.db import as_int

SEGMENT_COLUMNS = ("deployment", "grp", "t", "dur_us", "arrivals", "running", "waiting", "unknown", "in_system",
                   "kv_start", "kv_end")
METRICS = ("running", "waiting", "in_system", "kv_tokens")


def epoch_us(t: datetime | None) -> int | None:
    """Microseconds since the epoch (DuckDB's epoch_us), None for None."""
    if t is None:
        return None
    return int(pl.Series([t]).dt.epoch("us")[0])


def round_half_up(v: np.ndarray) -> np.ndarray:
    """DuckDB's round() of a DOUBLE: the nearest integer, halves upwards (-2.5 -> -2)."""
    f = np.floor(v)
    return np.asarray(f + (v - f >= 0.5))


def round3(v: np.ndarray) -> np.ndarray:
    """DuckDB's round(x, 3) of a DOUBLE: round(x * 1000) / 1000."""
    return round_half_up(v * 1000.0) / 1000.0


@dataclass
class Segments:
    """One partition's step function (int_concurrency_sweep's rows for one deployment and group)."""

    deployment: str | None
    grp: str | None
    t: np.ndarray
    dur: np.ndarray
    arrivals: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    unknown: np.ndarray
    in_system: np.ndarray
    kv_start: np.ndarray | None  # None: swept without the live KV tokens (kv=False)
    kv_end: np.ndarray | None

    def frame(self) -> pl.DataFrame:
        n = self.t.size
        return pl.DataFrame({
            "deployment": pl.Series([self.deployment] * n, dtype=pl.Utf8),
            "grp": pl.Series([self.grp] * n, dtype=pl.Utf8),
            "t": self.t, "dur_us": self.dur, "arrivals": self.arrivals, "running": self.running,
            "waiting": self.waiting, "unknown": self.unknown, "in_system": self.in_system,
            "kv_start": self.kv_start, "kv_end": self.kv_end,
        })  # fmt: skip


@dataclass
class _Bounds:
    lo: int | None
    hi: int | None
    origin: int | None


def _column(df: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Values (nulls as 0) and a mask of the non-null ones."""
    s = df[name]
    return s.fill_null(0).to_numpy(), s.is_not_null().to_numpy()


@dataclass
class _Events:
    """One deployment's events (arrival, admission, first token, end of each request) in time order."""

    t: np.ndarray
    request: np.ndarray | None  # the request (row of the deployment's frame) of each event; None: not asked
    ints: np.ndarray  # (4, n) int8 (each -1, 0 or 1): arrivals, d_wait, d_run, d_unk
    floats: np.ndarray | None  # (3, n): d_c, d_r, d_b; None: the live KV tokens were not asked for

    def subset(self, of: np.ndarray) -> _Events:
        return _Events(self.t[of], None if self.request is None else self.request[of], self.ints[:, of],
                       None if self.floats is None else self.floats[:, of])


def _events(df: pl.DataFrame, b: _Bounds, kv: bool = True, requests: bool = True) -> _Events:
    """The sweep events (the oracle's `events`, `clipped`) for one deployment's requests: arrivals, admissions,
    first tokens (where admitted) and ends, in that order before the sort. Each delta array is filled in place
    (no zero columns concatenated) and the KV growth only with `kv`: on a million requests the copies, not
    the sort, were the cost."""
    ta = df["t_arrival"].to_numpy()
    te = df["t_end"].to_numpy()
    tadm, known = _column(df, "t_admit")
    tfirst, has_first = _column(df, "t_first")
    tgrow = np.where(has_first, tfirst, tadm)
    k = np.flatnonzero(known)
    n, nk = ta.size, k.size
    adm, grow, end = slice(n, n + nk), slice(n + nk, n + 2 * nk), slice(n + 2 * nk, None)
    t = np.concatenate([ta, tadm[k], tgrow[k], te])
    if b.lo is not None:
        np.maximum(t, b.lo, out=t)
    order = np.flatnonzero(t < b.hi) if b.hi is not None else np.arange(t.size)
    order = order[np.argsort(t[order])]
    kn = known.astype(np.int8)
    ints = np.zeros((4, t.size), np.int8)
    ints[0, :n] = (ta >= b.lo) if b.lo is not None else 1  # arrivals
    ints[1, :n], ints[1, adm] = kn, -1  # d_wait
    ints[2, adm], ints[2, end] = 1, -kn  # d_run
    ints[3, :n], ints[3, end] = 1 - kn, kn - 1  # d_unk
    floats = None
    if kv:
        prompt = df["prompt_tokens"].fill_null(0).cast(pl.Float64).to_numpy()
        output = df["output_tokens"].fill_null(0).cast(pl.Float64).to_numpy()
        growing = known & (te > tgrow)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(growing, output / np.where(growing, te - tgrow, 1).astype(np.float64), 0.0)
        jump = np.where(known & (te <= tgrow), output, 0.0)
        offset = rate * (tgrow - b.origin).astype(np.float64)
        floats = np.zeros((3, t.size))
        floats[0, adm], floats[0, grow], floats[0, end] = prompt[k], jump[k], np.where(known, -(prompt + jump), 0.0)
        floats[1, grow], floats[1, end] = rate[k], -rate  # d_r
        floats[2, grow], floats[2, end] = offset[k], np.where(known, -offset, 0.0)  # d_b
        floats = floats[:, order]
    request = np.concatenate([np.arange(n), k, k, np.arange(n)])[order] if requests else None
    return _Events(t[order], request, ints[:, order], floats)


def _sweep(e: _Events, b: _Bounds, deployment: str | None, grp: str | None) -> Segments:
    """The step function (the oracle's `instants` onwards) of one partition's events, in time order."""
    t = e.t
    if not t.size:
        empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
        return Segments(deployment, grp, empty_i, empty_i, empty_i, empty_i, empty_i, empty_i, empty_i, empty_f,
                        empty_f)
    first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    inst = t[first]
    # (each delta summed and accumulated in place, one at a time: on a million requests the temporaries, not
    # the results, set the peak)
    arrivals = np.add.reduceat(e.ints[0], first, dtype=np.int64)
    running, waiting, unknown = (np.cumsum(np.add.reduceat(e.ints[i], first, dtype=np.int64))
                                 for i in (2, 1, 3))
    in_system = running + waiting
    in_system += unknown
    t_next = np.empty_like(inst)
    t_next[:-1] = inst[1:]
    t_next[-1] = b.hi if in_system[-1] > 0 and b.hi is not None else inst[-1]
    kv_start = kv_end = None
    if e.floats is not None:
        c, r, bb = (np.cumsum(np.add.reduceat(e.floats[i], first)) for i in range(3))
        del first
        kv_start, kv_end = _kv(c, r, bb, inst, b.origin), _kv(c, r, bb, t_next, b.origin)
    t_next -= inst
    return Segments(deployment, grp, inst, t_next, arrivals, running, waiting, unknown, in_system, kv_start, kv_end)


def _kv(c: np.ndarray, r: np.ndarray, bb: np.ndarray, at: np.ndarray, origin: int | None) -> np.ndarray:
    """The live KV tokens at instants `at`: max(round3(c + r * (at - origin) - bb), 0) + 0.0 (no -0.0), each step
    in place on one array (the same operations in the same order as the expression)."""
    v = (at - origin).astype(np.float64)
    v *= r
    np.add(c, v, out=v)
    v -= bb
    v *= 1000.0  # round3: round_half_up(v * 1000) / 1000
    f = np.floor(v)
    v -= f
    np.greater_equal(v, 0.5, out=(ge := np.empty(v.size, bool)))
    np.add(f, ge, out=f)
    f /= 1000.0
    np.maximum(f, 0.0, out=f)
    f += 0.0
    return np.asarray(f)


def segments(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
             per_group: bool, kv: bool = True) -> list[Segments]:
    """The sweep of the connection's int_analysis_requests: one Segments per deployment (grp None) and, with
    `per_group`, per deployment and group. A deployment's events are sorted once; each group's are a subset
    of them, already in order. Without `kv` the live KV tokens are not computed (kv_start/kv_end None)."""
    return sweep_requests(interval_requests(con, since, until, per_group, kv), since, until, per_group, kv=kv)


def interval_requests(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
                      per_group: bool = True, kv: bool = True) -> pl.DataFrame:
    """The rows of int_analysis_requests the sweep of [since, until) reads: those with an interval touching it;
    without `per_group` no grp column, without `kv` no token counts (the sweep would not read them: at 6M
    requests the group labels alone are ~100 MB)."""
    columns = interval_columns(per_group, kv)
    return queries.run_columns(con, "concurrency_requests", None if per_group and kv else columns, since=since,
                               until=until)


def interval_columns(per_group: bool, kv: bool) -> list[str]:
    """The columns of interval_requests' rows (without `per_group` no grp, without `kv` no token counts)."""
    return ["deployment", *(["grp"] if per_group else []), "t_arrival", "t_admit", "t_first", "t_end",
            *(["prompt_tokens", "output_tokens"] if kv else [])]


TIME_COLUMNS = ["t_arrival", "t_admit", "t_first", "t_end"]  # what requests_span_s reads


def request_bounds(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> _Bounds:
    """`bounds` of interval_requests' rows from one aggregate query, without fetching them."""
    n, max_end, first = queries.run_columns(
        con, "concurrency_requests", ["count(*) as n", "max(t_end) as max_end", "min(t_arrival) as first"],
        since=since, until=until).row(0)
    lo, until_us = epoch_us(since), epoch_us(until)
    his = [x for x in (until_us, as_int(max_end) if n else None) if x is not None]
    return _Bounds(lo, min(his) if his else None, as_int(first) if n else None)


def request_deployments(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None
                        ) -> list[str | None]:
    """The deployments of interval_requests' rows in order of first appearance (deployment_parts' order)."""
    deps = queries.run_columns(con, "concurrency_requests", ["deployment"], since=since, until=until)["deployment"]
    return deps.unique(maintain_order=True).to_list()


def deployment_requests(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
                        deployment: str | None, columns: list[str]) -> pl.DataFrame:
    """`columns` of one deployment's interval_requests rows, in their order there (deployment_parts' part)."""
    return queries.run_columns(con, "concurrency_requests", columns, since=since, until=until,
                               where=("deployment is not distinct from $deployment", {"deployment": deployment}))


# deployment_span_s' aggregates of one deployment's rows: each event column clipped to the sweep's start ($lo), kept
# before its end ($hi) as parts_span_s keeps them (the admission and growth instants only where the admission is known)
_CLIPPED = {
    "arrival": "greatest(t_arrival, coalesce($lo::bigint, t_arrival))",
    "admit": "case when t_admit is not null then greatest(t_admit, coalesce($lo::bigint, t_admit)) end",
    "grow": "case when t_admit is not null then greatest(coalesce(t_first, t_admit), "
            "coalesce($lo::bigint, t_first, t_admit)) end",
    "end": "greatest(t_end, coalesce($lo::bigint, t_end))",
}
_SPAN_COLUMNS = [
    *(f"min({c}) filter (where $hi::bigint is null or {c} < $hi) as first_{k}" for k, c in _CLIPPED.items()),
    *(f"max({c}) filter (where $hi::bigint is null or {c} < $hi) as last_{k}" for k, c in _CLIPPED.items()),
    *(f"count({_CLIPPED[k]}) filter (where $hi::bigint is null or {_CLIPPED[k]} < $hi) as kept_{k}"
      for k in ("arrival", "end")),
]


def deployment_span_s(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
                      deployments: Iterable[str | None], b: _Bounds) -> float:
    """parts_span_s of interval_requests' rows of each of `deployments`, from one aggregate query a deployment
    (its first and last kept instants, its arrivals and ends kept) instead of fetching their time columns."""
    best = 0.0
    for dep in deployments:
        row = queries.run_columns(con, "concurrency_requests", _SPAN_COLUMNS, since=since, until=until, where=(
            "deployment is not distinct from $deployment", {"deployment": dep, "lo": b.lo, "hi": b.hi})).row(
            0, named=True)
        firsts = [v for k, v in row.items() if k.startswith("first_") and v is not None]
        if not firsts:
            continue
        first = min(firsts)
        last = max(v for k, v in row.items() if k.startswith("last_") and v is not None)
        if row["kept_arrival"] > row["kept_end"] and b.hi is not None:  # busy at the end bound
            last = b.hi
        best = max(best, (as_int(last) - as_int(first)) / 1e6)
    return best


def sweep_requests(df: pl.DataFrame, since: datetime | None, until: datetime | None, per_group: bool,
                   deployments: set[str | None] | None = None, kv: bool = True) -> list[Segments]:
    """`segments` of interval_requests' rows `df` for [since, until); with `deployments`, only theirs (the
    bounds still come from every row, so each one's segments are those of the whole sweep)."""
    whole: list[Segments] = []
    groups: list[Segments] = []
    for is_whole, part in iter_segments(df, bounds(df, since, until), per_group, deployments, kv):
        (whole if is_whole else groups).append(part)
    return whole + groups


def bounds(df: pl.DataFrame, since: datetime | None, until: datetime | None) -> _Bounds:
    """The sweep's clip (since), end (until, else the last end) and origin (the first arrival) over `df`."""
    lo, until_us = epoch_us(since), epoch_us(until)
    max_end = as_int(df["t_end"].max()) if df.height else None
    his = [x for x in (until_us, max_end) if x is not None]
    return _Bounds(lo, min(his) if his else None, as_int(df["t_arrival"].min()) if df.height else None)


def deployment_parts(df: pl.DataFrame) -> Iterator[tuple[str | None, pl.DataFrame]]:
    """Each deployment's rows of `df` in order of first appearance, one at a time, by one filter a deployment
    (partition_by would copy every deployment's rows at once: at 6M requests that doubled the frame; a
    group_by of the row indices held ~650 MB beside a 6M-row frame and took 2.5x the CPU of the filters)."""
    for dep in df["deployment"].unique(maintain_order=True).to_list():
        yield dep, df.filter(pl.col("deployment").eq_missing(dep))


def iter_segments(df: pl.DataFrame, b: _Bounds, per_group: bool, deployments: set[str | None] | None = None,
                  kv: bool = True) -> Iterator[tuple[bool, Segments]]:
    """The sweep of `df` one part at a time, as (whole, Segments): each deployment's (whole True, grp None),
    then, with `per_group`, each of its groups' (their events are a subset of the deployment's, already in
    order). A caller that reduces each part before taking the next holds one part's arrays, not the
    window's (at 6M requests those were 4 GB)."""
    if not df.height:
        return
    yield from part_segments(((dep, part) for dep, part in deployment_parts(df)
                              if deployments is None or dep in deployments), b, per_group, kv)


def part_segments(parts: Iterable[tuple[str | None, pl.DataFrame]], b: _Bounds, per_group: bool, kv: bool = True
                  ) -> Iterator[tuple[bool, Segments]]:
    """iter_segments of each deployment's rows, one (deployment, rows) of `parts` at a time (a caller that fetches
    them one deployment at a time holds no frame of every deployment's rows)."""
    for dep, part in parts:
        e = _events(part, b, kv, per_group)
        yield True, _sweep(e, b, dep, None)
        if per_group:
            names = part["grp"].unique(maintain_order=True)
            code = part["grp"].replace_strict(names, pl.int_range(names.len(), eager=True),
                                              return_dtype=pl.Int64).to_numpy()[e.request]
            e.request = None  # (the groups' subsets do not need it)
            for i, g in enumerate(names.to_list()):
                yield False, _sweep(e.subset(code == i), b, dep, g)
            del code
        del e, part  # (before the next deployment's rows are fetched)


def requests_span_s(df: pl.DataFrame, b: _Bounds) -> float:
    """span_s of the sweep of `df` without sweeping it: per deployment, from its first event to its last (after
    the clip to the bounds), or to the end bound when more requests arrived than ended before it (the last
    state is then still busy). Lets a caller pick a series' bucket before it sweeps deployment by deployment."""
    return parts_span_s(deployment_parts(df), b)


def parts_span_s(parts: Iterable[tuple[str | None, pl.DataFrame]], b: _Bounds) -> float:
    """requests_span_s of each deployment's rows (their TIME_COLUMNS), one (deployment, rows) at a time."""
    best = 0.0
    for _, part in parts:
        ta, te = part["t_arrival"].to_numpy(), part["t_end"].to_numpy()
        tadm, known = _column(part, "t_admit")
        tfirst, has_first = _column(part, "t_first")
        k = np.flatnonzero(known)
        tadm, tgrow = tadm[k], np.where(has_first, tfirst, tadm)[k]
        t = np.concatenate([ta, tadm, tgrow, te])
        if b.lo is not None:
            np.maximum(t, b.lo, out=t)
        kept = t < b.hi if b.hi is not None else np.ones(t.size, bool)
        if not kept.any():
            continue
        first, last = int(t[kept].min()), int(t[kept].max())
        busy = int(kept[:ta.size].sum()) > int(kept[-te.size:].sum())  # arrivals kept minus ends kept
        if busy and b.hi is not None:
            last = b.hi
        best = max(best, (last - first) / 1e6)
    return best


def frame(parts: list[Segments]) -> pl.DataFrame:
    """The segment rows: one per (deployment, group, instant)."""
    schema = {"deployment": pl.Utf8, "grp": pl.Utf8, "t": pl.Int64, "dur_us": pl.Int64, "arrivals": pl.Int64,
              "running": pl.Int64, "waiting": pl.Int64, "unknown": pl.Int64, "in_system": pl.Int64,
              "kv_start": pl.Float64, "kv_end": pl.Float64}
    return pl.concat([pl.DataFrame(schema=schema), *(p.frame() for p in parts)])


def _first_at_max(values: np.ndarray, t: np.ndarray) -> tuple[Any, int]:
    i = int(np.argmax(values))
    return values[i], int(t[i])


CONCURRENCY_PERCENTILES = (50.0, 90.0, 95.0, 99.0)  # the percentiles of a sweep when none are asked for


def quantile_fractions(percentiles: tuple[float, ...] | list[float]) -> list[float]:
    """Percentiles (99.9) as the fractions the SQL compares with (0.999, rounded to 6 decimals: its DECIMAL)."""
    return [round(p / 100, 6) for p in percentiles]


def _time_weighted(value: np.ndarray, dur: np.ndarray, percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES
                   ) -> dict[str, Any]:
    """mean and the smallest values covering each percentile's share of the time (the oracle's
    `weighted`)."""
    if value.size and value.min() >= 0 and value.max() < 1 << 26 and np.array_equal(value, np.floor(value)):
        # whole numbers (counts, whole tokens): time per value by counting, no sort
        iv = value.astype(np.int64)
        vals = np.flatnonzero(np.bincount(iv))
        durs = np.bincount(iv, weights=dur)[vals].astype(np.int64)
        vals = vals.astype(np.float64)
    else:
        order = np.argsort(value, kind="stable")
        v, d = value[order], dur[order]
        first = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
        vals, durs = v[first], np.add.reduceat(d, first)
    return weighted(vals, durs, percentiles)


def weighted(vals: np.ndarray, durs: np.ndarray, percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES
             ) -> dict[str, Any]:
    """_time_weighted of the histogram: distinct values `vals` (ascending, float) and the time at each
    (`durs`, int64 microseconds; a value held only for 0 us is there with 0)."""
    cum = np.cumsum(durs)
    total = int(cum[-1])
    out: dict[str, Any] = {"mean": float(np.sum(vals * durs.astype(np.float64)) / total) if total else None,
                           "span_s": total / 1e6}
    # `cum >= q * total` compares exactly in SQL (a DECIMAL(18, 6) times an integer): so here, in integers:
    # int64 where no product can pass 2^63 (0 <= cum <= total), else Python's (an object array: slow on the
    # millions of distinct kv_tokens values)
    big = None
    for p, q in zip(percentiles, quantile_fractions(percentiles), strict=True):
        f = Fraction(f"{q:.6f}")
        if cum.dtype.kind == "i" and total >= 0 and total * f.denominator < 1 << 63:
            hit = cum * f.denominator >= f.numerator * total
        else:
            big = cum.astype(object) if big is None else big
            hit = big * f.denominator >= f.numerator * total
        out[percentile_column(p)] = float(vals[np.argmax(hit)])
    return out


def stats(parts: list[Segments], percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES,
          metrics: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Per deployment, group and metric: peak, time-weighted mean and percentiles (without ordering), with `$quantiles` = quantile_fractions of
    `percentiles` (columns p50, p99_9, ...). `metrics`: only these of METRICS and seen_at_arrival (default:
    all; kv_tokens needs segments swept with kv). The rows: each part's metrics, then each part's
    seen_at_arrival."""
    rows: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []
    for s in parts:
        r, a = stat_rows(s, percentiles, metrics)
        rows.extend(r)
        seen.extend(a)
    return stats_frame(rows + seen, percentiles)


def stat_rows(s: Segments, percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES,
              metrics: tuple[str, ...] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`stats`' rows of one part: its time-weighted metrics and its seen_at_arrival row (if any)."""
    rows: list[dict[str, Any]] = []
    wanted = set(metrics) if metrics is not None else {*METRICS, "seen_at_arrival"}
    if not s.t.size:
        return [], []
    split_known = int(s.running.max()) > 0
    for metric in METRICS:
        if metric not in wanted or (metric != "in_system" and not split_known):
            continue
        if metric == "kv_tokens":
            assert s.kv_start is not None and s.kv_end is not None, "swept without kv"
            peak_of, value = np.maximum(s.kv_start, s.kv_end), round_half_up((s.kv_start + s.kv_end) / 2)
        else:
            peak_of = getattr(s, metric)
            value = peak_of.astype(np.float64)
        peak, at = _first_at_max(peak_of, s.t)
        rows.append({"deployment": s.deployment, "grp": s.grp, "metric": metric, "peak": float(peak),
                     "peak_t": at, **_time_weighted(value, s.dur, percentiles), "arrivals": None})
    a = s.arrivals > 0
    if "seen_at_arrival" not in wanted or not a.any():
        return rows, []
    return rows, [{"deployment": s.deployment, "grp": s.grp, "metric": "seen_at_arrival",
                   **_seen(s.t[a], s.in_system[a] - 1, s.arrivals[a], percentiles)}]


def stats_frame(rows: list[dict[str, Any]], percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES
                ) -> pl.DataFrame:
    """The stats table of rows (deployment, grp, metric, peak, peak_t in microseconds, mean, the percentile
    columns, span_s, arrivals)."""
    names = [percentile_column(p) for p in percentiles]
    schema = {"deployment": pl.Utf8, "grp": pl.Utf8, "metric": pl.Utf8, "peak": pl.Float64, "peak_t": pl.Int64,
              "mean": pl.Float64, **dict.fromkeys(names, pl.Float64), "span_s": pl.Float64, "arrivals": pl.Int64}
    return pl.DataFrame(rows, schema=schema).with_columns(
        peak_at=pl.col("peak_t").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")).select(
        "deployment", "grp", "metric", "peak", "peak_at", "mean", *names, "span_s", "arrivals")


def quantile_cont(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """DuckDB's quantile_cont(q) of the multiset where sorted distinct `values` occur `counts` times:
    rank (n - 1) * q, and between two ranks lo * (1 - d) + hi * d with the sum rounded once (as DuckDB's
    compiled code does), so the result is the same double."""
    n = int(counts.sum())
    rn = (n - 1) * q
    f, c = math.floor(rn), math.ceil(rn)
    ends = np.cumsum(counts)
    lo = float(values[np.searchsorted(ends, f, side="right")])
    if f == c:
        return lo
    hi = float(values[np.searchsorted(ends, c, side="right")])
    d = rn - f
    return float(Fraction(lo) * Fraction(1 - d) + Fraction(hi * d))


def _seen(t: np.ndarray, seen: np.ndarray, arrivals: np.ndarray,
          percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES) -> dict[str, Any]:
    """seen_at_arrival: the others in the system at each arrival (`arrivals` of them
    at instant `t`): peak (first instant), mean and quantile_cont percentiles over arrivals."""
    i = int(np.argmax(seen))
    vals, inverse = np.unique(seen, return_inverse=True)
    counts = np.bincount(inverse, weights=arrivals).astype(np.int64)
    return {"peak": float(seen[i]), "peak_t": int(t[i]), **seen_weighted(vals, counts, percentiles)}


def seen_weighted(vals: np.ndarray, counts: np.ndarray, percentiles: tuple[float, ...] = CONCURRENCY_PERCENTILES
                  ) -> dict[str, Any]:
    """_seen's mean and percentiles from its histogram: distinct others-in-system `vals` (ascending) and the
    arrivals that found each (`counts`)."""
    n = int(counts.sum())
    qs = {percentile_column(p): quantile_cont(vals, counts, q)
          for p, q in zip(percentiles, quantile_fractions(percentiles), strict=True)}
    # an integer sum (exact), as np.sum(seen * arrivals) over the arrivals
    total = int(np.sum(vals.astype(np.int64) * counts))
    return {"mean": float(total) / n, **qs, "span_s": None, "arrivals": n}


def span_s(parts: list[Segments]) -> float:
    """The longest deployment's sweep (first instant to the end of its last state), in seconds."""
    spans = [(int((s.t + s.dur).max()) - int(s.t.min())) / 1e6 for s in parts if s.grp is None and s.t.size]
    return max(spans, default=0.0)


def timeseries(parts: list[Segments], bucket_us: int) -> pl.DataFrame:
    """Per deployment and bucket: the maxima and time-weighted means of the step function."""
    frames = []
    for s in parts:
        if s.grp is not None:
            continue
        keep = s.dur > 0
        t, dur = s.t[keep], s.dur[keep]
        if not t.size:
            continue
        b0 = t // bucket_us
        n = (t + dur - 1) // bucket_us - b0 + 1
        idx = np.repeat(np.arange(t.size), n)
        start = np.cumsum(n) - n
        bucket = b0[idx] + (np.arange(idx.size) - np.repeat(start, n))
        ts, te = t[idx], (t + dur)[idx]
        overlap = np.minimum(te, (bucket + 1) * bucket_us) - np.maximum(ts, bucket * bucket_us)
        first = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        in_sys = s.in_system[keep][idx]
        assert s.kv_start is not None and s.kv_end is not None, "swept without kv"
        kv = np.maximum(s.kv_start, s.kv_end)[keep][idx]
        covered = np.add.reduceat(overlap, first)
        frames.append(pl.DataFrame({
            "deployment": pl.Series([s.deployment] * first.size, dtype=pl.Utf8),
            "bucket": bucket[first],
            "running_max": np.maximum.reduceat(s.running[keep][idx], first),
            "waiting_max": np.maximum.reduceat(s.waiting[keep][idx], first),
            "in_system_max": np.maximum.reduceat(in_sys, first),
            "in_system_mean": np.add.reduceat(in_sys * overlap, first) / covered,
            "kv_tokens_max": np.maximum.reduceat(kv, first),
            "covered_s": covered / 1e6,
        }))  # fmt: skip
    schema = {"deployment": pl.Utf8, "bucket": pl.Int64, "running_max": pl.Int64, "waiting_max": pl.Int64,
              "in_system_max": pl.Int64, "in_system_mean": pl.Float64, "kv_tokens_max": pl.Float64,
              "covered_s": pl.Float64}
    df = pl.concat([pl.DataFrame(schema=schema), *frames])
    stamp = (pl.col("bucket") * bucket_us).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    return df.select("deployment", stamp.alias("ts"), pl.exclude("deployment", "bucket")).sort(
        "deployment", "ts", nulls_last=True, maintain_order=True)


NICE_BUCKETS_S = (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def pick_bucket_s(span_s: float, points: int = 500) -> int:
    """The smallest round bucket width giving at most `points` buckets over `span_s`."""
    for b in NICE_BUCKETS_S:
        if span_s / b <= points:
            return b
    return NICE_BUCKETS_S[-1]
