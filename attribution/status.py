"""What a store holds: files by status, rows per table, time span per deployment, engine starts, how many
requests matched across engine and gateway logs, and the problems met while reading."""

from __future__ import annotations

from typing import Any

from attribution import joincache, queries
from attribution.db import fetch
from attribution.schema import TABLES
from attribution.store import Store


def store_status(store: Store) -> dict[str, Any]:
    snap = store.snapshot()
    con = store.connect(snap)
    joincache.use(con)
    files = fetch(
        con,
        "select status, count(*) as files, sum(size_bytes) as bytes from ingest_files where not rotated "
        "group by status order by status",
    )
    rows = {t: fetch(con, f"select count(*) as n from {t}").item() for t in [*TABLES, "ingest_files"]}
    coverage = queries.run(con, "store_coverage_by_deployment")
    errors = queries.run(con, "ingest_errors_by_reason")
    joins = queries.run(con, "join_coverage_by_source")
    versions = fetch(
        con,
        "select deployment, engine, version, model, count(*) as starts from engine_config group by all order by 1, 3",
    )
    return {
        "store": str(store.root),
        "commit": snap.version,
        "files": files.to_dicts(),
        "rows": rows,
        "deployments": coverage.to_dicts(),
        "engine_versions": versions.to_dicts(),
        "joins": joins.to_dicts(),
        "errors": errors.head(20).to_dicts(),
        "error_count": int(errors["count"].sum()) if errors.height else 0,
    }
