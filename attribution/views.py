"""A DuckDB connection over a store snapshot: `raw_<table>` relations over the live Parquet files, and the
public views users query (`requests`, `engine_steps`, `engine_config`, `access_log`, `ingest_files`,
`ingest_errors`, and `joined_requests`: one row per request, engine and gateway sides matched), built from
`queries/stg_*.sql`."""

from __future__ import annotations

import tomllib
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from attribution import joincache, kept, layout, queries
from attribution.config import env
from attribution.db import reading_store
from attribution.errors import UsageError
from attribution.labels import define_macros
from attribution.schema import TABLES, empty

if TYPE_CHECKING:
    import pyarrow as pa

    from attribution.schema import PolarsType
    from attribution.store import Snapshot, Store

Days = tuple[str | None, str | None]
JOIN_INPUTS = ("requests", "request_events")  # what queries/stg_requests.sql and the join read
# Views built by a staging query; every other table is exposed as stored.
STAGED = {"requests": "stg_requests", "engine_config": "stg_engine_config",
          "ingest_line_shapes": "stg_ingest_line_shapes"}

INGEST_FILES_COLUMNS: dict[str, PolarsType] = {
    "file": pl.Utf8,
    "format": pl.Utf8,
    "source_kind": pl.Utf8,
    "deployment": pl.Utf8,
    "label": pl.Utf8,
    "status": pl.Utf8,
    "size_bytes": pl.Int64,
    "bytes_read": pl.Int64,
    "lines": pl.Int64,  # lines (records) counted by the census: lines_parsed + lines_skipped + lines_unrecognised
    "lines_parsed": pl.Int64,
    "lines_skipped": pl.Int64,
    "lines_unrecognised": pl.Int64,
    "rows": pl.Int64,
    "errors": pl.Int64,
    "first_ingested": pl.Datetime("us", "UTC"),
    "last_ingested": pl.Datetime("us", "UTC"),
    "rotated": pl.Boolean,
    "reason": pl.Utf8,  # why a file was not (fully) read: skipped, vanished, failed, unrecognised; a `link` row: its target
}


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def ingest_files_frame(snapshot: Snapshot) -> pl.DataFrame:
    rows = []
    newest: dict[str, int] = {}
    for st in snapshot.files.values():
        newest[st["path"]] = max(newest.get(st["path"], -1), st["seq"])
    for st in snapshot.files.values():
        c = st.get("census")  # None: read before the census existed (then `lines` is the last line read)
        rows.append(
            {
                "file": st["path"],
                "format": st.get("format"),
                "source_kind": st.get("source_kind"),
                "deployment": st.get("deployment"),
                "label": st.get("label"),
                "status": st.get("status"),
                "size_bytes": st.get("size"),
                "bytes_read": st.get("offset"),
                "lines": sum(c.values()) if c else (None if st.get("status") == "unrecognised" else st.get("lines")),
                "lines_parsed": c.get("parsed") if c else None,
                "lines_skipped": c.get("skipped") if c else None,
                "lines_unrecognised": c.get("unrecognised") if c else None,
                "rows": st.get("rows", 0),
                "errors": st.get("errors", 0),
                "first_ingested": st.get("first_ingested"),
                "last_ingested": st.get("last_ingested"),
                "rotated": st["seq"] != newest[st["path"]],
                "reason": st.get("reason"),
            }
        )
    df = pl.DataFrame(rows, schema={**INGEST_FILES_COLUMNS, "first_ingested": pl.Float64, "last_ingested": pl.Float64})
    return df.with_columns(
        (pl.col(c) * 1e6).cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
        for c in ("first_ingested", "last_ingested")
    ).sort("file")


# The formats that write Prometheus scrape rows (engine_steps kind `scrape`).
SCRAPE_FORMATS = ("prometheus_text", "prometheus_api")


def has_scrapes(snapshot: Snapshot) -> bool:
    """Whether a file of the store was read by a Prometheus source (the snapshot says, no data is read): only
    then does `engine_steps` need the staging query that keeps scrapes out of the windows log step lines count
    (a store of logs alone reads its rows as stored)."""
    return any(st.get("format") in SCRAPE_FORMATS for st in snapshot.files.values())


def scrapes_stored(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store behind a connection holds Prometheus scrapes (from `ingest_files`: no data is read),
    so an analysis asks about scrape intervals only then."""
    if (spark := queries.spark_connection(con)) is not None:
        return bool(spark.scrapes)
    fmts = ", ".join(f"'{f}'" for f in SCRAPE_FORMATS)
    try:
        rows = con.execute(f"select exists (select 1 from ingest_files where format in ({fmts}))").fetchall()
    except duckdb.CatalogException:  # a connection over frames (simulated, tests): no files, no scrapes
        return False
    return bool(rows[0][0])


def connect(store: Store, snapshot: Snapshot, *, days: Days | dict[str, Days] | None = None
            ) -> duckdb.DuckDBPyConnection:
    """`days` (first, last UTC day, inclusive; None an open end): read only those partitions' files, plus rows
    without a time; a dict gives each table its own (attribution.pruning; a table it does not name is read
    whole)."""
    con = duckdb.connect(":memory:")
    if store.remote:
        store.remote.register(con)
    con.execute("set TimeZone = 'UTC'")
    define_macros(con)
    # DuckDB draws a progress bar on stdout for a query over 2 s: it would break --format json/csv
    con.execute("set enable_progress_bar = false")
    for table in TABLES:
        live = sorted(snapshot.live(table))
        rng = days.get(table) if isinstance(days, dict) else days
        files = store.read_paths(layout.prune(live, *rng) if rng else live)
        raw = f"raw_{table}"
        if files:
            # (the `day=` directories are the files' location, not a column of our tables)
            sql = (f"create view {raw} as select * from read_parquet({_sql_list(files)}, union_by_name = true, "
                   "hive_partitioning = false)")
            reading_store(partial(con.execute, sql))
        else:
            con.register(f"_{raw}_empty", _empty_arrow(table))
            con.execute(f"create view {raw} as select * from _{raw}_empty")
    for table in TABLES:
        if table in STAGED:
            queries.create_view(con, STAGED[table], table)
        elif table == "engine_steps" and has_scrapes(snapshot):
            queries.create_view(con, "stg_engine_steps", table)
        else:
            reading_store(partial(con.execute, f"create view {table} as select * from raw_{table}"))
    con.register("_ingest_files", ingest_files_frame(snapshot).to_arrow())
    con.execute("create view ingest_files as select * from _ingest_files")
    con.register("_workload_map", load_workload_map(store).to_arrow())
    con.execute("create view workload_map as select * from _workload_map")
    queries.create_view(con, "stg_joined_requests", "joined_requests")
    # (the cache holds a whole commit's join, and lives in the store: only a connection reading every file of
    # the join's inputs may build or attach it)
    if not store.remote and not any(_pruned(days, t) for t in JOIN_INPUTS):
        joincache.register(con, store.root, snapshot.version)
    if not store.remote:  # (small results of this commit kept for the next command: attribution.kept)
        kept.register(con, store.root, snapshot.version)
    return con


@cache
def _empty_arrow(table: str) -> pa.Table:
    return empty(table).to_arrow()  # (an Arrow table is immutable: one per process, registered on every connection)


def _pruned(days: Days | dict[str, Days] | None, table: str) -> bool:
    rng = days.get(table) if isinstance(days, dict) else days
    return rng is not None and rng != (None, None)


def workloads_file(store: Store) -> Path | None:
    """$ATTRIBUTION_WORKLOADS, else <store>/workloads.toml, else ./workloads.toml."""
    in_store = None if store.remote else store.root / "workloads.toml"  # (a remote store's own is not read)
    for cand in (env("ATTRIBUTION_WORKLOADS"), in_store, "workloads.toml"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def load_workload_map(store: Store) -> pl.DataFrame:
    """`workloads.toml`: a `[workloads]` table mapping a key hash, key alias or team to a workload name:

        [workloads]
        "3f2a...e9" = "search"      # sha256 hex of an API key
        "batch-etl" = "etl"         # a key alias or team
    """
    path = workloads_file(store)
    pairs: dict[str, str] = {}
    if path is not None:
        try:
            doc = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"{path}: not a valid workloads file ({exc})") from exc
        table = doc.get("workloads", {})
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise UsageError(f"{path}: expected a [workloads] table of \"key hash, alias or team\" = \"name\"")
        pairs = {str(k): v for k, v in table.items()}
    return pl.DataFrame({"match": list(pairs), "name": list(pairs.values())}, schema={"match": pl.Utf8, "name": pl.Utf8})
