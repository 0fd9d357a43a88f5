"""What every analysis shares: the time window (`--since/--until`, absolute or relative to the newest request),
the grouping (`--by`), the per-request selection every query reads (`int_analysis_requests`, a temporary table made
once per connection from queries/int_analysis_requests.sql), and the result object the CLI, dashboard and report
render without computing anything themselves.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from attribution import joincache, queries
from attribution.choices import GroupBy
from attribution.errors import AttributionError, UsageError
from attribution.labels import define_macros
from attribution.queries import materialize  # also imported from here (thresholds.crossings)

PERCENTILE_METHOD = (
    "Percentiles are exact over per-request rows: DuckDB quantile_cont, linear interpolation between the two "
    "nearest ranks (numpy's default method)."
)
# the percentiles the findings and charts read are always computed, besides the ones a user chose
BUILTIN_PERCENTILES = (50.0, 90.0, 99.0)
_PCOL_RE = re.compile(r"^p\d+(?:_\d+)?$")
_RELATIVE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SERIALS = itertools.count(1)
_CURRENT: dict[int, int] = {}  # id(connection) -> serial of the selection its int_analysis_requests holds
KEEP_SELECTIONS = 2  # per connection over a cached join (see _prepare)
_KEPT: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, dict[tuple[Any, ...], KeptSelection]] = \
    weakref.WeakKeyDictionary()
_KEEP: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, int] = weakref.WeakKeyDictionary()  # keep_selections
_ON_DISK: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, str] = weakref.WeakKeyDictionary()  # selections_on_disk


@dataclass
class KeptSelection:
    """A selection kept on its connection (see _prepare): its table and, once counted, its requests."""

    table: str
    requests: int | None = None
    of: str | None = None  # a view over that kept table (the same rows, grouped otherwise): see _regrouped


def parse_when(text: str | datetime | date | None) -> datetime | timedelta | None:
    """An absolute time (ISO date or date-time; naive means UTC) or a relative span (`7d`, `24h`, `30m`, `2w`)."""
    if text is None or isinstance(text, datetime | date):
        return _as_utc(text) if text is not None else None
    if m := _RELATIVE_RE.match(text):
        return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{text!r} is not a time: use an ISO date or date-time (2025-06-02, 2025-06-02T14:00, naive = UTC) "
            "or a span back from the newest request (7d, 24h, 30m, 2w)"
        ) from None
    return _as_utc(value)


def _as_utc(value: datetime | date) -> datetime:
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class Window:
    """[since, until) in UTC; None is an open end. `newest` is what relative spans counted back from."""

    since: datetime | None = None
    until: datetime | None = None
    newest: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until}


def resolve_window(con: duckdb.DuckDBPyConnection, since: Any = None, until: Any = None) -> Window:
    """Turn --since/--until into absolute UTC times. Relative spans count back from the newest request's
    arrival in the store that is not in the future (so `--since 7d` means the last seven days of data, also
    for archived logs); in a store without requests, from its newest engine step line or access line."""
    s, u = parse_when(since), parse_when(until)
    newest = None
    joincache.use(con)
    if isinstance(s, timedelta) or isinstance(u, timedelta):
        # A row later than now (admitted up to `max_future` past the ingest's clock) does not anchor the window:
        # it would shrink `--since 7d` to the hours after it.
        newest = queries.run(con, "window_newest_request").item()
        if newest is None:  # engine logs without request lines (vLLM's default since 0.10): their own lines
            newest = queries.run(con, "window_newest_log_line").item()
        if newest is None:
            raise UsageError("a relative --since/--until needs requests, engine step lines or access lines in the "
                             "store, and it has none")
        newest = _as_utc(newest)
        s = newest - s if isinstance(s, timedelta) else s
        u = newest - u if isinstance(u, timedelta) else u
    if s is not None and u is not None and s >= u:
        raise UsageError(f"--since ({s.isoformat()}) must be before --until ({u.isoformat()})")
    return Window(s, u, newest)


@dataclass
class Selection:
    """A connection whose `int_analysis_requests` table holds the requests of `window`, grouped by `by`."""

    con: duckdb.DuckDBPyConnection
    window: Window
    by: GroupBy
    requests: int = 0
    serial: int = 0

    def run(self, name: str, **params: Any) -> pl.DataFrame:
        """Run queries/<name>.sql; the window bounds are passed to every query that names them."""
        self._check()
        return queries.run(self.con, name, **{**self.window_params(), **params})

    def materialize(self, name: str, **params: Any) -> None:
        """queries/<name>.sql into a temporary table of its name, for the queries of this selection after it."""
        self._check()
        materialize(self.con, name, **{**self.window_params(), **params})

    def _check(self) -> None:
        if _CURRENT.get(id(self.con)) != self.serial:
            raise AttributionError("this selection was replaced by a later select() on the same connection")

    def window_params(self) -> dict[str, Any]:
        return {"since": self.window.since, "until": self.window.until}


def empty_note(sel: Selection, table: pl.DataFrame, none_with: str) -> list[str]:
    """Why an analysis' main `table` is empty: no requests in the window, or none of them `none_with` ..."""
    if not table.is_empty():
        return []
    if not sel.requests:
        return ["no requests in the window" + _served_note(sel)]
    return [f"{sel.requests:,} request{'s' * (sel.requests != 1)} in the window, none with {none_with}"
            + _served_note(sel)]


# which engine flag logs the request lines (the engines' defaults do not)
REQUEST_LINES = ("vLLM logs request lines only with --enable-log-requests (off by default since 0.10; before, "
                 "unless --disable-log-requests), SGLang with --log-requests")
UNLOGGED_SHARE = 0.5  # fewer request rows than this share of the POST calls the API servers answered: say so


def post_calls(responses: pl.DataFrame) -> int:
    """The POST calls (the API's inference calls) among queries/engine_responses.sql's rows."""
    return int(responses.filter(pl.col("method") == "POST")["responses"].sum()) if responses.height else 0


def _served_note(sel: Selection) -> str:
    """When the engines' API servers logged in the window over twice as many inference calls (POST access lines)
    as it has request rows: most request lines were not logged, and which engine flag logs them."""
    posts = post_calls(queries.run(sel.con, "engine_responses", since=sel.window.since, until=sel.window.until))
    if not posts or sel.requests >= UNLOGGED_SHARE * posts:
        return ""
    return (f"; the engines' API servers logged {posts:,} POST response{'s' * (posts != 1)} in it (access lines, "
            "see `attribution health`): most request lines were not logged. " + REQUEST_LINES)


def select(con: duckdb.DuckDBPyConnection, *, since: Any = None, until: Any = None,
           by: GroupBy | str = GroupBy.workload) -> Selection:
    """Prepare `con` (a store connection, or any connection with a `joined_requests` relation) for the
    analyses: materialise the window's requests once. `since` may be a resolved Window. A later select() on
    the same connection replaces this one (using the older Selection then raises)."""
    by = GroupBy(by)
    joincache.use(con)
    window = since if isinstance(since, Window) else resolve_window(con, since, until)
    kept = _prepare(con, window, by)
    n = kept.requests if kept is not None else None
    if n is None:
        n = int(queries.run(con, "analysis_requests_in_window").item() or 0)
        if kept is not None:
            kept.requests = n
    serial = _CURRENT[id(con)] = next(_SERIALS)
    return Selection(con, window, by, n, serial)


def keep_selections(con: duckdb.DuckDBPyConnection, n: int) -> None:
    """Keep the last `n` selections on `con` (over a cached join, or on Spark; default KEEP_SELECTIONS), for a
    caller that comes back to more of them (the report: its window by group and overall, and the previous
    window)."""
    _KEEP[con] = n


def selections_on_disk(con: duckdb.DuckDBPyConnection, directory: Path) -> None:
    """Keep the selections of `con` (a DuckDB connection over a cached join) as tables of a database file in
    `directory` (the caller's scratch directory, removed with it) instead of temporary tables: DuckDB writes a
    large table's row groups to the file compressed as it makes them (the 1M window's requests: ~80 MB instead
    of 388 MB in memory) and reads them back as its memory cap requires, where a temporary table of a 6M
    window (~2.3 GB) filled the report's cap and spilled. The same rows in the same order."""
    if con in _ON_DISK:
        return
    name = f"selections_{next(_SERIALS)}"
    con.execute(f"attach $file as {name}", {"file": str(Path(directory) / f"{name}.duckdb")})
    _ON_DISK[con] = name


def selections_database(con: duckdb.DuckDBPyConnection) -> str | None:
    """The attached database holding `con`'s selections (selections_on_disk), else None: a table made from a
    selection (int_threshold_requests) can be kept there too, compressed, instead of in memory."""
    return _ON_DISK.get(con) if isinstance(con, duckdb.DuckDBPyConnection) else None


def _prepare(con: duckdb.DuckDBPyConnection, window: Window, by: GroupBy) -> KeptSelection | None:
    """Make `int_analysis_requests` hold the selection. On a connection whose joined_requests cannot change
    under it (a store commit's cached join, or Spark's views over one snapshot) the last few selections are
    kept, so the pages of a dashboard view, or the report's analyses, asking for the same window and grouping
    do not redo it: the kept selection is returned. Elsewhere it is a temporary table made anew (None)."""
    params: dict[str, Any] = {"since": window.since, "until": window.until, "by": by.value}
    spark = queries.spark_connection(con)
    if spark is None and not joincache.attached(con):
        materialize(con, "int_analysis_requests", **params)
        return None
    # (the view's definition in the key: a caller that redefines joined_requests gets a selection of its own)
    defined = spark.defined("joined_requests") if spark is not None else str(
        queries.view_definitions(con, ("joined_requests",)))
    key = (window.since, window.until, by.value, defined)
    kept = _KEPT.setdefault(con, {})
    if key not in kept:
        table = f"int_analysis_requests_{next(_SERIALS)}"
        database = _ON_DISK.get(con) if spark is None else None
        if database is not None and (found := _regrouped(kept, key)) is not None:
            kept[found[0]] = base = kept.pop(found[0])  # (used again: the last its view would go with)
            kept[key] = KeptSelection(table, base.requests, of=base.table)
            con.execute(f"create temp view {table} as select {_GROUP_LABEL.format(by=by.value)} as grp, "
                        f"* exclude (grp) from {base.table}")
        else:
            materialize(con, "int_analysis_requests", table, database=database, **params)
            kept[key] = KeptSelection(f"{database}.{table}" if database else table)
        # (the views over a kept table hold nothing: the tables count)
        while sum(v.of is None for v in kept.values()) > _KEEP.get(con, KEEP_SELECTIONS):
            gone = kept.pop(next(k for k, v in kept.items() if v.of is None))
            if spark is not None:
                spark.drop(gone.table)
                continue
            for k in [k for k, v in kept.items() if v.of == gone.table]:  # (views over it go with it)
                con.execute(f"drop view if exists {kept.pop(k).table}")
            con.execute(f"drop {'view' if gone.of else 'table'} if exists {gone.table}")
    else:
        kept[key] = kept.pop(key)  # most recently used last
    if spark is not None:
        spark.alias("int_analysis_requests", kept[key].table)
    else:
        con.execute(f"create or replace temp view int_analysis_requests as select * from {kept[key].table}")
    return kept[key]


# a kept selection's group under another `by` from the columns it keeps (group_label's rule; the UTC day needs the
# finish time of requests without an arrival, which it does not keep)
_GROUP_LABEL = "group_label('{by}', workload, model, deployment, label, null, engine, engine_version)"


def _regrouped(kept: dict[tuple[Any, ...], KeptSelection], key: tuple[Any, ...]
               ) -> tuple[tuple[Any, ...], KeptSelection] | None:
    """A kept table of the same window (and joined_requests) as `key` under another grouping, when `key`'s
    grouping is not the day: the selection is a view over it with the group computed again. The rows and their
    order are the same (the grouping only names each row's group), and the report's window overall and by
    workload are one table on disk instead of two (at 6M requests ~10 CPU s a table; bench/scale/README.md, mem36)."""
    since, until, by, defined = key
    if by == GroupBy.day.value:
        return None
    for k, v in kept.items():
        if (k[0], k[1], k[3]) == (since, until, defined) and v.of is None and k[2] != by:
            return k, v
    return None


def selection_serial(con: duckdb.DuckDBPyConnection) -> int | None:
    """The serial of the selection `con`'s int_analysis_requests holds (Selection.serial of the last select() on
    it; None before any): what a table made from the selection was made from."""
    return _CURRENT.get(id(con))


def release(con: duckdb.DuckDBPyConnection, keep: Iterable[str] = ()) -> None:
    """Drop the temporary tables an analysis left on `con` (the selections kept for reuse stay, and the tables
    named in `keep`), and the frames it registered, so that a long-lived connection (a dashboard view) does
    not hold every page's intermediate rows."""
    kept = {k.table for k in _KEPT.get(con, {}).values()} | set(keep)
    for (name,) in con.execute("select table_name from duckdb_tables() where temporary").fetchall():
        if name not in kept and name != "int_analysis_requests":
            con.execute(f'drop table if exists temp."{name}"')
    if (database := selections_database(con)) is not None:  # (a table kept beside the selections, and its view)
        for (name,) in con.execute("select table_name from duckdb_tables() where database_name = $d",
                                   {"d": database}).fetchall():
            if f"{database}.{name}" not in kept and name not in kept:
                con.execute(f'drop view if exists temp."{name}"')
                con.execute(f'drop table if exists {database}."{name}"')
    for name in ("thr_arrival_flags",):
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)


def frames_connection(requests: pl.DataFrame, engine_steps: pl.DataFrame | None = None,
                      engine_config: pl.DataFrame | None = None) -> duckdb.DuckDBPyConnection:
    """A connection over in-memory frames instead of a store: `requests` (columns of the requests table, one
    row per request) as joined_requests, and optional engine_steps / engine_config rows. For simulated or
    uploaded data, and for tests."""
    from attribution.schema import conform

    con = duckdb.connect(":memory:")
    con.execute("set TimeZone = 'UTC'")
    define_macros(con)
    # DuckDB draws a progress bar on stdout for a query over 2 s: it would break --format json/csv
    con.execute("set enable_progress_bar = false")
    for name, df in (("joined_requests", requests), ("engine_steps", engine_steps),
                     ("engine_config", engine_config)):
        table = "requests" if name == "joined_requests" else name
        frame = conform(table, df if df is not None else pl.DataFrame())
        if name == "joined_requests":  # the join's one column beyond `requests` that the analyses read
            frame = frame.with_columns(
                pl.when(pl.col("source_kind") == "gateway").then(pl.col("source")).alias("gateway_source"))
        con.register(f"_{name}", frame.to_arrow())
        con.execute(f"create view {name} as select * from _{name}")
    return con


@dataclass(frozen=True)
class Empty:
    """Nothing to show on a dashboard page, and why (the page prints `message` as its empty state); a page's
    answer is an Analysis or this."""

    message: str


@dataclass
class Analysis:
    """One analysis's answer: named frames (the first is the main one), what each column means, and labels
    such as `sampled` or `estimate` that a reader must see next to the numbers."""

    name: str
    params: dict[str, Any]
    tables: dict[str, pl.DataFrame]
    titles: dict[str, str] = field(default_factory=dict)
    definitions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def main(self) -> str:
        return next(iter(self.tables))

    def to_dict(self) -> dict[str, Any]:
        return {
            "analysis": self.name,
            "params": self.params,
            "tables": {k: df.to_dicts() for k, df in self.tables.items()},
            "definitions": self.definitions,
            "notes": self.notes,
        }


def base_params(sel: Selection) -> dict[str, Any]:
    return {**sel.window.to_dict(), "by": sel.by.value, "requests": sel.requests}


def name_groups(df: pl.DataFrame, by: GroupBy) -> pl.DataFrame:
    """Name the group column for the grouping (`workload`, `day`, ...; `group` for all); drop it when the
    groups are the deployments and the frame already has a deployment column."""
    if "grp" not in df.columns:
        return df
    if by == GroupBy.deployment and "deployment" in df.columns:
        return df.drop("grp")
    return df.rename({"grp": "group" if by == GroupBy.all else by.value})


def percentile_list(chosen: Iterable[float] | None = None) -> list[float]:
    """The percentiles an analysis computes: `chosen` (default: the `percentiles` setting's default) and the
    ones findings and charts read (BUILTIN_PERCENTILES), sorted."""
    from attribution.config import DEFAULT_PERCENTILES, parse_percentiles

    picked = parse_percentiles(list(chosen)) if chosen is not None else DEFAULT_PERCENTILES
    return sorted(set(picked) | set(BUILTIN_PERCENTILES))


def percentile_column(q: float) -> str:
    """The column of a percentile: 50 -> p50, 99.9 -> p99_9."""
    return f"p{q:g}".replace(".", "_")


def spread_percentiles(df: pl.DataFrame, percentiles: list[float], column: str = "q") -> pl.DataFrame:
    """`df` with its list column `column` (the quantiles of `percentiles`, in order) as one column per
    percentile (p50, p95, p99_9, ...) in its place."""
    names = [percentile_column(q) for q in percentiles]
    at = df.columns.index(column)
    spread = df.with_columns(pl.col(column).list.get(i, null_on_oob=True).alias(n) for i, n in enumerate(names))
    cols = df.columns[:at] + names + df.columns[at + 1:]
    return spread.select(cols)


def percentile_columns(df: pl.DataFrame) -> list[str]:
    """The percentile columns of `df` (p50, p90, p95, p99, p99_9, ...), in order; not token-weighted ones."""
    return [c for c in df.columns if _PCOL_RE.match(c)]
