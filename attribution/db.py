"""DuckDB results as Polars frames, across DuckDB's Python API generations (1.x `arrow()`, 2.x
`to_arrow_table()`); a scratch connection for small in-memory queries; the one way a connection's working
memory is bounded (`bound_memory`)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, SupportsFloat, SupportsInt, TypeVar

import duckdb
import polars as pl

from attribution.config import env_int

T = TypeVar("T")

# What DuckDB says when a file a query named is gone: a concrete path (opened after it moved), or the
# `data/`-or-`_trash/` glob of attribution.layout.anywhere (expanded while the file was between the two).
_MOVED = ("No such file or directory", "No files found that match the pattern")


def _moved(exc: duckdb.IOException) -> bool:
    text = str(exc)
    return any(m in text for m in _MOVED) and any(d in text for d in ("/data/", "/*/", "/_trash/"))


_LIMITS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, int] = weakref.WeakKeyDictionary()


def shed_cache(con: duckdb.DuckDBPyConnection) -> None:
    """Let DuckDB evict the blocks its buffer pool keeps of `con`'s database files (the report's selections, the
    join cache) before Python works on rows it fetched: they are read again from the file when a query needs them,
    where they sat beside the sweep's arrays (at 6M requests ~450 MB of the report's peak; bench/scale/README.md,
    mem36). Only on a connection bound_memory capped with `shed` (its cap is set again)."""
    limit = _LIMITS.get(con)
    if limit is None:
        return
    try:  # (what it cannot evict it keeps)
        con.execute("set memory_limit = '32MB'")
    except duckdb.Error:
        pass
    finally:
        con.execute("set memory_limit = $limit", {"limit": f"{limit}MB"})


def bound_memory(con: duckdb.DuckDBPyConnection, default_mb: int, scratch: Path | None = None, *,
                 shed: bool = False) -> Path:
    """Cap DuckDB's working memory on `con` at $ATTRIBUTION_DUCKDB_MEMORY_MB, else `default_mb` (each caller's
    default: the commands, the report, the ingest's join, the page preparation, the dashboard), and let it
    spill beyond to `scratch`, else a private directory removed with the connection; the spill directory.
    DuckDB's own default, 80% of the machine, grows with the store (9.4 GB for a 6M-request report). With `shed`
    (the report: one pass over each answer) shed_cache lets go of DuckDB's cached blocks on `con`; a dashboard
    keeps them for the next page."""
    if scratch is None:
        scratch = Path(tempfile.mkdtemp(prefix="attribution-spill-"))
        weakref.finalize(con, shutil.rmtree, scratch, True)
    limit = env_int("ATTRIBUTION_DUCKDB_MEMORY_MB", default_mb) or default_mb
    con.execute("set memory_limit = $limit", {"limit": f"{limit}MB"})
    if shed:
        _LIMITS[con] = limit
    con.execute("set temp_directory = $dir", {"dir": str(scratch)})
    return scratch


def reading_store(run: Callable[[], T]) -> T:
    """`run()`, a statement that reads a store's data files, again if a file it named moved meanwhile.

    A reader's snapshot names its files through a glob over `data/` and `_trash/` (attribution.layout.anywhere):
    a commit removing files renames them from the one to the other, atomically, but DuckDB looks in the two
    directories one after the other and opens a file after it found it, so a rename falling between can make a
    file it needs missing for that one statement. Files only ever move `data/` -> `_trash/` (and leave the
    trash only after the grace period, far longer than a statement), so the next attempt finds it; three
    attempts at most. Every entry point that reads data files (views over a snapshot, `fetch`, `materialize`,
    the user's SQL, the join cache) runs through here."""
    for attempt in range(3):
        try:
            return run()
        except duckdb.IOException as exc:
            if attempt == 2 or not _moved(exc):
                raise
    raise AssertionError("unreachable")


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> pl.DataFrame:
    """The rows of `sql` on `con` (a statement reading a store's files runs as `reading_store` says)."""
    def run() -> pl.DataFrame:
        rel = con.sql(sql, params=params) if params is not None else con.sql(sql)
        return frame(rel)
    return reading_store(run)


def frame(rel: duckdb.DuckDBPyRelation | None) -> pl.DataFrame:
    """The rows of a relation as a Polars frame (none for a statement without a result, e.g. DDL)."""
    if rel is None:
        return pl.DataFrame()
    to_arrow = getattr(rel, "to_arrow_table", None) or rel.arrow
    df = pl.from_arrow(to_arrow())
    assert isinstance(df, pl.DataFrame)  # (an Arrow table converts to a frame; an array would be a Series)
    return df


@cache
def _scratch_db() -> duckdb.DuckDBPyConnection:
    return duckdb.connect(":memory:")


def scratch() -> duckdb.DuckDBPyConnection:
    """A connection of its own (close it after use) to one in-memory database kept for the process: opening a
    fresh database costs ~30-40 ms, a cursor on this one ~1 ms. For queries over values and registered
    frames (parsers, sniffing, checks); nothing is stored in it."""
    return _scratch_db().cursor()


# Polars types a scalar it returns (Series.max(), .min(), .mean(), .quantile(), DataFrame.item()) as any
# Python value; these say which one the code expects, and fail as int() and float() would on anything else.
def as_int(v: object) -> int:
    if isinstance(v, str) or not isinstance(v, SupportsInt):
        raise TypeError(f"a number was expected, not {v!r}")
    return int(v)


def as_float(v: object) -> float:
    if isinstance(v, str) or not isinstance(v, SupportsFloat):
        raise TypeError(f"a number was expected, not {v!r}")
    return float(v)


def as_time(v: object) -> datetime | None:
    if v is not None and not isinstance(v, datetime):
        raise TypeError(f"a time was expected, not {v!r}")
    return v
