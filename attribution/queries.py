"""The one runner of the SQL questions kept as files in `queries/` (installed as `attribution.sql`), one
question per file, and of SQL a user types (`attribution query`). The header comment of each file
(`-- Question:`, `-- Grain:`, `-- Parameters:`, `-- Columns:`) is its docstring; values are passed as DuckDB
named parameters (`$name`), never formatted into the text. Layers and names: queries/README.md.

One file per question, for both engines: the Spark text is the file transpiled (attribution.spark.transpile).
Where the DuckDB SQL has no Spark translation, only the lines that differ sit in engine blocks,
`-- @duckdb` (DuckDB's lines) `-- @spark` (Spark's) `-- @end`, and `load` keeps the engine's own; a Spark block
is read as the rest of the file is (sqlglot's DuckDB reader, `$name` parameters) and may call Spark functions.
The header says why under `-- Not transpiled:` (the DuckDB construct, in backticks) or `-- Engine:`.

Errors, one behaviour for every caller:
- a shipped query file that is missing or lacks its header, or a `$parameter` the caller did not pass, is a
  bug in the code: `QueryBug` (exit 1, internal error), naming queries/<name>.sql;
- DuckDB failing on a shipped query file is a bug too (the file or its caller is wrong): `QueryBug` naming
  the file, with DuckDB's first line (the DuckDB error stays as its cause). Running out of memory and an
  interrupt are not bugs: those DuckDB errors pass unchanged;
- DuckDB failing on SQL the user wrote (`user_sql`) is a usage error (`UsageError`, exit 2) with DuckDB's
  first line.
Parameters a file does not name are ignored (an analysis passes its window bounds to every query).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import duckdb
import polars as pl

from attribution.db import fetch, frame, reading_store
from attribution.errors import AttributionError, UsageError

T = TypeVar("T")

_PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLOCK_RE = re.compile(r"--\s*@(duckdb|spark|end)\s*$")
ENGINES = ("duckdb", "spark")
# DuckDB errors that say nothing about the SQL: they pass through as they are
_NOT_THE_SQL = (duckdb.OutOfMemoryException, duckdb.InterruptException)


class QueryBug(AttributionError):
    """A shipped query file, or the code calling it, is wrong (exit 1: please report)."""


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    doc: str
    params: tuple[str, ...]


@cache
def load(name: str, engine: str = "duckdb") -> Query:
    """queries/<name>.sql as `engine` (duckdb or spark) runs it: its engine blocks resolved."""
    res = resources.files("attribution.sql") / f"{name}.sql"
    if not res.is_file():
        raise QueryBug(f"queries/{name}.sql: no such query file (a bug: please report it)")
    text = _engine_lines(name, res.read_text(), engine)
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    if not header or not header[0].lower().startswith("question:"):
        raise QueryBug(f"queries/{name}.sql:1: the file must open with a `-- Question:` header")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    params = tuple(dict.fromkeys(_PARAM_RE.findall(body)))
    return Query(name, text, "\n".join(header), params)


def _engine_lines(name: str, text: str, engine: str) -> str:
    """`text` without the marker lines and the other engine's blocks (see the module docstring)."""
    if engine not in ENGINES:
        raise QueryBug(f"queries/{name}.sql: no engine {engine!r} (a bug: please report it)")
    kept, block, opened = [], "", 0
    for i, line in enumerate(text.splitlines(), 1):
        if (marker := _BLOCK_RE.fullmatch(line.strip())) is None:
            if block in ("", engine):
                kept.append(line)
            continue
        tag = marker[1]
        if (tag == "end" and not block) or (tag == "duckdb" and block) or (tag == "spark" and block == "spark"):
            raise QueryBug(f"queries/{name}.sql:{i}: `-- @{tag}` out of place (blocks go `-- @duckdb`, "
                           "`-- @spark`, `-- @end`, either engine's alone or both; a bug: please report it)")
        block, opened = ("" if tag == "end" else tag), i
    if block:
        raise QueryBug(f"queries/{name}.sql:{opened}: `-- @{block}` without its `-- @end` (a bug: please report it)")
    return "\n".join(kept) + "\n"


def _bound(q: Query, params: dict[str, Any]) -> dict[str, Any] | None:
    missing = [p for p in q.params if p not in params]
    if missing:
        raise QueryBug(f"queries/{q.name}.sql needs parameters: {', '.join(missing)} (a bug: please report it)")
    return {k: params[k] for k in q.params} if q.params else None


@contextmanager
def _file_errors(name: str) -> Iterator[None]:
    """DuckDB failing on queries/<name>.sql: a QueryBug naming the file (see the module docstring)."""
    try:
        yield
    except _NOT_THE_SQL:
        raise
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise QueryBug(f"queries/{name}.sql failed: {type(exc).__name__}: {first} (a bug: please report it)"
                       ) from exc


def spark_connection(con: object) -> Any:
    """`con` when it is a Spark connection (attribution.spark.connection), else None: the one place the
    engine is told apart (pyspark is imported only where one was made)."""
    return con if type(con).__name__ == "SparkConnection" else None


_spark = spark_connection


def has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether `con` has a table or view `name` (a store connection has every stored table; one over frames
    has only those it was given)."""
    if (spark := _spark(con)) is not None:
        return bool(spark.has(name))
    found = con.execute("select count(*) from duckdb_views() where view_name = $n", {"n": name}).fetchall()
    return bool(found[0][0])


def view_definitions(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> dict[str, str]:
    """The SQL of the views `names` as an unqualified query on `con` finds them: a temporary one, else the
    connection's schema's (a dashboard filter set's narrowed views, attribution.dashboard.narrow), else main's.
    What a result kept for a connection depends on (another cursor's schemas on the same database do not
    change it)."""
    rows = con.execute(
        "select view_name, sql from duckdb_views() where not internal and view_name in (select unnest($n)) "
        "and (temporary or database_name = current_database() and schema_name in (current_schema(), 'main')) "
        "order by case when temporary then 2 when schema_name = current_schema() then 1 else 0 end",
        {"n": list(names)}).fetchall()
    return dict(rows)  # (the one found first last)


def _load(con: object, name: str) -> Query:
    return load(name, "spark") if _spark(con) is not None else load(name)


def run(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> pl.DataFrame:
    """Run queries/<name>.sql with its `$parameters` and return the rows."""
    return run_columns(con, name, None, **params)


def run_columns(con: duckdb.DuckDBPyConnection, name: str, select_columns: list[str] | None, *,
                where: tuple[str, dict[str, Any]] | None = None, **params: Any) -> pl.DataFrame:
    """`run`, returning only `select_columns` (all when None; DuckDB expressions such as `count(*) as n` too):
    on Spark only those come back to the driver. `where`: a condition on the rows in DuckDB SQL with its own
    `$parameters` (Spark runs it transpiled, as a query file), the rows kept in their order."""
    q = _load(con, name)
    bound = _bound(q, params)
    if where is not None:
        q = Query(q.name, f"select {', '.join(select_columns or ['*'])} from ({q.sql}) where {where[0]}\n",
                  q.doc, (*q.params, *where[1]))
        bound, select_columns = {**(bound or {}), **where[1]}, None
    if (spark := _spark(con)) is not None:
        if select_columns and not all(_COLUMN_RE.fullmatch(c) for c in select_columns):
            # expressions: the query around the file's, transpiled as it is (a plain column list is a projection)
            q, select_columns = Query(q.name, f"select {', '.join(select_columns)} from ({q.sql})\n", q.doc,
                                      q.params), None
        rows: pl.DataFrame = spark.fetch(q, bound, select_columns)
        return rows
    sql = f"select {', '.join(select_columns)} from ({q.sql})" if select_columns else q.sql
    with _file_errors(name):
        return fetch(con, sql, bound)


def run_folded(con: duckdb.DuckDBPyConnection, name: str, select_columns: list[str], fold: Callable[[pl.DataFrame], T],
               *, batch_rows: int = 1 << 18, **params: Any) -> list[T]:
    """`run_columns`, each batch of at most `batch_rows` rows given to `fold` as DuckDB streams it, and what
    `fold` made of each returned in order: the whole result is never held as DuckDB's result, an Arrow table
    and a Polars frame at once, only what `fold` keeps of it (e.g. a few NumPy columns). On Spark the rows
    come back to the driver whole (one batch)."""
    if _spark(con) is not None:
        return [fold(run_columns(con, name, select_columns, **params))]
    q = _load(con, name)
    bound = _bound(q, params)
    sql = f"select {', '.join(select_columns)} from ({q.sql})"

    def run() -> list[T]:
        rel = con.sql(sql, params=bound) if bound is not None else con.sql(sql)
        reader = rel.to_arrow_reader(batch_rows)
        try:  # (a reader not read out holds the connection: closed whatever `fold` does)
            folded = [fold(_batch_frame(batch)) for batch in reader]
            if not folded:  # (no rows: one empty batch, so `fold` still gives the columns' types)
                folded.append(fold(_batch_frame(reader.schema.empty_table())))
            return folded
        finally:
            reader.close()
    with _file_errors(name):
        return reading_store(run)


def _batch_frame(batch: Any) -> pl.DataFrame:
    df = pl.from_arrow(batch)
    assert isinstance(df, pl.DataFrame)  # (a record batch or table converts to a frame)
    return df


def materialize(con: duckdb.DuckDBPyConnection, name: str, table: str | None = None, *, database: str | None = None,
                **params: Any) -> None:
    """Store the rows of queries/<name>.sql in a temporary table on `con` (named as the file unless `table`
    says otherwise), so the queries that follow read them without computing them again. With `database` (an
    attached DuckDB database, not on Spark) a table of that database instead of a temporary one."""
    q = _load(con, name)
    bound = _bound(q, params)
    if (spark := _spark(con)) is not None:
        spark.materialize(q, bound, table or name)
        return
    made = f"table {database}.{table or name}" if database else f"temp table {table or name}"
    with _file_errors(name):
        reading_store(lambda: con.execute(f"create or replace {made} as\n{q.sql}", bound))


def create_view(con: duckdb.DuckDBPyConnection, name: str, view: str | None = None, *, temp: bool = False
                ) -> None:
    """Put the view `view` (default: the file's name) over queries/<name>.sql on `con`: the staging views of
    a store connection (`temp`: a temporary view, an analysis's). A view takes no parameters."""
    q = _load(con, name)
    _bound(q, {})
    if (spark := _spark(con)) is not None:
        spark.create_view(q, view or name)
        return
    with _file_errors(name):
        reading_store(lambda: con.execute(f"create or replace {'temp ' if temp else ''}view {view or name} as {q.sql}"))


@contextmanager
def alias(con: duckdb.DuckDBPyConnection, view: str, table: str) -> Iterator[None]:
    """The temporary view `view` over the temporary table `table` (either engine) for the statements inside,
    both dropped after: queries reading the file name `view` read rows another file made (queries/README.md,
    "Names that are not files")."""
    if (spark := _spark(con)) is not None:
        spark.alias(view, table)
    else:
        con.execute(f"create or replace temp view {view} as select * from {table}")
    try:
        yield
    finally:
        if spark is not None:
            spark.drop(view)
            spark.drop(table)
        else:
            con.execute(f"drop view if exists {view}")
            con.execute(f"drop table if exists {table}")


def inline(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """The rows of a one-line question in DuckDB SQL, too small for a file of its own, on either engine
    (transpiled on Spark as a query file is)."""
    if (spark := _spark(con)) is not None:
        rows: pl.DataFrame = spark.fetch(Query("<inline>", sql, "", ()), None)
        return rows
    return fetch(con, sql)


def table_rows(con: duckdb.DuckDBPyConnection, table: str) -> pl.DataFrame:
    """Every row of `table`, a temporary table an analysis materialised on `con` (either engine)."""
    if (spark := _spark(con)) is not None:
        rows: pl.DataFrame = spark.rows(table)
        return rows
    return fetch(con, f"select * from {table}")


def user_sql(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """Run SQL the user wrote; DuckDB's complaint about it is a usage error. Columns of a type Polars cannot
    import (INTERVAL, also inside a list or struct) come back as DuckDB's text of the value."""
    try:
        return reading_store(lambda: _user_rows(con, sql))
    except _NOT_THE_SQL:
        raise
    except duckdb.Error as exc:
        raise UsageError(f"query failed: {(str(exc) or type(exc).__name__).splitlines()[0]}") from None


def _user_rows(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    rel = con.sql(sql)
    if rel is not None and any("INTERVAL" in str(t) for t in rel.types):
        rel = rel.project(", ".join(
            f'cast({_ident(c)} as varchar) as {_ident(c)}' if "INTERVAL" in str(t) else _ident(c)
            for c, t in zip(rel.columns, rel.types, strict=True)))
    return frame(rel)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

