"""DuckDB results as Polars frames, across DuckDB's Python API generations (1.x `arrow()`, 2.x
`to_arrow_table()`)."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> pl.DataFrame:
    rel = con.sql(sql, params=params) if params is not None else con.sql(sql)
    if rel is None:  # a statement without a result (DDL)
        return pl.DataFrame()
    to_arrow = getattr(rel, "to_arrow_table", None) or rel.arrow
    return pl.from_arrow(to_arrow())
