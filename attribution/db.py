"""DuckDB results as Polars frames, across DuckDB's Python API generations (1.x `arrow()`, 2.x
`to_arrow_table()`); a scratch connection for small in-memory queries."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, SupportsFloat, SupportsInt

import duckdb
import polars as pl


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> pl.DataFrame:
    """The rows of `sql` on `con`. A store's views read each data file through a glob over `data/` and
    `_trash/` (attribution.layout.anywhere); an ingest committing meanwhile can move a file to the trash
    between DuckDB's expansion of the glob and its opening the file, so a missing data file is read again
    (the glob then finds it in the trash), twice at most."""
    for attempt in range(3):
        try:
            rel = con.sql(sql, params=params) if params is not None else con.sql(sql)
            return frame(rel)
        except duckdb.IOException as exc:
            text = str(exc)
            if attempt == 2 or "No such file or directory" not in text or "/data/" not in text:
                raise
    raise AssertionError("unreachable")


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
