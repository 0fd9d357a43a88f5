"""Which day partitions an analysis of a time window reads (issue 21 item 2, issue 20 item 1): the window's
days widened by what each table needs for the answer to equal the whole store's, and a relative window's
anchor (the newest arrival) resolved from the newest partitions before anything else is read. Answers with
and without pruning are tested equal per analysis (tests/test_pruning.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb

from attribution import joincache, layout
from attribution.analyses.common import Window, parse_when, resolve_window
from attribution.config import env
from attribution.db import scratch
from attribution.schema import TABLES
from attribution.views import JOIN_INPUTS

if TYPE_CHECKING:
    from attribution.store import Snapshot, Store

Days = tuple[str | None, str | None]
# ATTRIBUTION_PRUNE=0 reads every partition (the benchmark's A/B, and a suspicious user's); =all prunes the
# requests even where the commit's join is cached (see _join_cached).
# Rows a window's answer depends on that lie outside its days: an engine row and its gateway row logged either
# side of midnight (the join key), step lines next to the window's edges. The two sides of one request are
# seconds apart (latency and clock skew), so an hour is ample: a window cut inside a day reads only its days,
# one cut at (or within the margin of) midnight reads the neighbouring day too.
MARGIN = timedelta(hours=1)
DAY = timedelta(days=1)  # what a partition found by its day is widened by (its rows span the whole day)
# Read from the store's first day: which config holds at a time is the deployment's latest start, however old;
# a counter's increase() needs the series' previous scrape, however long the scrapes paused. Both are small.
SCRAPES = ("metric_counters", "metric_histograms")
FROM_START = ("engine_config", *SCRAPES)
# Requests (and their events) are read back to the earliest partition holding a request still running at the
# window's start (found from the files' Parquet statistics, no data read): it counts for concurrency.
SPANNED = ("requests", "request_events")

def _day(t: datetime) -> str:
    return t.astimezone(UTC).date().isoformat()


def _shift(day: str, delta: timedelta) -> str:
    return (date.fromisoformat(day) + delta).isoformat()


def _partitions(snapshot: Snapshot, table: str) -> list[str]:
    """The dated partitions of a table's live files (the null partition and layout-1 files are always read)."""
    days = {layout.day_of(p) for p in snapshot.live(table)}
    return sorted(d for d in days if d is not None and d != layout.NULL_DAY)


def resolve(store: Store, snapshot: Snapshot, since: Any = None, until: Any = None) -> Window:
    """--since/--until as analyses.common.resolve_window gives them on the whole store. A relative span's anchor
    is the newest arrival not in the future: it lies in the newest partition of `requests` not after today
    (its engine and gateway rows within a margin of it), so only those days are read to find it."""
    s, u = parse_when(since), parse_when(until)
    if not (isinstance(s, timedelta) or isinstance(u, timedelta)):  # (absolute: no data is read)
        con = scratch()
        try:
            return resolve_window(con, since, until)
        finally:
            con.close()
    return resolve_window(anchor_connection(store, snapshot), since, until)


def _join_cached(store: Store, snapshot: Snapshot) -> bool:
    """Whether the commit's engine x gateway join is cached (attribution.joincache; built after each ingest):
    then the requests are read through it, whole, which costs less than joining the window's partitions
    again (1M requests, a one-day window: 3.1 against 5.2 CPU s for `lengths`, bench/analyses/README.md)."""
    if store.remote or env("ATTRIBUTION_PRUNE") == "all":
        return False
    return any(joincache.cached_for(store.root, snapshot.version))


def anchor_days(store: Store, snapshot: Snapshot, *, join_cache: bool = True) -> dict[str, Days] | None:
    """The days that hold the store's newest arrival not in the future (and its other side): from the newest
    partition of `requests` not after today, and the day before it (None: read the whole store, also where
    the commit's join is cached: the anchor is one cheap query of it). `join_cache` False: the reader does
    not use the cache (Spark), so the cache's presence changes nothing."""
    if env("ATTRIBUTION_PRUNE") == "0" or join_cache and _join_cached(store, snapshot):
        return None
    today = datetime.now(UTC).date().isoformat()
    past = [d for d in _partitions(snapshot, "requests") if d <= today]
    if not past:
        return None
    first = _shift(past[-1], -DAY)
    return {t: (first, None) for t in TABLES}


def anchor_connection(store: Store, snapshot: Snapshot) -> duckdb.DuckDBPyConnection:
    """A connection reading only the days of anchor_days: for resolving relative windows."""
    return store.connect(snapshot, days=anchor_days(store, snapshot))


def plan(store: Store, snapshot: Snapshot, since: datetime | None, until: datetime | None,
         whole: tuple[str, ...] = (), *, join_cache: bool = True) -> dict[str, Days] | None:
    """The days (first, last inclusive; None open) each table is read for the window [since, until); None:
    the whole store (no bound, so nothing to prune). `whole`: tables read whole all the same (the dashboard
    keeps the requests whole, so its connections share the commit's cached join: attribution.joincache).
    `join_cache` False: a reader without the cache (Spark) prunes the requests whether or not it exists."""
    if since is None and until is None or env("ATTRIBUTION_PRUNE") == "0":
        return None
    first = _day(since - MARGIN) if since is not None else None
    last = _day(until + MARGIN - timedelta(microseconds=1)) if until is not None else None  # (until: exclusive)
    out: dict[str, Days] = {t: (first, last) for t in TABLES}
    for t in FROM_START:
        out[t] = (None, last)
    read_whole = (*whole, *(JOIN_INPUTS if join_cache and _join_cached(store, snapshot) else ()))
    if since is not None and first is not None and not set(SPANNED) <= set(read_whole):
        back = _reach_back(store, snapshot, since, first)
        for t in SPANNED:
            out[t] = (back, last)
    for t in read_whole:
        out.pop(t, None)
    return out


def _reach_back(store: Store, snapshot: Snapshot, since: datetime, first: str) -> str | None:
    """The first day to read requests from so that every request running at `since` is read: the earliest
    partition before `first` whose files may hold a request ending at or after `since - MARGIN` (a request's end
    is its finish time, else arrival + e2e_s), less a margin for its other side; `first` when there is none."""
    if store.remote:  # (footers of a remote store are a request each: read it whole)
        return None
    bound = since - MARGIN
    earliest = first
    for rel in snapshot.live("requests"):
        d = layout.day_of(rel)
        if d is None or d == layout.NULL_DAY or d >= earliest:
            continue
        if _may_reach(store, rel, bound):
            earliest = d
    return earliest if earliest == first else _shift(earliest, -DAY)


def _may_reach(store: Store, rel: str, bound: datetime) -> bool:
    """Whether a requests file's statistics allow a row ending at or after `bound` (unknown: yes)."""
    import pyarrow.parquet as pq  # (here: its import costs a command that reads through the cached join)

    try:
        meta = pq.read_metadata(store.locate(rel))
    except OSError:
        return True
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        hi: dict[str, Any] = {}
        for name in ("arrival", "finished", "e2e_s"):
            if name not in names:
                continue
            col = rg.column(names.index(name))
            st = col.statistics
            if st is None or not st.has_min_max:
                if st is None or st.null_count != rg.num_rows:
                    return True  # values without statistics
                continue
            hi[name] = st.max
        if "finished" in hi and _utc(hi["finished"]) >= bound:
            return True
        if "arrival" in hi:
            end = _utc(hi["arrival"]) + timedelta(seconds=max(float(hi.get("e2e_s") or 0.0), 0.0))
            if end >= bound:
                return True
    return False


def _utc(v: Any) -> datetime:
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)


def connect(store: Store, since: Any = None, until: Any = None, snapshot: Snapshot | None = None,
            *, extra_before: timedelta | None = None) -> tuple[duckdb.DuckDBPyConnection, Window]:
    """A connection reading only what the window needs, and the window resolved. `extra_before` widens the
    days read before `since` (the report's previous window, compare's baseline)."""
    snap = snapshot or store.snapshot()
    window = resolve(store, snap, since, until)
    start = window.since - extra_before if (window.since is not None and extra_before) else window.since
    return store.connect(snap, days=plan(store, snap, start, window.until)), window
