"""Time-ordering a wrapper's records in bounded memory: batches are spilled to temporary Parquet files and
read back through DuckDB's out-of-core ORDER BY (identity labels, record time, file order), so a newest-first
or unsorted export (Loki, logcli, gcloud, Elasticsearch hits by score) reaches the layer stream by stream in
time order whatever its size. An export that never filled a batch is ordered the same way in memory (a DuckDB
connection and a Parquet round trip cost ~70 ms of CPU, more than parsing a small export)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from attribution.wrappers._platforms import DocumentError, error_record, iter_line_chunks
from attribution.wrappers.base import RECORD_SCHEMA, records_frame

if TYPE_CHECKING:
    import pyarrow as pa

SPILL_ROWS = 50_000  # records held before a batch goes to disk
OUT_ROWS = 50_000  # records per batch handed back
# DuckDB buffer pool for the sort; its own overhead comes on top (see bench/wrappers/README.md)
MEMORY_LIMITS = ("64MB", "256MB", "1GB")
# the identity labels (not `stream`: stdout and stderr of one container are one log, interleaved in time)
KEYS = ("namespace", "pod", "container", "host", "unit")


class Spill:
    """Collects record frames (RECORD_SCHEMA, optionally with a `sid` column joined to `labels` at the end)
    and gives them back sorted. Use as a context manager: the temporary directory is removed on exit."""

    def __init__(self, spill_rows: int = SPILL_ROWS, newest_first: bool = False, detect: bool = True) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="attribution-spill-"))
        self.spill_rows = spill_rows
        self.buf: list[pl.DataFrame] = []
        self.rows = 0
        self.files: list[str] = []
        self.seq = 0
        # adjacent records of one identity going back in time vs forward: a newest-first export keeps its
        # ties (same second, same millisecond) newest-first too, so the file-order tie-breaker is reversed
        self.backward = 0
        self.forward = 0
        self.newest_first = newest_first  # the export's default, when its times never say (all ties)
        # False: file order is the order within a time whatever the file's direction (continuation lines
        # that share their event's time must stay after it)
        self.detect = detect

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def add(self, df: pl.DataFrame) -> None:
        if df.height == 0:
            return
        df = df.with_columns(pl.int_range(self.seq, self.seq + df.height, dtype=pl.Int64).alias("_seq"))
        self.seq += df.height
        self._count_direction(df)
        self.buf.append(df)
        self.rows += df.height
        if self.rows >= self.spill_rows:
            self._flush()

    def _count_direction(self, df: pl.DataFrame) -> None:
        keys = [c for c in (*KEYS, "sid") if c in df.columns]
        same = pl.all_horizontal([pl.col(c).eq_missing(pl.col(c).shift(1)) for c in keys]) if keys else True
        d = df.select(
            back=((pl.col("rec_ts").diff() < pl.duration(microseconds=0)) & same).sum(),
            fwd=((pl.col("rec_ts").diff() > pl.duration(microseconds=0)) & same).sum(),
        )
        self.backward += int(d["back"][0])
        self.forward += int(d["fwd"][0])

    def _flush(self) -> None:
        if not self.buf:
            return
        path = str(self.dir / f"part-{len(self.files):06d}.parquet")
        pl.concat(self.buf, how="vertical_relaxed").write_parquet(path, compression="lz4")
        self.files.append(path)
        self.buf, self.rows = [], 0

    def sorted(
        self, labels: pl.DataFrame | None = None, out_rows: int = OUT_ROWS, empty: str | None = None
    ) -> Iterator[pl.DataFrame]:
        """All records added, ordered by identity, `rec_ts`, file order (reversed for a newest-first file),
        as RECORD_SCHEMA frames of at most `out_rows`. `labels` (`sid` + identity columns) fills the identity
        of records that carry a `sid` (Loki streams whose labels come after their values). `empty`: the
        message of the one not-ok record given when nothing was added (a JSON document of another shape)."""
        if not self.files and not self.buf:
            if empty:
                yield error_record(1, empty)
            return
        if not self.files:  # it all fits (most exports): the same order in memory, no DuckDB and no Parquet
            yield from self._sorted_in_memory(labels, out_rows)
            return
        self._flush()
        src = "read_parquet($files, union_by_name = true)"
        cols = list(RECORD_SCHEMA)
        select = ", ".join(f'r."{c}"' for c in cols)
        join = ""
        if labels is not None and labels.height:
            lab_path = str(self.dir / "labels.parquet")
            labels.write_parquet(lab_path)
            join = f" LEFT JOIN read_parquet('{lab_path}') l ON r.sid = l.sid"
            select = ", ".join(
                f'coalesce(r."{c}", l."{c}") AS "{c}"' if c in labels.columns else f'r."{c}"' for c in cols
            )
        tie = "DESC" if self._backward() else "ASC"
        order = ", ".join(f'"{c}" NULLS FIRST' for c in KEYS)
        sql = (
            f"SELECT * FROM (SELECT {select}, r._seq FROM {src} r{join}) "
            f"ORDER BY {order}, rec_ts NULLS FIRST, line {tie}, _seq"
        )
        con, reader = self._run(sql, out_rows)
        try:
            for batch in reader:
                df = pl.from_arrow(batch)
                assert isinstance(df, pl.DataFrame)
                yield records_frame(df)
        finally:
            con.close()

    def _backward(self) -> bool:
        return self.detect and (
            self.backward > self.forward or (self.backward == self.forward and self.newest_first)
        )

    def _sorted_in_memory(self, labels: pl.DataFrame | None, out_rows: int) -> Iterator[pl.DataFrame]:
        """`sorted` for records that never left memory: the frame the spill would have written, ordered as
        its SQL orders it (DuckDB's default puts the nulls of `line` last in either direction)."""
        df = pl.concat(self.buf, how="vertical_relaxed")
        self.buf, self.rows = [], 0
        if labels is not None and labels.height:
            lab = labels.rename({c: f"_l_{c}" for c in labels.columns if c != "sid"})
            df = df.join(lab, on="sid", how="left").with_columns(
                pl.coalesce(pl.col(c), pl.col(f"_l_{c}")).alias(c) for c in RECORD_SCHEMA if c in labels.columns
            )
        n = len(KEYS)
        df = df.sort([*KEYS, "rec_ts", "line", "_seq"], descending=[False] * (n + 1) + [self._backward(), False],
                     nulls_last=[False] * (n + 1) + [True, True])
        for i in range(0, df.height, out_rows):
            yield records_frame(df.slice(i, out_rows))

    def _run(self, sql: str, out_rows: int) -> tuple[duckdb.DuckDBPyConnection, pa.RecordBatchReader]:
        """The sorted result as an Arrow batch reader. The sort runs (and spills) before the first batch; a
        sort that cannot fit the small memory limit (very long lines) is retried with a larger one."""
        for limit in MEMORY_LIMITS:
            con = duckdb.connect()
            try:
                con.execute(f"SET memory_limit = '{limit}'")
                con.execute(f"SET temp_directory = '{self.dir / 'duckdb'}'")
                con.execute("SET preserve_insertion_order = false")
                con.execute("SET threads = 1")
                return con, con.sql(sql, params={"files": self.files}).to_arrow_reader(out_rows)
            except duckdb.OutOfMemoryException:
                con.close()
                if limit == MEMORY_LIMITS[-1]:
                    raise
        raise AssertionError("unreachable")


def sorted_lines(
    wrapper, pieces, state: dict, newest_first: bool = False, detect: bool = True
) -> Iterator[pl.DataFrame]:
    """Mode "document" for a line-per-record export that is newest-first by default (logcli): each chunk of
    lines through `wrapper.decode`, then all records back in time order."""
    with Spill(newest_first=newest_first, detect=detect) as sp:
        for chunk in iter_line_chunks(pieces):
            sp.add(wrapper.decode(chunk, state))
        yield from sp.sorted()


def sorted_records(batches: Iterator[pl.DataFrame], empty: str, newest_first: bool = False
                   ) -> Iterator[pl.DataFrame]:
    """Mode "document" for an export read in batches of records (`batches` yields RECORD_SCHEMA frames): all
    records back in time order; where the export stops being readable (DocumentError), one not-ok record
    after the last good one stands for the rest."""
    n = 0
    with Spill(newest_first=newest_first) as sp:
        try:
            for df in batches:
                sp.add(df)
                n = max(n, int(df.select(pl.col("line").max()).item() or 0)) if df.height else n
        except DocumentError as exc:
            sp.add(error_record(n + 1, str(exc)))
        yield from sp.sorted(empty=empty)
