"""Upgrading a store's layout in place, by its writer (the next ingest, or `attribution store upgrade`).

Layout 1 -> 2: each live flat data file (`data/<table>/<n>-<uuid>.parquet`) is rewritten into day partitions,
and one commit swaps all of them (the old files go to the trash like any removed file); the marker says 2
only after that commit. A writer killed at any point leaves a store every reader reads: before the commit its
new files are orphans the next writer deletes, after it the marker still says 1 and the rerun finds nothing
left to rewrite and writes the marker.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution import layout

if TYPE_CHECKING:
    from attribution.store import Writer


def upgrade(w: Writer) -> int:
    """Bring the writer's store to the current layout; returns how many data files were rewritten."""
    from attribution.store import LAYOUT_VERSION, MARKER, _atomic_write

    flat = sorted(p for p in w.snapshot.data if layout.day_of(p) is None)
    if flat:
        add: list[dict[str, Any]] = []
        moved: dict[str, list[str]] = {}  # old path -> its rows' new paths
        for rel in flat:
            e = w.snapshot.data[rel]
            new = w.write(e["table"], pl.scan_parquet(w.root / rel), file_key=e.get("file_key"), sealed=e["sealed"])
            add += [{**e, **n} for n in new]
            moved[rel] = [n["path"] for n in new]
        files = {}
        for key, st in w.snapshot.files.items():  # a file's unsealed rows are superseded by path
            if any(p in moved for p in st.get("unsealed_files", [])):
                files[key] = dict(st, unsealed_files=[q for p in st["unsealed_files"] for q in moved.get(p, [p])])
        w.commit(add, flat, files)
    marker = json.loads((w.root / MARKER).read_text())
    _atomic_write(w.root / MARKER, dict(marker, layout=LAYOUT_VERSION, upgraded=time.time()), w.root / "_tmp")
    w.store.layout = LAYOUT_VERSION
    return len(flat)
