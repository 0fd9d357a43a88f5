"""Upgrading a store's layout in place, by its writer (the next ingest, or `attribution store upgrade`).

Layout 1 -> 2: the live flat data files (`data/<table>/<n>-<uuid>.parquet`) are rewritten into day partitions
(a table's sealed files together, one file per day; each unsealed file apart, its file state pointed at its new
paths), and one commit swaps all of them (the old files go to the trash like any removed file); the marker says 2
only after that commit. A writer killed at any point leaves a store every reader reads: before the commit its
new files are orphans the next writer deletes, after it the marker still says 1 and the rerun finds nothing
left to rewrite and writes the marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from attribution import layout

if TYPE_CHECKING:
    from attribution.store import Writer


def upgrade(w: Writer) -> int:
    """Bring the writer's store to the current layout; returns how many data files were rewritten."""
    flat = sorted(p for p in w.snapshot.data if layout.day_of(p) is None)
    if flat:
        add: list[dict[str, Any]] = []
        moved: dict[str, list[str]] = {}  # an unsealed old file -> its rows' new paths
        sealed: dict[str, list[str]] = {}  # table -> its sealed old files, rewritten together: one file a day
        for rel in flat:
            e = w.snapshot.data[rel]
            if e["sealed"]:
                sealed.setdefault(e["table"], []).append(rel)
            else:  # (kept apart: a later read of its input supersedes it by path)
                new = w.write(e["table"], pl.scan_parquet(w.root / rel), file_key=e.get("file_key"), sealed=False)
                add += [{**e, **n} for n in new]
                moved[rel] = [n["path"] for n in new]
        for table, rels in sealed.items():  # (files of older versions may lack newer columns: read each apart)
            rows = pl.concat([pl.scan_parquet(w.root / p) for p in rels], how="diagonal_relaxed")
            add += w.write(table, rows, file_key=None, sealed=True)
        files = {}
        for key, st in w.snapshot.files.items():  # a file's unsealed rows are superseded by path
            if any(p in moved for p in st.get("unsealed_files", [])):
                files[key] = dict(st, unsealed_files=[q for p in st["unsealed_files"] for q in moved.get(p, [p])])
        w.commit(add, flat, files)
    w.mark_layout()
    return len(flat)
