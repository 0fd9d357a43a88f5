"""What a store holds: files by status, rows per table, time span per deployment, engine starts, how many
requests matched across engine and gateway logs, the problems met while reading, and the line census: per
file, how many lines were parsed, skipped or unrecognised, and the most frequent unrecognised shapes. The
questions are queries/ files; the rows per table are counted here (one statement per table name)."""

from __future__ import annotations

from typing import Any

from attribution import joincache, queries
from attribution.schema import TABLES
from attribution.store import Store

UNKNOWN_SHAPES = 15  # the most frequent unrecognised shapes shown


def store_counts(store: Store, spark: Any = None) -> dict[str, Any]:
    """The head of `store_status`: files by status, rows per table and the count of ingest errors (what the
    dashboard's overview lists), without the per-deployment, per-file and census questions. `spark`: a Spark
    connection over one snapshot of `store` (attribution.spark.connection) to ask instead of DuckDB."""
    con, commit = _connection(store, spark)
    return {"commit": commit, "con": con, "files": queries.run(con, "store_files_by_status"),
            "rows": _rows(con), "errors": queries.run(con, "ingest_errors_by_reason")}


def _rows(con: Any) -> dict[str, Any]:
    return {t: queries.inline(con, f"select count(*) as n from {t}").item() for t in [*TABLES, "ingest_files"]}


def _connection(store: Store, spark: Any) -> tuple[Any, int]:
    """The connection the status questions ask (a new one over the store's latest snapshot, else `spark`)
    and the commit it reads."""
    if spark is not None:
        return spark, spark.commit
    snap = store.snapshot()
    con = store.connect(snap)
    joincache.use(con)
    return con, snap.version


def store_health(store: Store, spark: Any = None) -> dict[str, Any]:
    """The parts of `store_status` the report's ingest health shows (attribution.report.health), asked alone:
    files by status, the problems and their count, join coverage per source, rows and span per deployment
    (not the rows per table, the line census and the shapes, one statement or more each)."""
    return _health_parts(*_connection(store, spark))


def _health_parts(con: Any, commit: int) -> dict[str, Any]:
    errors = queries.run(con, "ingest_errors_by_reason")
    return {
        "commit": commit,
        "files": queries.run(con, "store_files_by_status").to_dicts(),
        "deployments": queries.run(con, "store_coverage_by_deployment").to_dicts(),
        "joins": queries.run(con, "join_coverage_by_source").to_dicts(),
        "errors": errors.head(20).to_dicts(),
        "error_count": int(errors["count"].sum()) if errors.height else 0,
    }


def store_status(store: Store, spark: Any = None) -> dict[str, Any]:
    """store_health's parts, and the rows per table, engine versions, line census, file coverage and the
    unrecognised line shapes."""
    con, commit = _connection(store, spark)
    health = _health_parts(con, commit)
    coverage_files = queries.run(con, "store_file_coverage")
    census = queries.run(con, "ingest_lines_by_class")
    return {
        "store": str(store),
        "commit": commit,
        "files": health["files"],
        "rows": _rows(con),
        "deployments": health["deployments"],
        "engine_versions": queries.run(con, "engine_versions_by_deployment").to_dicts(),
        "joins": health["joins"],
        "errors": health["errors"],
        "error_count": health["error_count"],
        "lines": {r["class"]: r["lines"] for r in census.to_dicts()},
        "coverage": coverage_files.to_dicts(),
        "unrecognised_shapes": queries.run(con, "ingest_unrecognised_shapes", limit=UNKNOWN_SHAPES).to_dicts(),
        "silent_files": coverage_files.filter(coverage_files["flag"] == "no rows from its lines")["file"].to_list(),
    }
