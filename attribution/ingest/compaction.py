"""Compaction after an ingest: many small sealed data files of a table become one."""

from __future__ import annotations

import polars as pl

from attribution.schema import TABLES
from attribution.store import Writer

COMPACT_MIN_FILES = 16


def compact(w: Writer) -> None:
    """Merge many small sealed data files of a table into one (unsealed ones may still be superseded)."""
    for table in TABLES:
        small = [p for p, e in w.snapshot.data.items() if e["table"] == table and e["sealed"]
                 and (w.root / p).stat().st_size < (256 << 20)]
        if len(small) < COMPACT_MIN_FILES:
            continue
        merged = pl.scan_parquet([w.root / p for p in sorted(small)])
        entry = w.write(table, merged, file_key=None, sealed=True)
        w.commit([entry], sorted(small), {})
