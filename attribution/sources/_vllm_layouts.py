"""Where a vLLM line starts when something outside vLLM wrote in front of it (helper of `vllm_log`;
../shared/formats/log-wrappers.md §4, §12): framework headers (KServe, Dynamo, a parent process that re-logs
its child, bracketed UTC launcher prefixes), Ray actor prefixes (one or nested, actor reprs with
parentheses, `ip=`), and Ray's dedup suffix. Each function runs only on the rows a cheap test selects, so a
plain vLLM log pays for one anchored test per chunk.
"""

from __future__ import annotations

from typing import overload

import polars as pl

from attribution.sources import timefmt

_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# A Ray (or vLLM) process prefix: `(NAME pid=N) `, `(NAME pid=N, ip=A) `; NAME may hold one level of
# parentheses (`MyActor(index=2)`).
PROC = r"\((?:[^()]|\([^()]*\))*? pid=\d+(?:, ip=[^)]+)?\) "
_HEAD = rf"{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[^\]:\s]+:\d+\]"
# One or more process prefixes, then a vLLM header (the innermost prefix names the vLLM process).
RAY_HEAD_RE = rf"(?s)^(?P<procs>(?:{PROC})+)(?P<rest>{_HEAD}.*)$"
_LAST_PROC_RE = r"\(((?:[^()]|\([^()]*\))*?) pid=\d+(?:, ip=[^)]+)?\) $"
# The innermost `(NAME pid=N) ` of a line that starts with its vLLM header (HEADER_RE's own prefix).
PROC_NAME_RE = rf"^\(([^()]*?) pid=\d+\) {_LEVEL} "
DEDUP_RE = r"\s*\[repeated (\d+)x across cluster\](?: \(Ray deduplicates logs[^)]*\))?\s*$"

# Framework headers anchored at the line start (after ANSI codes), the header alone (group 0 is short: the
# rest of the line is not copied). One named group per layout holds its time: local in --tz for a parent
# process (`p`), KServe trace (`k`) and KServe access (`ka`) lines; UTC for bracketed launcher (`b`) and
# Dynamo (`d`) lines. Dynamo and KServe trace lines carry the message itself (no vLLM header follows); the
# others carry a whole vLLM line (or a uvicorn access line). Lines starting with a date are tested first.
FW_CAND_RE = r"^(?:\x1b\[[0-9;]*m)*\[?\d{4}-\d\d-\d\d[ T]\d\d:"
_ISO_Z = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"
FW_RE = (
    r"^(?:"
    rf"\[(?P<b>{_ISO_Z})\] "
    rf"|(?P<d>{_ISO_Z})\s+(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR) +[\w.:]+: "
    r"|(?P<p>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.]+ - [A-Z]+ - "
    r"|(?P<k>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \d+ kserve\.trace "
    r"|(?P<ka>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) uvicorn\.access "
    r")"
)
ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"


def peel_frameworks(lines: pl.DataFrame, tz: str) -> tuple[pl.Series, pl.DataFrame | None]:
    """Strip framework headers. Returns the lines' text (a header removed where one was found) and, when
    any was, a frame `line`, `fw_ts` (UTC), `fw_msg` (the text is the message: no vLLM header follows)."""
    text = lines["text"]
    cand = text.str.contains(FW_CAND_RE)
    if not cand.any():
        return text, None
    at = cand.arg_true()
    sub = text.gather(at)
    if sub.str.contains("\x1b", literal=True).any():
        sub = sub.str.replace_all(ANSI_RE, "")
    g = pl.DataFrame({"line": lines["line"].gather(at), "_t": sub, "_at": at,
                      "_h": sub.str.extract(FW_RE, 0), "_g": sub.str.extract_groups(FW_RE)})
    g = g.filter(pl.col("_h").is_not_null())
    if g.height == 0:
        return text, None
    g = g.unnest("_g")
    local = pl.coalesce(pl.col("p").str.replace(",", ".", literal=True), "k", "ka").str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False
    )
    utc = pl.coalesce("b", "d").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False)
    fw = g.select(
        "line",
        "_at",
        _text=pl.col("_t").str.strip_prefix(pl.col("_h")),
        fw_ts=pl.coalesce(timefmt.to_utc(local, tz), utc.dt.replace_time_zone("UTC")),
        fw_msg=pl.col("d").is_not_null() | pl.col("k").is_not_null(),
    )
    return text.scatter(fw["_at"], fw["_text"]), fw.drop("_text", "_at")


def peel_ray(segs: pl.DataFrame, cand: pl.Series) -> tuple[pl.DataFrame, pl.Series] | None:
    """Segments `cand` (no header at the start, one somewhere) that are Ray-prefixed vLLM lines: their text
    from the vLLM header on, and a `proc` column with the innermost process name. None when none is."""
    idx = cand.arg_true()
    m = segs["text"].gather(idx).str.extract_groups(RAY_HEAD_RE)
    ok = m.struct.field("rest").is_not_null()
    if not ok.any():
        return None
    idx = idx.filter(ok)
    text = segs["text"].scatter(idx, m.struct.field("rest").filter(ok))
    names = m.struct.field("procs").filter(ok).str.extract(_LAST_PROC_RE, 1)
    proc = pl.Series("proc", [None] * segs.height, dtype=pl.Utf8).scatter(idx, names)
    return segs.with_columns(text=text, proc=proc), idx


@overload
def has_dedup(text: pl.Expr) -> pl.Expr: ...
@overload
def has_dedup(text: pl.Series) -> pl.Series: ...
def has_dedup(text: pl.Expr | pl.Series) -> pl.Expr | pl.Series:
    """Whether a line ends with Ray's dedup suffix (the first one also carries Ray's hint): a test of the
    line's end, cheaper than a search through it."""
    return text.str.ends_with("across cluster]") | text.str.ends_with("for more options.)")


def strip_dedup(segs: pl.DataFrame) -> tuple[pl.DataFrame, int, int | None]:
    """Remove Ray's ` [repeated Nx across cluster]` suffix; returns the segments, how many lines Ray hid
    (N - 1 per collapsed line: the printed line is one of the N) and the first collapsed line."""
    has = has_dedup(segs["text"].str.strip_chars_end())
    if not has.any():
        return segs, 0, None
    idx = has.arg_true()
    sub = segs["text"].gather(idx)
    n = sub.str.extract(DEDUP_RE, 1).cast(pl.Int64, strict=False)
    hidden = int((n - 1).clip(lower_bound=0).sum() or 0)
    first = segs["line"].gather(idx).filter(n.is_not_null())
    text = segs["text"].scatter(idx, sub.str.replace(DEDUP_RE, ""))
    return segs.with_columns(text=text), hidden, (int(first[0]) if len(first) else None)


def proc_rank(text: pl.Expr, proc: pl.Expr) -> pl.Expr:
    """The data-parallel rank a process name carries (`EngineCore_DP1`, 0.8-0.10 `EngineCore_1`), else
    null. TP/PP/EP workers (`Worker_TP0`, `VllmWorker rank=0`) belong to one engine: no rank."""
    name = pl.coalesce(proc, text.str.extract(PROC_NAME_RE, 1))
    return name.str.extract(r"(?:DP|^EngineCore_)(\d+)", 1).cast(pl.Int64, strict=False)


def years_near(month: pl.Expr, ref: pl.Expr, tz: str) -> pl.Expr:
    """The year that puts a header of month `month` (local time in `tz`) closest to `ref` (a UTC record
    time): the record's own year in `tz`, the one before when the header's month is six or more later
    (a December header, a January record), the one after in the opposite case. Integer arithmetic only:
    a header and its record are hours apart, never months."""
    local = ref.dt.convert_time_zone(tz)
    rm = local.dt.month().cast(pl.Int32, strict=False)
    shift = pl.when(month - rm >= 6).then(-1).when(rm - month >= 6).then(1).otherwise(0)
    return (local.dt.year().cast(pl.Int32, strict=False) + shift).cast(pl.Int32, strict=False)
