"""The store as one DuckDB database file (tables, not views), for users of the DuckDB CLI or UI."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from attribution.db import fetch, reading_store
from attribution.errors import UsageError
from attribution.store import Store

EXPORTED = ["requests", "request_events", "engine_steps", "engine_config", "access_log", "ingest_files",
            "ingest_errors", "ingest_line_shapes"]


def export_duckdb(store: Store, dest: Path) -> dict[str, int]:
    """Write every table to `dest` atomically (a temporary file renamed into place); returns row counts."""
    if dest.is_dir():
        raise UsageError(f"{dest}: is a directory")
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    con = store.connect()
    con.execute("attach ? as out", [str(tmp)])
    counts = {}
    for t in EXPORTED:
        reading_store(partial(con.execute, f"create table out.{t} as select * from {t}"))
        counts[t] = fetch(con, f"select count(*) as n from out.{t}").item()
    con.execute("detach out")
    os.replace(tmp, dest)
    return counts
