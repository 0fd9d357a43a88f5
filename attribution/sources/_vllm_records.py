"""vLLM physical lines -> records (helper of `vllm_log`): where each vLLM header starts (at the line start,
behind framework or Ray prefixes: `_vllm_layouts`; glued after another record), its message, and its time:
the year from a wrapper's or framework's record time when there is one, else --year / the file's mtime
(timefmt), and for a line without a header the record time, else the last time seen.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from attribution.sources import _vllm_layouts as layouts
from attribution.sources import timefmt
from attribution.sources.base import ParseContext
from attribution.sources.common import has_outer_prefix, may_need_cleaning, segments

TS = pl.Datetime("us", "UTC")
LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# `(NAME pid=N) ` (0.8+; part of the format in 0.33), level, `MM-DD HH:MM:SS`, `[file:line]` or pre-0.8
# `file:line]`. No year, no zone.
HEADER_RE = (
    rf"^(?P<hdr>(?:\([^()]*? pid=\d+\) )?{LEVEL} (?P<mm>\d\d)-(?P<dd>\d\d) (?P<hms>\d\d:\d\d:\d\d) "
    r"\[?[^\]:\s]+:\d+\] ?)"
)
_HEADER_ONLY_RE = re.sub(r"\(\?P<\w+>", "(?:", HEADER_RE)
_LEVEL_DATE_RE = rf"{LEVEL} \d\d-\d\d \d\d:\d\d:\d\d "
_HEAD_DATE_RE = rf"^(?:\([^()]*? pid=\d+\) )?{LEVEL} \d\d-\d\d \d\d:\d\d:\d\d"
# A header anywhere in a segment: pasted logs glue records (`...hit rate: 0.0%INFO 07-28 06:41:19 [...`).
GLUE_RE = rf"(?:\([^()]*? pid=\d+\) )?{LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[^\]:\s]+:\d+\]"
_SEP = "\x1e"

def records(lines: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, tuple[int, int | None]]:
    """Physical lines -> records (idx, line, text, msg, ts, ts_carried, bad_ts, proc; msg null for unheaded
    text), and the number of lines Ray's dedup hid in this chunk with the first line that says so."""
    # The whole header (group 0 of an anchored regex without groups: no capture engine) or null; how many
    # headers a segment holds; and whether any line has a `\r` or an ANSI escape (one select: they run in
    # parallel). Nearly always none has, nor an outer prefix, and then the lines are the segments minus
    # empty ones. A line with a header cannot start with an outer prefix (`(` or a level, then a date), so
    # only the lines without one are tested for it.
    text = pl.col("text")
    found = lines.select(
        rare=may_need_cleaning(text),
        hdr=text.str.extract(_HEADER_ONLY_RE, 0),
        n=text.str.count_matches(_LEVEL_DATE_RE),
        dedup=layouts.has_dedup(text).any(),
    )
    dedup = bool(found["dedup"][0]) if found.height else False
    fw = None
    if found.height:
        unheaded = found["hdr"].is_null()
        if unheaded.any():
            # Framework headers (KServe, Dynamo, a parent process, a bracketed UTC time) start with a date:
            # tested on the lines without a vLLM header at their start only.
            peeled, fw = layouts.peel_frameworks(lines.filter(unheaded).select("line", "text"), ctx.tz)
            if fw is not None:
                lines = lines.with_columns(text=lines["text"].scatter(unheaded.arg_true(), peeled))
                found = lines.select(
                    rare=may_need_cleaning(text),
                    hdr=text.str.extract(_HEADER_ONLY_RE, 0),
                    n=text.str.count_matches(_LEVEL_DATE_RE),
                )
    dirty = found.height > 0 and (
        found["rare"][0] or has_outer_prefix(lines["text"].filter(found["hdr"].is_null()))
    )
    if dirty:
        segs = segments(lines.select("line", "text"))
        found = segs.select(
            hdr=text.str.extract(_HEADER_ONLY_RE, 0), n=text.str.count_matches(_LEVEL_DATE_RE)
        )
    else:
        segs = lines.select("line", "text", seg=pl.lit(0, pl.Int32))
        empty = lines["text"].str.len_bytes() == 0
        if empty.any():
            segs, found = segs.filter(~empty), found.filter(~empty)
    hidden: tuple[int, int | None] = (0, None)
    if dedup:
        segs, n_hidden, first_hidden = layouts.strip_dedup(segs)
        hidden = (n_hidden, first_hidden)
    segs = segs.with_columns(proc=pl.lit(None, pl.Utf8))
    hdr, n_heads = found["hdr"], found["n"]
    # A header that does not start the segment: behind Ray process prefixes (peeled), or glued to the
    # previous record (split below).
    behind = hdr.is_null() & (n_heads >= 1)
    if behind.any():
        peeled_ray = layouts.peel_ray(segs, behind)
        if peeled_ray is not None:
            segs, at = peeled_ray
            hdr = hdr.scatter(at, segs["text"].gather(at).str.extract(_HEADER_ONLY_RE, 0))
    is_glued = (n_heads >= 2) | ((n_heads == 1) & hdr.is_null())
    if is_glued.any():  # rare: split only those segments, and only then re-sort
        pieces = (
            segs.filter(is_glued)
            .with_columns(pl.col("text").str.replace_all(GLUE_RE, _SEP + "$0").str.split(_SEP))
            .explode("text")
            .filter(pl.col("text").str.len_bytes() > 0)
        )
        segs = pl.concat([segs.filter(~is_glued), pieces]).sort("line", "seg", maintain_order=True)
        hdr = segs["text"].str.extract(_HEADER_ONLY_RE, 0)
    recs = segs.with_row_index("idx").with_columns(_hdr=hdr)
    extra = []
    if fw is not None:
        recs = recs.join(fw, on="line", how="left")
        extra.append("fw_ts")
    if "rec_ts" in lines.columns and lines["rec_ts"].null_count() < lines.height:
        recs = recs.join(lines.select("line", pl.col("rec_ts").cast(TS)), on="line", how="left")
        extra.append("rec_ts")
    # The date: the last 14 characters of the header's `[(NAME pid=N) ]LEVEL MM-DD HH:MM:SS` start (NAME has
    # no parentheses, so the prefix, when there is one, ends at the first `) ` and the match is unique).
    date = pl.col("_hdr").str.extract(_HEAD_DATE_RE, 0).str.tail(14)
    msg = pl.col("text").str.strip_prefix(pl.col("_hdr"))
    if fw is not None:
        msg = pl.when(pl.col("_hdr").is_not_null()).then(msg).when(pl.col("fw_msg")).then(pl.col("text"))
    recs = recs.with_columns(msg=msg, _date=date, **{c: timefmt.representable(pl.col(c)) for c in extra})
    years = _years(recs, ctx, extra)
    # One year for the whole chunk (no rollover inside it) is a literal, not a column cast to text.
    year = (
        pl.lit(f"{years[0]}-")
        if len(years) and years.min() == years.max()
        else pl.lit(years).cast(pl.Utf8) + "-"
    )
    naive = (year + pl.col("_date")).str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us", strict=False)
    ts = timefmt.to_utc(naive, ctx.tz)
    if fw is not None:  # a Dynamo or KServe message: the framework's time
        ts = pl.when(pl.col("_hdr").is_null() & pl.col("fw_msg")).then(pl.col("fw_ts")).otherwise(ts)
    recs = recs.with_columns(ts=timefmt.representable(ts))
    # A header whose time does not read (month 13, non-ASCII digits, a local time --tz skips): reported, and
    # the record is not used (its time would otherwise be the previous line's)
    recs = recs.with_columns(bad_ts=pl.col("_hdr").is_not_null() & pl.col("ts").is_null())
    if recs["bad_ts"].any():
        recs = recs.with_columns(msg=pl.when(~pl.col("bad_ts")).then("msg"))
    last = ctx.state.get("last_ts")
    seed = datetime.fromisoformat(last) if last else None
    # A line without a vLLM header takes its framework's or wrapper's time when it has one, else the last
    # time seen.
    own = pl.coalesce("ts", *extra) if extra else pl.col("ts")
    recs = recs.with_columns(
        ts_carried=own.forward_fill().fill_null(pl.lit(seed, dtype=pl.Datetime("us", "UTC")))
    )
    if recs.height and recs["ts_carried"][-1] is not None:
        ctx.state["last_ts"] = recs["ts_carried"][-1].isoformat()
    return recs.select("idx", "line", "text", "msg", "ts", "ts_carried", "bad_ts", "proc"), hidden


def _years(recs: pl.DataFrame, ctx: ParseContext, refs: list[str]) -> pl.Series:
    """The year of each record's header. From a reference time when the chunk has one (a wrapper's `rec_ts`,
    else a framework header's date; a header without one of its own takes the nearest earlier, else later,
    one): the year that puts the header closest to it. This comes before `--year` and the file's mtime,
    which (with the rollover rule of timefmt.assign_years) decide otherwise."""
    # (a non-ASCII digit matches `\d`: such a month is null here and the line's time unreadable below)
    month = recs["_date"].str.head(2).cast(pl.Int32, strict=False)
    years = timefmt.assign_years(month, ctx)
    if not refs:
        return years
    own = recs.select(pl.coalesce(*refs)).to_series()
    if own.null_count() == own.len():
        return years
    near = pl.select(
        pl.when(pl.lit(month).is_between(1, 12))
        .then(layouts.years_near(pl.lit(month), pl.lit(own).forward_fill().backward_fill(), ctx.tz))
    ).to_series()
    # The running year follows the last reference time (its header's year, else its own in --tz), so a
    # later chunk without any continues from there.
    at = int(own.is_not_null().arg_true()[-1])
    if near[at] is not None:
        ctx.state["year"], ctx.state["last_month"] = int(near[at]), int(month[at])
    else:
        local = own.dt.convert_time_zone(ctx.tz)
        ctx.state["year"], ctx.state["last_month"] = int(local.dt.year()[at]), int(local.dt.month()[at])
    return near.fill_null(years)


def continuation_lines(lines: pl.DataFrame, made: pl.Series) -> pl.Series | None:
    """The lines of multi-line messages that made a row through another of their lines. vLLM's
    NewLineFormatter writes a `\\n` inside a message as `\\r\\n` plus the same header again, so a physical line
    ending in `\\r` followed by one with the same header continues one message (a memory-profiling block, a
    prompt with newlines). `made`: the lines that are a row's `line` or already consumed."""
    text = lines["text"]
    ends = text.str.ends_with("\r")
    if not ends.any():
        return None
    hdr = text.str.extract(_HEADER_ONLY_RE, 0)
    cont = (ends.shift(1) & (hdr == hdr.shift(1))).fill_null(False)
    if not cont.any():
        return None
    group = (~cont).cum_sum()
    line = lines["line"]
    hit = group.filter(line.is_in(made.implode())).unique()
    out = line.filter(group.is_in(hit.implode()) & ~line.is_in(made.implode()))
    return out if out.len() else None
