"""Compaction after an ingest: many small sealed data files of a table become one per day partition."""

from __future__ import annotations

import polars as pl

from attribution import layout
from attribution.schema import TABLES
from attribution.store import Writer

COMPACT_MIN_FILES = 16


def compact(w: Writer) -> None:
    """Merge many small sealed data files of a table (unsealed ones may still be superseded): those of each
    partition into one, in one commit per table."""
    for table in TABLES:
        small = [p for p, e in w.snapshot.data.items() if e["table"] == table and e["sealed"]
                 and (w.root / p).stat().st_size < (256 << 20)]
        if len(small) < COMPACT_MIN_FILES:
            continue
        by_day: dict[str | None, list[str]] = {}
        for p in sorted(small):
            by_day.setdefault(layout.day_of(p), []).append(p)
        add, remove = [], []
        for group in by_day.values():
            if len(group) > 1:  # (a day's single small file stays as it is)
                add += w.write(table, pl.scan_parquet([w.root / p for p in group]), file_key=None, sealed=True)
                remove += group
        if remove:
            w.commit(add, remove, {})
