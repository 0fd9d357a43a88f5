"""Where a data file lives in the store: hive partitions by the UTC day of each row's event time, so any engine
(DuckDB, Spark, Polars, pyarrow) reads `data/<table>/**/*.parquet` as a partitioned dataset and a date window
reads only its days; and `_trash/`, where files a commit removed wait out their grace period.

    data/<table>/day=YYYY-MM-DD/<commit:012d>-<uuid>.parquet
    data/<table>/day=__HIVE_DEFAULT_PARTITION__/...     rows without an event time (Hive's, Spark's and
                                                         pyarrow's name for a null partition value)
    _trash/<table>/day=.../<name>.parquet                 a removed file, until GRACE_S after its commit
"""

from __future__ import annotations

import re
import uuid
from datetime import date
from pathlib import Path

import polars as pl

NULL_DAY = "__HIVE_DEFAULT_PARTITION__"
TRASH = "_trash"
# The event time a row is filed under. A request by its arrival (else first token, else end: a gateway line
# may log only the end); the meta tables (ingest_errors, ingest_line_shapes) have no event time at all.
PARTITION_TIME: dict[str, tuple[str, ...]] = {
    "requests": ("arrival", "first_token", "finished"),
    "request_events": ("ts",),
    "engine_steps": ("ts",),
    "engine_config": ("ts",),
    "access_log": ("ts",),
    "metric_histograms": ("ts",),
    "metric_counters": ("ts",),
}
_DAY_RE = re.compile(r"/day=([^/]+)/")


def _date(table: str, frame: pl.DataFrame | pl.LazyFrame) -> pl.Expr | None:
    """The UTC date of each row's event time (a date, not a string: formatting every row would cost the ingest
    more than the write), or None for a table without one."""
    have = set(frame.collect_schema().names())
    cols = [c for c in PARTITION_TIME.get(table, ()) if c in have]
    if not cols:
        return None
    t = pl.coalesce([pl.col(c) for c in cols]) if len(cols) > 1 else pl.col(cols[0])
    # (stored times are UTC already; the conversion keeps a column in another zone honest)
    return t.dt.convert_time_zone("UTC").dt.date()


def _name(d: date | None) -> str:
    return NULL_DAY if d is None else d.isoformat()


def days(table: str, frame: pl.DataFrame | pl.LazyFrame) -> list[str]:
    """The partitions the rows of `frame` fall in, sorted."""
    d = _date(table, frame)
    if d is None:
        return [NULL_DAY] if _height(frame) else []
    out = frame.select(d.alias("_day").unique())
    got = out.collect() if isinstance(out, pl.LazyFrame) else out
    return sorted(_name(v) for v in got["_day"].to_list())


def _height(frame: pl.DataFrame | pl.LazyFrame) -> int:
    return frame.height if isinstance(frame, pl.DataFrame) else int(frame.select(pl.len()).collect().item())


def split(table: str, df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The rows of `df` per partition (one entry, without copying, when they all fall in one)."""
    ds = days(table, df)
    d = _date(table, df)
    if len(ds) <= 1 or d is None:
        return {ds[0] if ds else NULL_DAY: df}
    parts = df.with_columns(d.alias("_day")).partition_by("_day", as_dict=True, include_key=False)
    return {_name(k[0]): v for k, v in parts.items()}


def only(table: str, frame: pl.LazyFrame, day: str) -> pl.LazyFrame:
    """The rows of `frame` in partition `day`."""
    d = _date(table, frame)
    if d is None:
        return frame
    return frame.filter(d.is_null() if day == NULL_DAY else d == date.fromisoformat(day))


def data_path(table: str, day: str, version: int) -> str:
    """A new data file's store-relative path."""
    return f"data/{table}/day={day}/{version:012d}-{uuid.uuid4().hex[:12]}.parquet"


def day_of(rel: str) -> str | None:
    """The partition a store-relative data path is in (None: a file of layout 1, before partitions)."""
    m = _DAY_RE.search(rel)
    return m.group(1) if m else None


def trash_path(rel: str) -> str:
    """Where a removed data file waits out its grace period: `data/x/...` -> `_trash/x/...`."""
    return TRASH + "/" + rel.split("/", 1)[1]


def from_trash(rel_in_trash: str) -> str:
    return "data/" + rel_in_trash.split("/", 1)[1]


def anywhere(root: Path, rel: str) -> str:
    """A glob DuckDB expands when it reads: `data/` or `_trash/`, wherever the file is by then. A reader's
    snapshot names files a later commit may move to the trash before the reader's query opens them; the
    rename is atomic, but DuckDB looks in the two directories one after the other, so a statement whose file
    moved between its looks runs again (attribution.db.reading_store) and then finds it in the trash."""
    return f"{root}/*/{rel.split('/', 1)[1]}"


def locate(root: Path, rel: str) -> Path:
    """The file now: under `data/` while live, under `_trash/` once removed (until purged)."""
    p = root / rel
    return p if p.exists() else root / trash_path(rel)


def prune(live: list[str], since_day: str | None, until_day: str | None) -> list[str]:
    """The live files that may hold rows of days since_day..until_day (inclusive; None: open): their
    partition is in the range, or is the null partition, or is unknown (a layout-1 file)."""
    def keep(rel: str) -> bool:
        d = day_of(rel)
        if d is None or d == NULL_DAY:
            return True
        return (since_day is None or d >= since_day) and (until_day is None or d <= until_day)
    return [p for p in live if keep(p)]
