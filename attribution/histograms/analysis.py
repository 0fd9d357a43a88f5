"""The `metrics` analysis (everything a window's Prometheus histograms and counters answer, per deployment
and model) and the histogram tables other analyses add beside their exact ones: `latency` (percentiles and
exact-vs-histogram side by side) and `compare` (two windows, with the bucket-edge uncertainty in the verdict)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import Any

import duckdb
import polars as pl

from attribution import kept, queries
from attribution.analyses.common import Analysis, Selection, Window, parse_when, percentile_list
from attribution.errors import UsageError
from attribution.histograms.catalogue import DEFINITIONS, LABEL, LATENCY, LENGTHS
from attribution.histograms.tables import (
    bucket_rows,
    goodput_rows,
    histograms,
    percentile_rows,
    prefix_cache_rows,
    threshold_rows,
)


def metric_window(con: duckdb.DuckDBPyConnection, since: Any = None, until: Any = None) -> Window:
    """--since/--until in UTC; a relative span counts back from the newest histogram or counter sample."""
    s, u = parse_when(since), parse_when(until)
    newest = None
    if isinstance(s, timedelta) or isinstance(u, timedelta):
        newest = queries.inline(con, "select max(ts) from (select ts from metric_histograms union all "
                       "select ts from metric_counters)").item()
        if newest is None:
            raise UsageError("a relative --since/--until needs Prometheus samples in the store, and it has none")
        s = newest - s if isinstance(s, timedelta) else s
        u = newest - u if isinstance(u, timedelta) else u
    if s is not None and u is not None and s >= u:
        raise UsageError(f"--since ({s.isoformat()}) must be before --until ({u.isoformat()})")
    return Window(s, u, newest)


# (connection, since, until, table) -> (connection, rows), while `shared_increases` is open
_SHARED: ContextVar[dict[tuple[Any, ...], tuple[Any, pl.DataFrame]] | None] = ContextVar("increases", default=None)


@contextmanager
def shared_increases() -> Iterator[None]:
    """Inside: `increases` of one connection, window and table is read once. A report asks it of the same
    window four times (lengths, latency, the cohort's latency, metrics), each a scan of every sample."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


# connection -> what its Prometheus samples are (a store commit): the connections of one name share `increases`
# (a dashboard opens a connection per filter set on a commit; its filters never narrow the samples)
_SAMPLES: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_KEPT: OrderedDict[tuple[Any, ...], pl.DataFrame] = OrderedDict()
KEEP = 16  # windows x tables (a few KB each: one row per series part)
# what queries/metric_increase.sql reads on a store connection (the raw views name the Parquet files)
SAMPLE_VIEWS = ("metric_histograms", "raw_metric_histograms", "metric_counters", "raw_metric_counters")
_KEPT_LOCK = threading.Lock()


def share_samples(con: duckdb.DuckDBPyConnection, name: tuple[Any, ...]) -> None:
    """Declare that `con` reads the Prometheus samples called `name`, unfiltered: `increases` on it reuses
    what another connection of that name read for the same window (kept for the process, the last KEEP)."""
    _SAMPLES[con] = name


def increases(con: duckdb.DuckDBPyConnection, window: Window, table: str = "histogram") -> pl.DataFrame:
    """The window's increase per histogram series part (table `histogram`) or counter (`counter`)."""
    memo, key = _SHARED.get(), (id(con), window.since, window.until, table)
    if memo is not None and key in memo:
        return memo[key][1]
    name = _SAMPLES.get(con)
    shared = None if name is None else (*name, window.since, window.until, table)
    with _KEPT_LOCK:
        rows = _KEPT.get(shared) if shared is not None else None
    if rows is None and name is not None:  # a dashboard's window of whole days: its days' rows summed
        rows = _from_days(con, window, table)
    if rows is None:  # (a previous command on the commit may have kept them: attribution.kept)
        rows = kept.kept(con, "metric_increase", (*_sql("metric_increase"), table, window.since, window.until),
                         SAMPLE_VIEWS, lambda: _over_series(con, "metric_increase", kind=table, since=window.since,
                                                            until=window.until))
        if name is not None and window.since is None and window.until is None:
            _day_rows(con, table)  # every sample was read for the whole store: its days' rows too, once
        if shared is not None:
            with _KEPT_LOCK:
                _KEPT[shared] = rows
                while len(_KEPT) > KEEP:
                    _KEPT.popitem(last=False)
    if memo is not None:
        memo[key] = (con, rows)  # the connection kept alive with its rows: its id is not reused meanwhile
    return rows


def _day_rows(con: duckdb.DuckDBPyConnection, table: str) -> pl.DataFrame:
    """queries/metric_increase_days.sql's rows (each series' increase per UTC day), kept per store commit."""
    return kept.kept(con, "metric_increase_days", (*_sql("metric_increase_days"), table), SAMPLE_VIEWS,
                     lambda: _over_series(con, "metric_increase_days", kind=table))


def _sql(name: str) -> tuple[str, str]:
    """What the rows of queries/<name>.sql (metric_increase or metric_increase_days) depend on: its text and
    that of int_metric_series, which it reads."""
    return queries.load(name).sql, queries.load("int_metric_series").sql


def _over_series(con: duckdb.DuckDBPyConnection, name: str, *, kind: str, **params: Any) -> pl.DataFrame:
    """queries/<name>.sql's rows, its int_metric_series made first for the same samples ($kind, $until)."""
    queries.materialize(con, "int_metric_series", kind=kind, until=params.get("until"))
    return queries.run(con, name, kind=kind, **params)


def _midnight(t: datetime | None) -> bool:
    return t is None or t.astimezone(UTC).timetz().replace(tzinfo=None) == dtime(0)


def _from_days(con: duckdb.DuckDBPyConnection, window: Window, table: str) -> pl.DataFrame | None:
    """The increases of a window of whole UTC days (an end may be open) summed from the commit's per-day rows
    (queries/metric_increase_from_days.sql), when they are kept; else None (read from the samples). The
    per-day rows are made where the whole store's samples are read anyway (`increases` of the open window:
    a dashboard's first look, or the ingest's preparation of it)."""
    if (window.since is None and window.until is None) or not (_midnight(window.since) and _midnight(window.until)):
        return None
    parts = (*_sql("metric_increase_days"), table)
    if not kept.has(con, "metric_increase_days", parts, SAMPLE_VIEWS):
        return None
    con.register("metric_increase_days", _day_rows(con, table).to_arrow())
    try:
        return queries.run(con, "metric_increase_from_days",
                           since_day=None if window.since is None else window.since.astimezone(UTC).date(),
                           until_day=None if window.until is None else window.until.astimezone(UTC).date())
    finally:
        con.unregister("metric_increase_days")


def latency_percentiles(con: duckdb.DuckDBPyConnection, window: Window, percentiles: Iterable[float]
                        ) -> pl.DataFrame:
    return percentile_rows(histograms(increases(con, window), LATENCY), percentiles)


def metrics(con: duckdb.DuckDBPyConnection, *, since: Any = None, until: Any = None,
            percentiles: Iterable[float] | None = None, thresholds: Iterable[float] = (),
            slo: Iterable[tuple[str, float]] = ()) -> Analysis:
    """Per deployment and model in the window: latency percentiles (bucket-interpolated, with bucket edges),
    prompt/output length percentiles, observations above each of `thresholds` (prompt and output lengths),
    goodput for the joint `slo` terms (phase, seconds), and the prefix-cache hit rate."""
    window = metric_window(con, since, until)
    pcts = percentile_list(percentiles)
    incr = increases(con, window)
    lengths = histograms(incr, LENGTHS)
    slo = list(slo)
    tables = {
        "latency": percentile_rows(histograms(incr, LATENCY), pcts),
        "lengths": percentile_rows(lengths, pcts, kind_column="counts"),
        "prefix_cache": prefix_cache_rows(increases(con, window, "counter")),
    }
    if thresholds:
        tables["thresholds"] = threshold_rows(lengths, thresholds)
    if slo:
        tables["goodput"] = goodput_rows(histograms(incr, LATENCY), slo)
    notes = [] if incr.height else ["no Prometheus histogram samples in this window (ingest /metrics snapshots or "
                                    "query_range exports of vLLM or SGLang)"]
    # a restart resets every series of the engine at once: count restarts per deployment, not series
    per_dep = incr.group_by("deployment").agg(pl.col("resets").max()).filter(pl.col("resets") > 0) \
        if incr.height else incr
    if per_dep.height:
        restarts = ", ".join(f"{d} {n}" for d, n in per_dep.sort("deployment").iter_rows())
        notes.append(f"counters reset in the window (a restarted engine: {restarts}); the increase after a reset "
                     "counts from zero, as PromQL increase() does")
    slo_text = " and ".join(f"{m} <= {v:g} s" for m, v in slo)
    return Analysis(
        name="metrics",
        params={**window.to_dict(), "percentiles": pcts, "thresholds": list(thresholds), "slo": dict(slo)},
        tables=tables,
        titles={"latency": f"latency per deployment and model (seconds, {LABEL})",
                "lengths": f"prompt and output tokens per deployment and model ({LABEL})",
                "prefix_cache": "prefix-cache hit rate (tokens, from the engine's counters)",
                "thresholds": "requests above each threshold (exact on a bucket edge, else a bound)",
                "goodput": f"goodput for {slo_text} (exact on bucket edges, else a bound)"},
        definitions={**DEFINITIONS, **GOODPUT_DEFINITIONS},
        notes=notes,
    )


GOODPUT_DEFINITIONS = {
    "goodput": "requests meeting every SLO term at once, from histograms: one term on a bucket edge is "
    "exact; off an edge, or with several terms (histograms never pair a request's TTFT with its TPOT), "
    "good_at_least / good_at_most bound it (Fréchet bounds over the terms)",
    "thresholds": "requests whose length is above the threshold: exact when the threshold is a bucket edge "
    "(vLLM's edges are 1-2-5 steps: 95,000 never is one), else between the counts above the two enclosing edges",
}


def side_by_side(sel: Selection, hist: pl.DataFrame, percentiles: Iterable[float]) -> pl.DataFrame:
    """The exact percentiles of the per-request rows beside the bucket-interpolated ones, for the
    deployments, models, phases and percentiles both have (ITL has no per-request counterpart)."""
    pcts = list(percentiles)
    exact = sel.run("latency_exact_by_deployment_model", quantiles=[p / 100 for p in pcts])
    if exact.is_empty() or hist.is_empty():
        return pl.DataFrame()
    long = (exact.with_columns(pl.lit(pcts).alias("percentile"))
            .explode("q", "percentile").rename({"metric": "phase", "q": "exact", "requests": "exact_requests"}))
    joined = hist.join(long, on=["deployment", "model", "phase", "percentile"], how="inner", nulls_equal=True)
    return joined.select(
        "deployment", "model", "phase", "percentile", "exact", "exact_requests",
        pl.col("value").alias("interpolated"), "lo", "hi", pl.col("observations").alias("histogram_observations"),
        ((pl.col("exact") > pl.col("lo")) & (pl.col("exact") <= pl.col("hi"))).alias("exact_in_bucket"),
    )


def latency_tables(sel: Selection, percentiles: Iterable[float]) -> dict[str, pl.DataFrame]:
    """The tables `latency` adds when the window has latency histograms: `histogram_percentiles` and
    `exact_vs_histogram`; none (the command's output unchanged) when it has none."""
    pcts = list(percentiles)
    hist = latency_percentiles(sel.con, sel.window, pcts)
    if hist.is_empty():
        return {}
    tables = {"histogram_percentiles": hist}
    both = side_by_side(sel, hist, pcts)
    if not both.is_empty():
        tables["exact_vs_histogram"] = both
    return tables


def has_histograms(con: duckdb.DuckDBPyConnection) -> bool:
    """A store connection (frames_connection has no metric tables)."""
    return queries.has_relation(con, "metric_histograms")


def histograms_stored(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store behind `con` holds any Prometheus histogram sample (an empty store has the view)."""
    return has_histograms(con) and bool(queries.inline(con, "select exists (select 1 from metric_histograms)").item())


def add_to_latency(res: Analysis, sel: Selection, percentiles: Iterable[float]) -> Analysis:
    """`res` (the latency analysis) with the histogram tables when the window has latency histograms, titled
    and defined apart from the exact tables; unchanged otherwise (or on a connection without the tables)."""
    if not has_histograms(sel.con):
        return res
    tables = latency_tables(sel, percentiles)
    res.tables.update(tables)
    res.titles["histogram_percentiles"] = f"latency per deployment and model from Prometheus histograms ({LABEL})"
    res.titles["exact_vs_histogram"] = "exact (per-request rows) beside bucket-interpolated (histograms)"
    if tables:
        res.definitions = {**res.definitions, **{f"histogram {k}": v for k, v in DEFINITIONS.items()},
                           "exact_in_bucket": "the exact percentile lies in the bucket (lo, hi] the histogram "
                           "names (near a bucket edge the two ranks can fall on either side)"}
    return res


def add_to_lengths(res: Analysis, sel: Selection, percentiles: Iterable[float]) -> Analysis:
    """`res` (the lengths analysis) with `histogram_lengths`, the prompt and output length percentiles of the
    engines' token histograms, when the window has them (the answer where no per-request rows exist)."""
    if not has_histograms(sel.con):
        return res
    hists = histograms(increases(sel.con, sel.window), LENGTHS)
    rows = percentile_rows(hists, percentiles, kind_column="counts")
    if rows.height:
        res.tables["histogram_lengths"] = rows
        res.titles["histogram_lengths"] = f"prompt and output tokens from Prometheus histograms ({LABEL})"
        res.definitions = {**res.definitions, **{f"histogram {k}": v for k, v in DEFINITIONS.items()}}
    if rows.height and sel.requests == 0:
        # nothing exact to stand beside: say where the answer comes from, and give the buckets' own counts
        res.tables["histogram_buckets"] = bucket_rows(hists)
        res.titles["histogram_buckets"] = "requests per bucket of the engines' token histograms (exact per bucket)"
        res.definitions["histogram_buckets"] = (
            "requests whose count lies in the bucket (lo, hi], from the increase of the engine's cumulative "
            "buckets over the window: exact per bucket, nothing is known of where inside it a request lies")
        res.notes.append("no per-request rows in this window: the lengths come from the engines' Prometheus token "
                         f"histograms alone (histogram_lengths, {LABEL}; histogram_buckets, whole counts per "
                         "bucket), per deployment and model; stats and histogram stay empty")
    return res
