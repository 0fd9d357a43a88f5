"""Timestamps as logs print them: naive local times, sometimes without a year, to UTC.

vLLM prints `MM-DD HH:MM:SS` with no year and no zone. The year comes from `--year`, else from the file's
mtime (the year of the mtime, minus one when the first month seen is later in the year than the mtime's
month); a month that drops by six or more from one line to the next is a December -> January rollover.
The running year lives in the parser state so chunked and resumed reads agree.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import polars as pl

from attribution.sources.base import ParseContext


def to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    """A naive local Datetime expression in zone `tz` -> UTC. Nonexistent local times (DST gap) become null;
    ambiguous ones take the earlier instant."""
    return (
        naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .dt.cast_time_unit("us")
    )


def representable(ts: pl.Expr) -> pl.Expr:
    """`ts` where a Python datetime can hold it (years 1-9999), else null: a parser's state keeps times as
    Python values, and a year 0000 must fail one line (the ingest's domain check reports it), not a chunk."""
    # (compared as microseconds: `dt.year()` of a time beyond chrono's range panics)
    return pl.when(ts.dt.epoch("us").is_between(PY_MIN_US, PY_MAX_US)).then(ts)


PY_MIN_US, PY_MAX_US = -62135596800 * 10**6, 253402300799 * 10**6  # 0001-01-01 .. 9999-12-31 23:59:59


def assign_years(month: pl.Series, ctx: ParseContext) -> pl.Series:
    """Year of each line given its month (null where the line has no timestamp). Updates ctx.state. A month
    outside 1-12 counts as none (it cannot be a rollover)."""
    st = ctx.state
    m = pl.lit(month).cast(pl.Int32)
    filled = pl.select(pl.when(m.is_between(1, 12)).then(m).fill_null(strategy="forward")).to_series()
    known = filled.drop_nulls()
    if "year" not in st:
        if ctx.year is not None:
            year = ctx.year
        else:
            mt = datetime.fromtimestamp(ctx.file_mtime, ZoneInfo(ctx.tz))
            first = int(known[0]) if len(known) else mt.month
            year = mt.year - (1 if first > mt.month else 0)
        st["year"] = year
        st["last_month"] = None
    last = st.get("last_month")
    prev = filled.shift(1)
    if last is not None and len(prev):
        prev = prev.scatter(0, last) if prev[0] is None else prev
    prev = prev.fill_null(strategy="forward")
    rollover = ((prev - filled) >= 6).fill_null(False).cast(pl.Int32)
    years = (rollover.cum_sum() + st["year"]).cast(pl.Int32)
    if len(known):
        st["year"] = int(years[-1])
        st["last_month"] = int(filled[-1])
    return years
