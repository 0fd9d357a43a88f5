"""What a store holds: files by status, rows per table, time span per deployment, engine starts, how many
requests matched across engine and gateway logs, the problems met while reading, and the line census: per
file, how many lines were parsed, skipped or unrecognised, and the most frequent unrecognised shapes."""

from __future__ import annotations

from typing import Any

from attribution import joincache, queries
from attribution.db import fetch
from attribution.schema import TABLES
from attribution.store import Store

UNKNOWN_SHAPES = 15

# One row per current file: its lines by class, the share of each, and a flag for a file read with lines but
# neither a row nor a problem (a format we sniffed but whose lines all went unread).
COVERAGE_SQL = """
select file, format, status, lines, lines_parsed as parsed, lines_skipped as skipped,
       lines_unrecognised as unrecognised,
       round(100.0 * lines_parsed / nullif(lines, 0), 1) as parsed_pct,
       round(100.0 * lines_skipped / nullif(lines, 0), 1) as skipped_pct,
       round(100.0 * lines_unrecognised / nullif(lines, 0), 1) as unrecognised_pct,
       case when status = 'read' and rows = 0 and errors = 0 and lines > 0 then 'no rows from its lines'
            when lines_unrecognised > 0 and source_kind = 'engine' then 'unrecognised engine lines'
       end as flag
from ingest_files where not rotated order by unrecognised desc nulls last, file
"""

UNKNOWN_SQL = f"""
select s.file, s.source, s.shape, s.lines, s.first_line, s.sample
from ingest_line_shapes s join ingest_files f on f.file = s.file and not f.rotated
where s.class = 'unrecognised' order by s.lines desc, s.file, s.first_line limit {UNKNOWN_SHAPES}
"""


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
    coverage_files = fetch(con, COVERAGE_SQL)
    unknown = fetch(con, UNKNOWN_SQL)
    census = fetch(con, "select class, sum(lines)::BIGINT as lines from ingest_line_shapes group by 1 order by 1")
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
        "lines": {r["class"]: r["lines"] for r in census.to_dicts()},
        "coverage": coverage_files.to_dicts(),
        "unrecognised_shapes": unknown.to_dicts(),
        "silent_files": coverage_files.filter(coverage_files["flag"] == "no rows from its lines")["file"].to_list(),
    }
