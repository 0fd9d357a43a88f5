"""SGLang lines in layouts other than its own `[time ranks] msg` header (log-wrappers.md section 12): Ray actor
prefixes and their dedup suffix, `SGLANG_LOGGING_CONFIG_PATH` re-layouts (`<asctime> LEVEL PID [ranks
file:line] msg`), Dynamo's `<ts>Z  LEVEL module.func: msg`, and the old `[gpu=N] msg` with no time. Each gives
the time, the rank tags and the message, so the message parses the same whatever the header.
"""

from __future__ import annotations

import polars as pl

# one or more Ray prefixes; an actor repr may hold one level of parentheses, `ip=` is there for other nodes
RAY_PREFIX_RE = r"^(?:\((?:[^()]|\([^()]*\))*? pid=\d+(?:, ip=[^)]+)?\) )+"
RAY_REPEAT_RE = r"\s*\[repeated (\d+)x across cluster\](?: \(Ray deduplicates.*\))?\s*$"
# An optional time (Python's asctime with `,ms` or `.ms`, ISO with T, bracketed or not, with or without a
# zone), then prefix tokens (level, PID, `[ranks file:line]` or `[gpu=N]`, `module.func:`, `file.py:N:`),
# then the message. No capture groups: a replace finds the prefix with the fast engine (groups with these
# alternations cost ten times more); the time is then read from the short prefix alone.
_TIME = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
_TIME_GROUPS_RE = r"^\s*\[?(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|TRACE|FATAL)"
# (`%(name)s - %(levelname)s -` and loguru's `| LEVEL | module:func:N -` are tokens too)
_TOKEN = (
    _LEVEL + r"|\d+|\[[^\[\]]*\]|[A-Za-z_][\w-]*(?:\.[\w-]+)+(?::\d+)?(?:\(\))?:|[A-Za-z_][\w-]*\.py:\d+:?"
    r"|(?:-\s+)?[\w.]+\s+-\s+" + _LEVEL + r"\s+-|\||[\w.]+:[\w<>]+:\d+\s+-"
)
GENERIC_RE = r"^\s*(?:\[?" + _TIME + r"\]?\s+)?(?:(?:" + _TOKEN + r")\s+)*"
_GPU_RE = r"\[gpu(?:_id)?=(\d+)\]"
_RANK_RE = r"\b(?:DP|TP|EP|PP|ATTN_CP|MOE_DP)\d+\b"
_DOTTED_LOGGER_RE = r"(?:^|\s)[A-Za-z_]\w*(?:\.\w+)+: "
# after SGLang's own header: `[ts] INFO file.py:N: msg` (LMCache#2400) and `[ts] [gpu=N] msg`
INNER_PREFIX_RE = r"^(?:" + _LEVEL + r" [\w.]+\.py:\d+: |\[gpu(?:_id)?=\d+\] )"
OUTER_TIME_RE = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:?\d\d) "


def strip_ray(text: pl.Series) -> tuple[pl.Series, pl.Series | None]:
    """(text without Ray prefixes and dedup suffix, the `[repeated Nx ...]` count or null); the counts are
    None when no line has a Ray prefix."""
    ray = text.str.starts_with("(") & text.str.contains(" pid=", literal=True)
    if not ray.any():
        return text, None
    idx = ray.arg_true()
    part = text.gather(idx).str.replace(RAY_PREFIX_RE, "")
    reps = pl.repeat(None, text.len(), dtype=pl.Int64, eager=True)
    # the suffix regex ends at `$`: it runs only on the lines that hold the literal
    dedup = part.str.contains("x across cluster]", literal=True)
    if dedup.any():
        didx = dedup.arg_true()
        cut = part.gather(didx)
        reps = reps.scatter(idx.gather(didx), cut.str.extract(RAY_REPEAT_RE, 1).cast(pl.Int64, strict=False))
        part = part.scatter(didx, cut.str.replace(RAY_REPEAT_RE, ""))
    return text.scatter(idx, part), reps


def inner_prefix(msg: pl.Series) -> tuple[pl.Series, pl.Series | None]:
    """After SGLang's own header: (message without `LEVEL file.py:N: ` / `[gpu=N] `, the GPU rank tag or ""),
    the tags None when no message has such a prefix."""
    has = msg.str.contains(INNER_PREFIX_RE).fill_null(False)
    if not has.any():
        return msg, None
    tags = pl.repeat("", msg.len(), dtype=pl.Utf8, eager=True)
    idx = has.arg_true()
    part = msg.gather(idx)
    gpu = part.str.extract(r"^" + _GPU_RE, 1)
    tag = pl.select(pl.when(gpu.is_not_null()).then(pl.lit(" GPU") + gpu).otherwise(pl.lit(""))).to_series()
    return msg.scatter(idx, part.str.replace(INNER_PREFIX_RE, "")), tags.scatter(idx, tag)


def generic(text: pl.Series) -> pl.DataFrame:
    """Lines in another Python-logging layout -> `ok` (a layout was recognised), `ts` (naive local time as
    `YYYY-MM-DD HH:MM:SS.f`, null when the time carries a zone or is missing), `abs` (UTC, for a zoned time),
    `ranks` (` DP3 TP3 ...`, ` GPU0` for `[gpu=N]`), `msg`, `notime` (recognised, but no time of its own),
    `dynamo` (Dynamo's `LEVEL module.func:` layout, which drops SGLang's rank tags).

    A layout is recognised when the prefix has a time, a `[gpu=N]` tag, or a level and a logger name: a line
    that merely starts with a number or a word is left alone."""
    msg = text.str.replace(GENERIC_RE, "")
    pre = text.str.head(text.str.len_chars() - msg.str.len_chars())
    names = {"1": "day", "2": "clock", "3": "frac", "4": "zone"}
    df = pre.str.extract_groups(_TIME_GROUPS_RE).struct.unnest().rename(names)
    df = df.with_columns(pre.alias("pre"), msg.alias("msg"))
    day, clock, frac, zone, prefix = (pl.col(c) for c in ("day", "clock", "frac", "zone", "pre"))
    prefix = prefix.fill_null("")
    gpu = prefix.str.extract(_GPU_RE, 1)
    level = prefix.str.contains(r"(?:^|\s)" + _LEVEL + r"\s")
    logger = prefix.str.contains(r"(?:^|\s)(?:[A-Za-z_][\w-]*(?:\.[\w-]+)+(?::\d+)?(?:\(\))?:|[\w-]+\.py:\d+)")
    ok = (day.is_not_null() | gpu.is_not_null() | (level & logger)).fill_null(False)
    naive = day + " " + clock + pl.when(frac.is_not_null()).then("." + frac).otherwise(pl.lit(""))
    zoned = day + "T" + clock + "." + frac.fill_null("0") + zone.str.replace("^Z$", "+00:00")
    ranks = prefix.str.extract_all(_RANK_RE).list.join(" ")
    return df.select(
        ok.alias("ok"),
        pl.when(zone.is_null()).then(naive).alias("ts"),
        zoned.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", time_zone="UTC", strict=False).alias("abs"),
        (
            pl.when(ranks.str.len_bytes() > 0).then(" " + ranks).otherwise(pl.lit(""))
            + pl.when(gpu.is_not_null()).then(" GPU" + gpu).otherwise(pl.lit(""))
        ).alias("ranks"),
        pl.col("msg"),
        (ok & day.is_null()).alias("notime"),
        (
            ok
            & prefix.str.contains(_DOTTED_LOGGER_RE)
            & ~prefix.str.contains("[", literal=True)
            & ~prefix.str.contains(".py:", literal=True)
        ).alias("dynamo"),
    )


def outer_times(text: pl.Series) -> pl.Series | None:
    """The Docker/kubectl RFC3339 time in front of each line (which `common.segments` strips), as UTC: the
    time a line without its own takes. Dynamo's lines start with the same form; None when no line has one."""
    if not text.str.contains(r"^\d{4}-\d\d-\d\dT").any():  # one cheap anchored test, nearly always false
        return None
    m = text.str.extract_groups(OUTER_TIME_RE).struct
    raw, zone = m.field("1"), m.field("2")
    if raw.is_null().all():
        return None
    full = pl.select(
        pl.when(raw.str.contains(".", literal=True)).then(raw).otherwise(raw + ".0")
        + zone.str.replace("^Z$", "+00:00")
    ).to_series()
    return full.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", time_zone="UTC", strict=False)
