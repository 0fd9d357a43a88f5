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
            "rows": {t: queries.inline(con, f"select count(*) as n from {t}").item()
                     for t in [*TABLES, "ingest_files"]},
            "errors": queries.run(con, "ingest_errors_by_reason")}


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
    con, commit = _connection(store, spark)
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
    head = store_counts(store, spark)
    con, files, rows, errors = head["con"], head["files"], head["rows"], head["errors"]
    coverage = queries.run(con, "store_coverage_by_deployment")
    joins = queries.run(con, "join_coverage_by_source")
    versions = queries.run(con, "engine_versions_by_deployment")
    coverage_files = queries.run(con, "store_file_coverage")
    unknown = queries.run(con, "ingest_unrecognised_shapes", limit=UNKNOWN_SHAPES)
    census = queries.run(con, "ingest_lines_by_class")
    return {
        "store": str(store),
        "commit": head["commit"],
        "files": files.to_dicts(),
        "rows": rows,
        "deployments": coverage.to_dicts(),
        "engine_versions": versions.to_dicts(),
        "joins": joins.to_dicts(),
        "errors": errors.head(20).to_dicts(),
        "error_count": int(errors["count"].sum()) if errors.height else 0,
        "lines": {r["class"]: r["lines"] for r in census.to_dicts()},
        "coverage": coverage_files.to_dicts(),
        "unrecognised_shapes": unknown.to_dicts(),
        "silent_files": coverage_files.filter(coverage_files["flag"] == "no rows from its lines")["file"].to_list(),
    }
