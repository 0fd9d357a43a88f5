"""The SGLang logger header (`[2025-01-01 12:00:00(.mmm) DP0 TP0] msg`, and `[16:43:29 TP0] msg` up to 0.3.3),
shared by the SGLang console-log sources (engine-logs.md S-0): records, their UTC time, ranks and message.
Lines that start with that header take the fast path; the others (Ray prefixes, custom logging layouts,
Dynamo, `[gpu=N]`: _sglang_layouts) and the time a wrapper recorded (`rec_ts`) are read here too.
"""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import polars as pl

from attribution.sources._sglang_layouts import generic, inner_prefix, outer_times, strip_ray
from attribution.sources.base import ParseContext
from attribution.sources.common import segments
from attribution.sources.timefmt import representable, to_utc

HEADER_RE = r"^.*?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?|\d\d:\d\d:\d\d(?:\.\d{3})?)((?: [A-Z][A-Z_]*\d+)*)\] (.*)$"
# HEADER_RE for a record that starts with its header, without capturing the message; the two time forms share
# their first two digits, so the regex is one-pass (a faster engine for the capture groups)
_LEAD_RE = r"^\[(\d\d(?:\d\d-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?|:\d\d:\d\d(?:\.\d{3})?))((?: [A-Z][A-Z_]*\d+)*)\] "
# where a record starts inside a segment (pasted logs glue records, tqdm bars end without a newline)
_GLUE_RE = (
    r"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: [A-Z][A-Z_]*\d+)*\] "
    r"|\[\d\d:\d\d:\d\d(?:\.\d{3})?(?: [A-Z][A-Z_]*\d+)+\] )"
)
# messages whose text may quote a log line (prompts, arguments): never split
_UNSPLIT_RE = r"^(?:Receive|Finish|in=|server_args=)"
_HEAD = 12  # characters of `_head`: Polars stores strings of up to 12 bytes inline
_US_PER_DAY = 86_400_000_000
_HALF_DAY_US = _US_PER_DAY // 2
_EPOCH = date(1970, 1, 1)


def headed(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """`line`, `text` (and optionally `rec_ts`) -> `line`, `seg`, `text`, `has_header`, `bad_ts`, `no_ts`,
    `ts`, `ranks`, `engine_index`, `primary`, `tp0`, `msg`, `_head` (its first characters, see
    msg_starts_with), `ray_repeated`, `dynamo`. Updates ctx.state (`day`, `last_tod_us`, `last_ts_us`).

    One row per record (see `_split_glued`). engine_index is the DP rank (the GPU of an old `[gpu=N]` line);
    `primary`: every rank number is 0; `tp0`: every rank but DP is 0 (one line per data-parallel scheduler).
    A line's own time comes first; a line without one (old `[gpu=N]` lines, uvicorn access lines before
    0.4.3) takes the record time `rec_ts` a wrapper gave (or a Docker/kubectl time in front of the line),
    else the time of the nearest earlier line; `no_ts`: a `[gpu=N]` line that has none of these. A short
    `[HH:MM:SS TP0]` header takes its date from `rec_ts` where there is one (see `_assign_days` otherwise).
    """
    st = ctx.state
    lines = lines.rechunk()  # one chunk (the CSV reader gives several): faster gathers and joins
    if "rec_ts" in lines.columns and lines.schema["rec_ts"] != pl.Datetime("us", "UTC"):
        lines = lines.with_columns(pl.col("rec_ts").cast(pl.Datetime("us", "UTC")))
    outer = outer_times(lines["text"])
    if outer is not None:
        rec = lines["rec_ts"] if "rec_ts" in lines.columns else None
        # A time printed in the line (a `docker -t` prefix inside a platform's record, Dynamo's own time) is
        # nearer the engine than the outer wrapper's record time.
        outer = outer if rec is None else pl.select(pl.coalesce(outer, rec)).to_series()
        lines = lines.with_columns(outer.alias("rec_ts"))
    has_rec = "rec_ts" in lines.columns
    segs = segments(lines)
    df = _read_headers(segs)
    if _any_glued(df):
        df = _read_headers(_split_glued(segs))
    dated = pl.col("_ts").str.len_chars() > 12
    df = df.with_columns(
        pl.col("_hdr").alias("has_header"),
        dated.fill_null(False).alias("_dated"),
        pl.when(dated).then(pl.col("_ts").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)).alias("_dt"),
        pl.when(~dated).then(pl.col("_ts").str.to_time("%H:%M:%S%.f", strict=False)).alias("_tm"),
    )
    tod_us = (
        pl.when(pl.col("_dated"))
        .then(pl.col("_dt").dt.time().cast(pl.Int64, strict=False) // 1000)
        .otherwise(pl.col("_tm").cast(pl.Int64, strict=False) // 1000)
    )
    df = df.with_columns(
        tod_us.alias("_tod"),
        pl.when(pl.col("_dated")).then(pl.col("_dt").dt.date().cast(pl.Int32, strict=False)).alias("_day"),
    ).with_columns((pl.col("_ts").is_not_null() & pl.col("_tod").is_null()).alias("bad_ts"))
    df = _assign_days(df, ctx)
    if has_rec:
        df = _rec_days(df, ctx.tz)
    naive = (pl.col("_day").cast(pl.Int64, strict=False) * _US_PER_DAY + pl.col("_tod")).cast(pl.Datetime("us"))
    own = representable(pl.coalesce(to_utc(naive, ctx.tz), pl.col("_abs")))
    # A time that reads but does not convert (a local time in the DST gap of --tz, year 0000) is unreadable
    # too: the line must not take the previous line's time below.
    df = df.with_columns(
        (pl.coalesce(own, "rec_ts") if has_rec else own).alias("ts"),
        (pl.col("bad_ts") | (pl.col("_tod").is_not_null() & own.is_null())).alias("bad_ts"),
    )
    last = st.get("last_ts_us")
    ts_us = pl.col("ts").cast(pl.Int64, strict=False)
    if last is not None:
        ts_us = pl.when(pl.int_range(pl.len()) == 0).then(ts_us.fill_null(last)).otherwise(ts_us)
    df = df.with_columns(ts_us.forward_fill().cast(pl.Datetime("us", "UTC")).alias("ts"))
    if df.height and df["ts"][-1] is not None:
        st["last_ts_us"] = int(df["ts"].cast(pl.Int64, strict=False)[-1])
    no_rank = r"[A-Z]0*[1-9]"
    gpu = pl.col("ranks").str.extract(r" GPU(\d+)").cast(pl.Int64, strict=False)
    return df.select(
        "line",
        "seg",
        "text",
        "has_header",
        "bad_ts",
        (pl.col("_notime") & pl.col("ts").is_null()).alias("no_ts"),
        "ts",
        "ranks",
        pl.coalesce(pl.col("ranks").str.extract(r" DP(\d+)").cast(pl.Int64, strict=False), gpu).alias("engine_index"),
        (~pl.col("ranks").str.contains(no_rank)).alias("primary"),
        (~pl.col("ranks").str.replace_all(r" (?:DP|GPU)\d+", "").str.contains(no_rank)).alias("tp0"),
        pl.coalesce("_msg", "text").alias("msg"),
        pl.col("_rep").alias("ray_repeated"),
        pl.col("_dynamo").alias("dynamo"),
    ).with_columns(pl.col("msg").str.head(_HEAD).alias("_head"))


def _rec_days(df: pl.DataFrame, tz: str) -> pl.DataFrame:
    """A short `[HH:MM:SS TP0]` header with a record time: the local date of that time in `tz`, moved a day
    back or on when the header's time of day is more than 12 hours from the record's (around midnight)."""
    short = ~pl.col("_dated") & pl.col("_tod").is_not_null() & pl.col("rec_ts").is_not_null()
    if not df.select(short.any()).item():
        return df
    local = pl.col("rec_ts").dt.convert_time_zone(tz).dt.replace_time_zone(None).cast(pl.Int64, strict=False)
    day = local // _US_PER_DAY
    diff = day * _US_PER_DAY + pl.col("_tod") - local
    day = day - (diff > _HALF_DAY_US).cast(pl.Int64, strict=False) + (diff < -_HALF_DAY_US).cast(pl.Int64, strict=False)
    return df.with_columns(pl.when(short).then(day.cast(pl.Int32, strict=False)).otherwise(pl.col("_day")).alias("_day"))


def msg_starts_with(df: pl.DataFrame, prefix: str) -> pl.Series:
    """Which messages start with `prefix`, tested on `_head` (from `headed`): the first characters of each
    message, short enough to be stored inline and compared several times faster than the message itself; a
    longer prefix is tested in full only where `_head` matches."""
    head = df["_head"] if "_head" in df.columns else df["msg"].str.head(_HEAD)
    if len(prefix) <= _HEAD:
        return head.str.starts_with(prefix)
    mask = head == prefix[:_HEAD]
    if mask.any():
        idx = mask.arg_true()
        mask = mask.scatter(idx, df["msg"].gather(idx).str.starts_with(prefix))
    return mask


def _read_headers(segs: pl.DataFrame) -> pl.DataFrame:
    """Segments -> + `_lead` (the segment starts with its header), `_ts` (naive local time text), `ranks`,
    `_msg` (null without a header), `_hdr` (a header of any layout), `_abs` (UTC, a zoned time of the line's
    own), `_notime` (a layout without a time: `[gpu=N]`), `_rep` (Ray's `[repeated Nx]` count), `_dynamo`."""
    text = segs["text"]
    n = text.len()
    # Nearly every record starts with its header: the anchored regex reads it and the message is the rest.
    # The other layouts (_sglang_layouts) and the unanchored HEADER_RE run only on the others.
    lead = text.str.extract_groups(_LEAD_RE).struct
    ts, ranks = lead.field("1"), lead.field("2")
    msg = text.str.slice(ts.str.len_chars() + ranks.str.len_chars() + 3)
    is_lead = ts.is_not_null()
    hdr = is_lead.clone()  # scatter writes in place
    absolute = pl.repeat(None, n, dtype=pl.Datetime("us", "UTC"), eager=True)
    notime, dynamo = (pl.repeat(False, n, dtype=pl.Boolean, eager=True) for _ in range(2))
    rep = pl.repeat(None, n, dtype=pl.Int64, eager=True)
    if not is_lead.all():
        idx = (~is_lead).arg_true()
        rest, rest_rep = strip_ray(text.gather(idx))
        if rest_rep is not None:
            rep = rep.scatter(idx, rest_rep)
            # SGLang's own header behind the Ray prefixes
            late = rest.str.extract_groups(_LEAD_RE).struct
            late_ts, late_ranks = late.field("1"), late.field("2")
            late_msg = pl.select(
                pl.when(late_ts.is_not_null()).then(rest.str.slice(late_ts.str.len_chars() + late_ranks.str.len_chars() + 3))
            ).to_series()
        else:  # no Ray prefix: these segments do not start with the header
            late_ts, late_ranks, late_msg = (pl.repeat(None, idx.len(), dtype=pl.Utf8, eager=True) for _ in range(3))
        other = late_ts.is_null()
        if other.any():
            oidx = other.arg_true()
            g = generic(rest.gather(oidx))
            if not g["ok"].all():
                # a header after some other prefix (glued records, a framework's own prefix)
                bidx = (~g["ok"]).arg_true()
                anywhere = rest.gather(oidx).gather(bidx).str.extract_groups(HEADER_RE).struct
                found = anywhere.field("1").is_not_null()
                g = g.with_columns(
                    g["ok"].scatter(bidx, found),
                    g["ts"].scatter(bidx, anywhere.field("1")),
                    g["ranks"].scatter(bidx, anywhere.field("2").fill_null("")),
                    g["msg"].scatter(bidx, anywhere.field("3")),
                )
            g = g.with_columns(
                pl.when("ok").then("ts").alias("ts"),
                pl.when("ok").then("msg").alias("msg"),
                pl.when("ok").then("ranks").otherwise(pl.lit("")).alias("ranks"),
            )
            late_ts = late_ts.scatter(oidx, g["ts"])
            late_ranks = late_ranks.scatter(oidx, g["ranks"])
            late_msg = late_msg.scatter(oidx, g["msg"])
            other_ok = pl.repeat(True, idx.len(), eager=True).scatter(oidx, g["ok"])
            absolute = absolute.scatter(idx.gather(oidx), g["abs"])
            notime = notime.scatter(idx.gather(oidx), g["notime"])
            dynamo = dynamo.scatter(idx.gather(oidx), g["dynamo"])
        else:
            other_ok = pl.repeat(True, idx.len(), eager=True)
        ts, ranks, msg = (col.scatter(idx, v) for col, v in ((ts, late_ts), (ranks, late_ranks), (msg, late_msg)))
        hdr = hdr.scatter(idx, other_ok)
    ranks = ranks.fill_null("")
    # `[ts] INFO file.py:N: msg` and `[ts] [gpu=N] msg`: one anchored test, nearly always false
    msg, tag = inner_prefix(msg)
    return segs.with_columns(
        is_lead.alias("_lead"),
        ts.alias("_ts"),
        (ranks if tag is None else ranks + tag).alias("ranks"),
        msg.alias("_msg"),
        hdr.alias("_hdr"),
        absolute.alias("_abs"),
        notime.alias("_notime"),
        rep.alias("_rep"),
        dynamo.alias("_dynamo"),
    )


def _any_glued(df: pl.DataFrame) -> bool:
    """Whether some segment holds a record after its header's message starts (see _split_glued), from
    `_read_headers` output: past a header (of any layout, wherever it was found) that is a header anywhere in
    the message (a header starts with the only `[` it holds, so none starts inside another), else one anywhere
    in the text. A record whose header follows a prefix (a tqdm bar, a Ray actor) is read from that header
    on, so the prefix needs no cut. A header ends with `] `: the regex runs only where that is."""
    hdr = df["_hdr"] & df["_msg"].is_not_null()
    where = df["_msg"] if hdr.all() else pl.select(pl.when(hdr).then(df["_msg"]).otherwise(df["text"])).to_series()
    maybe = where.str.contains("] ", literal=True)
    return bool(maybe.any() and where.filter(maybe).str.contains(_GLUE_RE).any())


def _split_glued(segs: pl.DataFrame) -> pl.DataFrame:
    """One segment per record: a segment is cut in front of every header after its first character, unless
    its first record is a request or server_args line (their text may quote a log line).

    Headers never overlap (a header holds no `[` but its first), so a segment needs cutting exactly when it
    has two headers, or one not at its start; only those (normally none) go through the split.
    """
    n = pl.col("text").str.count_matches(_GLUE_RE)
    glued = (n > 1) | ((n == 1) & ~pl.col("text").str.contains("^" + _GLUE_RE))
    mask = segs.select(glued.alias("g"))["g"]
    if not mask.any():
        return segs
    keep = pl.col("text").str.extract(HEADER_RE, 3).str.contains(_UNSPLIT_RE).fill_null(False)
    cut = (
        segs.filter(mask)
        .with_columns(
            pl.when(keep)
            .then(pl.concat_list(pl.col("text")))
            .otherwise(pl.col("text").str.replace_all(_GLUE_RE, "\x00$1").str.split("\x00"))
            .alias("text")
        )
        .explode("text")
        .filter(pl.col("text").str.len_bytes() > 0)
    )
    return (
        pl.concat([segs.filter(~mask), cut])
        .sort("line", "seg", maintain_order=True)
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int32).over("line").alias("seg"))
    )


def _assign_days(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Fill `_day` (days since 1970-01-01) for the short `[HH:MM:SS TP0]` headers.

    The date is that of the last dated header before (this chunk or the state); with none, the date of the
    file's mtime in `--tz`, or the day before when the first time of day is later than the mtime's (a line
    cannot be written after its file's mtime). The day rolls over whenever the time of day goes backwards by
    more than 12 hours from one header to the next.
    """
    st = ctx.state
    has_tod = df["_tod"].is_not_null()
    timed = df.filter(has_tod).select("_dated", "_day", "_tod")
    if timed.height == 0:
        return df
    if timed["_dated"].all():
        # every header carries its date (the usual case): nothing to infer, and the per-date window below
        # would cost more than the rest of the header parsing
        st["day"] = int(timed["_day"][-1])
        st["last_tod_us"] = int(timed["_tod"][-1])
        return df
    if st.get("day") is None and not timed["_dated"][0]:
        st["day"] = _first_day(int(timed["_tod"][0]), ctx)
    prev = timed["_tod"].shift(1)
    if st.get("last_tod_us") is not None:
        prev = prev.scatter(0, st["last_tod_us"])
    timed = timed.with_columns(prev.alias("_prev"), pl.col("_dated").cast(pl.Int32, strict=False).cum_sum().alias("_grp"))
    roll = (~pl.col("_dated") & ((pl.col("_prev") - pl.col("_tod")) > _HALF_DAY_US)).fill_null(False)
    timed = timed.with_columns(
        pl.col("_day").forward_fill().fill_null(pl.lit(st.get("day"), pl.Int32)).alias("_anchor"),
        roll.cast(pl.Int32, strict=False).cum_sum().over("_grp").alias("_rolls"),
    ).with_columns((pl.col("_anchor") + pl.col("_rolls")).cast(pl.Int32, strict=False).alias("_day"))
    st["day"] = int(timed["_day"][-1])
    st["last_tod_us"] = int(timed["_tod"][-1])
    # put the days back at the timed rows' positions (a join on line and seg costs more than the rest)
    day = pl.repeat(None, df.height, dtype=pl.Int32, eager=True).alias("_day")
    day = day.scatter(has_tod.arg_true(), timed["_day"])
    return df.with_columns(day)


def _first_day(first_tod_us: int, ctx: ParseContext) -> int:
    mt = datetime.fromtimestamp(ctx.file_mtime, ZoneInfo(ctx.tz))
    mtime_tod_us = ((mt.hour * 60 + mt.minute) * 60 + mt.second) * 1_000_000 + mt.microsecond
    day = (mt.date() - _EPOCH).days
    return day - 1 if first_tod_us > mtime_tod_us else day
