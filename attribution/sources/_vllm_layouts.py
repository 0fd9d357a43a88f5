"""Where a vLLM line starts when something outside vLLM wrote in front of it (helper of `vllm_log`;
../shared/formats/log-wrappers.md §4, §12): framework headers (KServe, Dynamo, a parent process that re-logs
its child, bracketed UTC launcher prefixes), Ray actor prefixes (one or nested, actor reprs with
parentheses, `ip=`), and Ray's dedup suffix. Each function runs only on the rows a cheap test selects, so a
plain vLLM log pays for one anchored test per chunk.
"""

from __future__ import annotations

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

# Framework headers anchored at the line start (after ANSI codes). Named groups: the header's time (local:
# `p`, `k`, `ka`; UTC: `b`, `d`) and what follows it. Dynamo (`d`) and KServe trace (`k`) lines carry the
# message itself (no vLLM header follows); the others carry a whole vLLM line (or a uvicorn access line).
FW_CAND_RE = r"^(?:\x1b\[[0-9;]*m)*\[?\d{4}-\d\d-\d\d[ T]\d\d:"
_ISO_Z = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"
FW_RE = (
    r"(?s)^(?:"
    rf"\[(?P<b>{_ISO_Z})\] (?P<b_rest>.*)"
    rf"|(?P<d>{_ISO_Z})\s+(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR) +[\w.:]+: (?P<d_msg>.*)"
    r"|(?P<p>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.]+ - [A-Z]+ - (?P<p_rest>.*)"
    r"|(?P<k>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \d+ kserve\.trace (?P<k_msg>.*)"
    r"|(?P<ka>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) uvicorn\.access (?P<ka_rest>.*)"
    r")$"
)
ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"


def peel_frameworks(lines: pl.DataFrame, tz: str) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Strip framework headers. Returns the lines (text replaced where a header was found) and, when any
    was, a frame `line`, `fw_ts` (UTC), `fw_msg` (the text is the message: no vLLM header follows)."""
    text = lines["text"]
    cand = text.str.contains(FW_CAND_RE)
    if not cand.any():
        return lines, None
    sub = text.filter(cand)
    if sub.str.contains("\x1b", literal=True).any():
        sub = sub.str.replace_all(ANSI_RE, "")
    g = pl.DataFrame({"line": lines["line"].filter(cand), "_g": sub.str.extract_groups(FW_RE)}).unnest("_g")
    rest = pl.coalesce("b_rest", "d_msg", "p_rest", "k_msg", "ka_rest")
    g = g.filter(rest.is_not_null())
    if g.height == 0:
        return lines, None
    local = pl.coalesce(pl.col("p").str.replace(",", ".", literal=True), "k", "ka").str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False
    )
    utc = pl.coalesce("b", "d").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False)
    fw = g.select(
        "line",
        _text=rest,
        fw_ts=pl.coalesce(timefmt.to_utc(local, tz), utc.dt.replace_time_zone("UTC")),
        fw_msg=pl.col("d_msg").is_not_null() | pl.col("k_msg").is_not_null(),
    )
    out = lines.join(fw.select("line", "_text"), on="line", how="left")
    out = out.with_columns(text=pl.coalesce("_text", "text")).drop("_text")
    return out, fw.drop("_text")


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


def has_dedup(text: pl.Expr) -> pl.Expr:
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
    n = sub.str.extract(DEDUP_RE, 1).cast(pl.Int64)
    hidden = int((n - 1).clip(lower_bound=0).sum() or 0)
    first = segs["line"].gather(idx).filter(n.is_not_null())
    text = segs["text"].scatter(idx, sub.str.replace(DEDUP_RE, ""))
    return segs.with_columns(text=text), hidden, (int(first[0]) if len(first) else None)


def proc_rank(text: pl.Expr, proc: pl.Expr) -> pl.Expr:
    """The data-parallel rank a process name carries (`EngineCore_DP1`, 0.8-0.10 `EngineCore_1`), else
    null. TP/PP/EP workers (`Worker_TP0`, `VllmWorker rank=0`) belong to one engine: no rank."""
    name = pl.coalesce(proc, text.str.extract(PROC_NAME_RE, 1))
    return name.str.extract(r"(?:DP|^EngineCore_)(\d+)", 1).cast(pl.Int64)


def years_near(date: pl.Expr, ref: pl.Expr, tz: str) -> pl.Expr:
    """The year that puts a header's `MM-DD HH:MM:SS` (local time in `tz`) closest to `ref` (a UTC record
    time): the record's own year, or the one before or after it across New Year."""
    y = ref.dt.convert_time_zone(tz).dt.year()
    best = None
    best_d = None
    for dy in (0, -1, 1):
        cand = (y + dy).cast(pl.Utf8) + "-" + date
        naive = cand.str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us", strict=False)
        d = (timefmt.to_utc(naive, tz) - ref).abs()
        if best is None:
            best, best_d = (y + dy), d
        else:
            better = d.is_not_null() & (best_d.is_null() | (d < best_d))
            best = pl.when(better).then(y + dy).otherwise(best)
            best_d = pl.when(better).then(d).otherwise(best_d)
    return pl.when(best_d.is_not_null()).then(best).cast(pl.Int32)
