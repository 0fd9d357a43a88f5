"""A store many times larger than one ingested from real-format logs, made in minutes instead of hours: every
row of every table copied `--times` times, copy k on its own pods (`<deployment>~k`), with its own request ids
and keys (`<id>~k`) and input files (`<file>~k`), written through the store's Writer as one commit. The times,
lengths, latencies and step lines stay those of the source store (its week, its daily shape, its workloads),
so the copy is a fleet `--times` times wider over the same week.

    python -m bench.dashboard.replicate SOURCE_STORE DEST_STORE --times 60

Prints the tables' rows and the seconds it took. The source store is only read.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import polars as pl

from attribution.store import Store

SUFFIXED = ("request_id", "request_key", "deployment", "file")  # what makes a copy's rows its own
BATCH = 8  # copies written per data file


def _copy(df: pl.DataFrame, k: int) -> pl.DataFrame:
    if k == 0:
        return df
    cols = [c for c in SUFFIXED if c in df.columns]
    return df.with_columns(pl.col(c) + f"~{k}" for c in cols)


def replicate(source: Path, dest: Path, times: int) -> dict[str, int]:
    src = Store.open(source)
    snap = src.snapshot()
    if dest.exists():
        shutil.rmtree(dest)
    out = Store.open(dest, create=True)
    for extra in ("workloads.toml",):
        if (source / extra).exists():
            shutil.copy(source / extra, dest / extra)
    rows: dict[str, int] = {}
    with out.writer() as w:
        add = []
        for table in sorted({e["table"] for e in snap.data.values()}):
            df = pl.concat([pl.read_parquet(source / p) for p in sorted(snap.live(table))], how="vertical_relaxed")
            copies = times if table != "ingest_line_shapes" else 1  # the census of the logs read, not rows of a pod
            for first in range(0, copies, BATCH):
                part = pl.concat([_copy(df, k) for k in range(first, min(first + BATCH, copies))])
                add.append(w.write(table, part, file_key=None, sealed=True))
            rows[table] = df.height * copies
        w.commit(add, [], {})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--times", type=int, default=60)
    args = ap.parse_args()
    t0 = time.time()
    rows = replicate(args.source, args.dest, args.times)
    print({**rows, "seconds": round(time.time() - t0, 1)})


if __name__ == "__main__":
    main()
