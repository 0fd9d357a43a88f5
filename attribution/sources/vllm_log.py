"""The vLLM server console log (Part A of ../shared/formats/engine-logs.md, vLLM 0.2 to 0.33).

Periodic stats and iteration lines -> `engine_steps`; `Received request` -> `requests`; Added / Finished /
Aborted -> `request_events`; uvicorn access lines -> `access_log`; startup lines -> `engine_config`
(see `vllm_config`). Parsing is vectorised over the records of a chunk; `ctx.state` carries the year, the
last timestamp, the current engine start and its context across chunks.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources import timefmt, vllm_config
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.common import segments

_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# `(NAME pid=N) ` (0.8+; part of the format in 0.33), level, `MM-DD HH:MM:SS`, `[file:line]` or pre-0.8
# `file:line]`. No year, no zone.
HEADER_RE = (
    rf"^(?P<hdr>(?:\([^()]*? pid=\d+\) )?{_LEVEL} (?P<mm>\d\d)-(?P<dd>\d\d) (?P<hms>\d\d:\d\d:\d\d) "
    r"\[?[^\]:\s]+:\d+\] ?)"
)
_HEADER_ONLY_RE = re.sub(r"\(\?P<\w+>", "(?:", HEADER_RE)
_LEVEL_DATE_RE = rf"{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d "
# A header anywhere in a segment: pasted logs glue records (`...hit rate: 0.0%INFO 07-28 06:41:19 [...`).
GLUE_RE = rf"(?:\([^()]*? pid=\d+\) )?{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[^\]:\s]+:\d+\]"
_SEP = "\x1e"
ACCESS_RE = (
    rf'^(?:\([^()]*? pid=\d+\) )?{_LEVEL}:\s+(?P<client>\S+):(?P<port>\d+) - "(?P<method>[A-Z]+) '
    r'(?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})\b'
)
ITER_RE = (
    r"^(?:Engine (?P<eng>\d+): )?Iteration\(\d+\): (?P<cr>\d+) context requests, (?P<ct>\d+) context tokens, "
    r"(?P<gr>\d+) generation requests, (?P<gt>\d+) generation tokens, iteration elapsed time: (?P<ms>[\d.]+) ms"
    r"(?: \(dummy\))?(?:, [\w +]+? KV cache usage: (?P<kv>[\d.]+)%)?"
)
V0_PREFIX_RE = r"^Prefix cache hit rate: GPU: (?P<gpu>[\d.]+)%, CPU: (?P<cpu>[\d.]+)%"
EVENT_RE = r"^(?P<event>Added|Finished|Aborted) request(?:\(s\))? (?P<ids>.+?)\.?$"

# Stats line key -> (column, value kind). Unknown keys (MFU, KV fetch, External/MM hit rates, a field a
# future version adds) are skipped; a known key whose value does not parse makes the line an error.
_STATS_KEYS: dict[str, tuple[str, str]] = {
    "Avg prompt throughput": ("prompt_tput", "tput"),
    "Avg generation throughput": ("gen_tput", "tput"),
    "Running": ("running", "reqs"),
    "Waiting": ("waiting", "reqs"),
    "Pending": ("waiting", "reqs"),  # V0
    "Swapped": ("swapped", "reqs"),
    "Preemptions": ("preemptions", "int"),
    "Deferred": ("", "reqs"),
    "Corrupted": ("", "reqs"),
    "Prefix cache hit rate": ("prefix_hit_rate", "pct"),
}
_VALUE_RE = r"^(?P<num>\d+(?:\.\d+)?)(?P<unit> tokens/s| reqs|%)?$"
_UNITS = {"tput": " tokens/s", "reqs": " reqs", "int": "", "pct": "%"}
_STATS_COLS = {
    "prompt_tput": pl.Float64,
    "gen_tput": pl.Float64,
    "running": pl.Int64,
    "waiting": pl.Int64,
    "swapped": pl.Int64,
    "preemptions": pl.Int64,
    "kv_usage": pl.Float64,
    "cpu_kv_usage": pl.Float64,
    "prefix_hit_rate": pl.Float64,
}


def request_key(expr: pl.Expr, engine_side: pl.Expr | bool = False) -> pl.Expr:
    """The join key of a vLLM request id (engine lines, gateway response ids, traces).

    Rule, in this order:
    1. `engine_side`: V1 0.14+ engine lines (Added / Aborted) name `f"{external_id}-{uuid[:8]}"`: drop a
       trailing `-xxxxxxxx` (8 lowercase hex). Only engine-side lines get this, because a client-chosen
       `X-Request-Id` may itself end that way.
    2. Completions: `cmpl-<id>-<n>` (one engine request per prompt of the batch) -> `<id>`; all prompts of
       one completion call share the gateway's response id `cmpl-<id>`.
    3. Drop the `chatcmpl-` / `cmpl-` prefix.
    `chatcmpl-b73b4b2d...-a8a65d16` (engine, 0.14+) -> `b73b4b2d...`; `cmpl-50c3...-0` -> `50c3...`.
    """
    engine_side = pl.lit(engine_side) if isinstance(engine_side, bool) else engine_side
    key = pl.when(engine_side).then(expr.str.replace(r"^(.+)-[0-9a-f]{8}$", "$1")).otherwise(expr)
    return key.str.replace(r"^cmpl-(.+)-\d+$", "$1").str.replace(r"^(?:chatcmpl|cmpl)-", "")


def _version_at_least(version: pl.Expr, major: int, minor: int) -> pl.Expr:
    parts = version.str.extract_groups(r"^(\d+)\.(\d+)")
    ma, mi = parts.struct.field("1").cast(pl.Int64), parts.struct.field("2").cast(pl.Int64)
    return (ma > major) | ((ma == major) & (mi >= minor))


class VllmLog(Source):
    name = "vllm_log"
    kind = "engine"
    description = "vLLM server console log (stats, request, startup and uvicorn lines), 0.2 - 0.33"

    _STRONG = (
        "[loggers.py:",
        "vLLM API server version",
        "non-default args:",
        "(APIServer pid=",
        "Avg prompt throughput",
        "LLM engine (v",
        "] Received request ",
    )
    _SGLANG = ("Prefill batch", "Decode batch", "server_args=ServerArgs")
    _HEAD_RE = re.compile(rf"(?m)(?:^|\) ){_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[\w./-]+\.py:\d+\] ")

    def sniff(self, head: str, path: str) -> float:
        if any(m in head for m in self._STRONG):
            return 0.95
        if any(m in head for m in self._SGLANG):
            return 0.0
        return 0.8 if self._HEAD_RE.search(head) else 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        recs = _records(lines, ctx)
        heads = recs.filter(pl.col("msg").is_not_null())
        heads = heads.with_columns(
            traffic=pl.col("msg").str.starts_with("Received request ")
            | pl.col("msg").str.starts_with("Added request ")
            | pl.col("msg").str.contains("Avg prompt throughput", literal=True)
        )
        facts, cfg_errors = vllm_config.extract_facts(heads)
        res.add_errors(cfg_errors)
        heads = vllm_config.assign_starts(heads, facts, ctx.state)
        res.add("engine_config", vllm_config.config_rows(facts, heads))
        for rows, errors in (_stats(heads), _v0_prefix(heads), _iterations(heads)):
            res.add("engine_steps", rows)
            res.add_errors(errors)
        req, req_errors = _received(heads)
        res.add("requests", req)
        res.add_errors(req_errors)
        res.add("request_events", _events(heads))
        res.add("access_log", _access(recs))
        return res


def _records(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Physical lines -> records (idx, line, ts, msg; msg null for unheaded text, ts carried forward)."""
    segs = segments(lines.select("line", "text"))
    n_heads = pl.col("text").str.count_matches(_LEVEL_DATE_RE)
    glued = (n_heads >= 2) | ((n_heads == 1) & ~pl.col("text").str.contains(_HEADER_ONLY_RE))
    is_glued = segs.select(glued).to_series()
    if is_glued.any():  # rare: split only those segments, and only then re-sort
        pieces = (
            segs.filter(is_glued)
            .with_columns(pl.col("text").str.replace_all(GLUE_RE, _SEP + "$0").str.split(_SEP))
            .explode("text")
            .filter(pl.col("text").str.len_bytes() > 0)
        )
        recs = pl.concat([segs.filter(~is_glued), pieces]).sort("line", "seg", maintain_order=True)
    else:
        recs = segs
    recs = recs.with_row_index("idx").with_columns(_g=pl.col("text").str.extract_groups(HEADER_RE))
    g = pl.col("_g").struct.field
    recs = recs.with_columns(
        msg=pl.when(g("hdr").is_not_null()).then(pl.col("text").str.strip_prefix(g("hdr"))),
        _mm=g("mm").cast(pl.Int32),
        _dd=g("dd"),
        _hms=g("hms"),
    )
    years = timefmt.assign_years(recs["_mm"], ctx)
    naive = pl.concat_str(
        pl.lit(years).cast(pl.Utf8),
        pl.lit("-"),
        pl.col("_mm").cast(pl.Utf8).str.zfill(2),
        pl.lit("-"),
        pl.col("_dd"),
        pl.lit(" "),
        pl.col("_hms"),
    ).str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us", strict=False)
    recs = recs.with_columns(ts=timefmt.to_utc(naive, ctx.tz))
    last = ctx.state.get("last_ts")
    seed = datetime.fromisoformat(last) if last else None
    recs = recs.with_columns(
        ts_carried=pl.col("ts").forward_fill().fill_null(pl.lit(seed, dtype=pl.Datetime("us", "UTC")))
    )
    if recs.height and recs["ts_carried"][-1] is not None:
        ctx.state["last_ts"] = recs["ts_carried"][-1].isoformat()
    return recs.select("idx", "line", "text", "msg", "ts", "ts_carried")


def _errors(df: pl.DataFrame, reason: pl.Expr | str, sample: pl.Expr | None = None) -> pl.DataFrame:
    reason = pl.lit(reason) if isinstance(reason, str) else reason
    return df.select(
        "line", reason=reason, sample=redact_expr(sample if sample is not None else pl.col("text"))
    )


def _stats(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = heads.filter(pl.col("msg").str.contains("Avg prompt throughput", literal=True))
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    body = pl.col("msg").str.strip_chars_end().str.strip_suffix(".")  # V0 ends with `.`
    prefix = r"^(?:Engine (\d+): |(\d+) Engines Aggregated: )"
    rows = rows.with_columns(
        engine_index=body.str.extract(prefix, 1).cast(pl.Int64),
        _v0=pl.col("msg").str.contains("Pending: ", literal=True),
        _parts=body.str.replace(prefix, "").str.split(", "),
    )
    kv = (
        rows.select("idx", "_v0", "_parts")
        .explode("_parts")
        .with_columns(pl.col("_parts").str.splitn(": ", 2).alias("_kv"))
        .select(
            "idx", "_v0", key=pl.col("_kv").struct.field("field_0"), val=pl.col("_kv").struct.field("field_1")
        )
        .filter(pl.col("val").is_not_null())
    )
    is_kv_usage = pl.col("key").str.ends_with(" KV cache usage")
    known = pl.col("key").replace_strict({k: c for k, (c, _) in _STATS_KEYS.items()}, default=None)
    kind = pl.col("key").replace_strict({k: v for k, (_, v) in _STATS_KEYS.items()}, default=None)
    kv = kv.with_columns(
        col=pl.when(is_kv_usage & pl.col("_v0") & (pl.col("key") == "CPU KV cache usage"))
        .then(pl.lit("cpu_kv_usage"))
        .when(is_kv_usage)
        .then(pl.lit("kv_usage"))
        .otherwise(known),
        kind=pl.when(is_kv_usage).then(pl.lit("pct")).otherwise(kind),
    ).filter(pl.col("kind").is_not_null())
    v = pl.col("val").str.extract_groups(_VALUE_RE)
    unit_ok = v.struct.field("unit").fill_null("").eq(pl.col("kind").replace_strict(_UNITS))
    num = pl.when(unit_ok).then(v.struct.field("num").cast(pl.Float64))
    kv = kv.with_columns(num=pl.when(pl.col("kind") == "pct").then(num / 100).otherwise(num))
    bad = (
        kv.filter(pl.col("num").is_null())
        .group_by("idx")
        .agg(_bad=pl.format("unparseable stats value for {}", pl.col("key").first()))
    )
    wide = kv.group_by("idx").agg(
        pl.col("num").filter(pl.col("col") == c).first().cast(t).alias(c) for c, t in _STATS_COLS.items()
    )
    rows = (
        rows.join(wide, on="idx", how="left")
        .join(bad, on="idx", how="left")
        .with_columns(
            _bad=pl.coalesce(
                "_bad",
                pl.when(
                    pl.col("running").is_null()
                    | (pl.col("prompt_tput").is_null() & pl.col("gen_tput").is_null())
                ).then(pl.lit("stats line without Running or throughput")),
            )
        )
    )
    errors = _errors(rows.filter(pl.col("_bad").is_not_null()), pl.col("_bad"))
    ok = rows.filter(pl.col("_bad").is_null()).select(
        "ts", "line", "engine_index", *_STATS_COLS, engine=pl.lit("vllm"), kind=pl.lit("stats")
    )
    return ok, errors


def _v0_prefix(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """V0 prints the prefix-cache hit rate on its own line after the stats line. It becomes its own `stats`
    row (only prefix_hit_rate), never merged into the stats row: merging would depend on whether both
    lines fall into the same chunk."""
    rows = heads.filter(pl.col("msg").str.starts_with("Prefix cache hit rate: GPU:"))
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    rows = rows.with_columns(_g=pl.col("msg").str.extract_groups(V0_PREFIX_RE))
    ok = rows.filter(pl.col("_g").struct.field("gpu").is_not_null())
    errors = _errors(
        rows.filter(pl.col("_g").struct.field("gpu").is_null()), "unparseable V0 prefix cache line"
    )
    ok = ok.select(
        "ts",
        "line",
        engine=pl.lit("vllm"),
        kind=pl.lit("stats"),
        prefix_hit_rate=pl.col("_g").struct.field("gpu").cast(pl.Float64) / 100,
    )
    return ok, errors


def _iterations(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    msg = pl.col("msg")
    rows = heads.filter(
        msg.str.contains("Iteration(", literal=True) & msg.str.contains("context requests", literal=True)
    )
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    rows = rows.with_columns(_g=msg.str.extract_groups(ITER_RE))
    g = pl.col("_g").struct.field
    errors = _errors(rows.filter(g("ms").is_null()), "unparseable iteration line")
    ok = rows.filter(g("ms").is_not_null()).select(
        "ts",
        "line",
        engine=pl.lit("vllm"),
        kind=pl.lit("iteration"),
        engine_index=g("eng").cast(pl.Int64),
        running=g("cr").cast(pl.Int64) + g("gr").cast(pl.Int64),
        batch_tokens=g("ct").cast(pl.Int64) + g("gt").cast(pl.Int64),
        elapsed_s=g("ms").cast(pl.Float64) / 1000,
        kv_usage=g("kv").cast(pl.Float64) / 100,
    )
    return ok, errors


def _received(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`Received request ID: [prompt: ..., ]params: SamplingParams(...)[, prompt_token_ids: [...]] ...`.

    The prompt is never kept. What follows the prompt is searched from the *last* `params: ` /
    `prompt_token_ids: ` so that text inside the prompt cannot fool the parser. `prompt_tokens` counts the
    ids (commas + 1); it is null when the list is `None`, empty, cut off, or exactly `--max-log-len` long
    (vLLM logs `ids[:max_log_len]`, so a list of that length may be truncated).
    """
    msg = pl.col("msg")
    rows = heads.filter(msg.str.starts_with("Received request "))
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    rows = rows.with_columns(
        request_id=msg.str.extract(r"^Received request (\S+): (?:prompt|params|sampling_params)", 1),
        _params=pl.when(msg.str.contains("params: SamplingParams(", literal=True)).then(
            msg.str.split("params: SamplingParams(").list.last()
        ),
        _ids=pl.when(msg.str.contains("prompt_token_ids: ", literal=True)).then(
            msg.str.split("prompt_token_ids: ").list.last()
        ),
    )
    max_tokens = pl.col("_params").str.extract(r"(?:^|, )max_tokens=(\d+|None)[,)]", 1)
    n_ids = pl.col("_ids").str.split("]").list.first().str.count_matches(",", literal=True) + 1
    complete = pl.col("_ids").str.contains(r"^\[[\d,\s]*\d\]")
    limit = pl.col("ctx_max_log_len")
    rows = rows.with_columns(
        max_tokens=max_tokens.cast(pl.Int64, strict=False),
        prompt_tokens=pl.when(complete & (limit.is_null() | (n_ids < limit))).then(n_ids).cast(pl.Int64),
    )
    bad = pl.col("request_id").is_null()
    errors = _errors(
        rows.filter(bad),
        "unparseable Received request line",
        pl.col("msg").str.replace(r"(?s)^(Received request \S{0,60}).*$", "$1 <omitted>"),
    )
    ok = rows.filter(~bad).select(
        "request_id",
        "line",
        request_key=request_key(pl.col("request_id")),
        engine=pl.lit("vllm"),
        engine_version="ctx_version",
        model="ctx_model",
        arrival="ts",
        prompt_tokens="prompt_tokens",
        max_tokens="max_tokens",
        status=pl.lit("received"),
    )
    return ok, errors


def _events(heads: pl.DataFrame) -> pl.DataFrame:
    msg = pl.col("msg")
    rows = heads.filter(
        msg.str.starts_with("Added request ")
        | msg.str.starts_with("Finished request ")
        | msg.str.starts_with("Aborted request")
    )
    if rows.height == 0:
        return pl.DataFrame()
    rows = (
        rows.with_columns(_g=msg.str.extract_groups(EVENT_RE))
        .filter(pl.col("_g").struct.field("ids").is_not_null())
        .select(
            "line",
            "ts",
            "ctx_version",
            event=pl.col("_g").struct.field("event").str.to_lowercase(),
            request_id=pl.col("_g").struct.field("ids").str.split(", "),
        )
        .explode("request_id")
        .with_columns(pl.col("request_id").str.strip_chars())
        .filter(pl.col("request_id").str.len_bytes() > 0)
    )
    # The `-xxxxxxxx` engine suffix exists from 0.14 on; with no version seen yet, strip it (vLLM's own
    # 16/32-hex ids never end in `-` + 8 hex, so only a client id shaped like that could be cut).
    version = pl.col("ctx_version")
    engine_side = version.is_null() | _version_at_least(version, 0, 14).fill_null(True)
    return rows.select(
        "request_id", "line", "ts", "event", request_key=request_key(pl.col("request_id"), engine_side)
    )


def _access(recs: pl.DataFrame) -> pl.DataFrame:
    """uvicorn access lines carry no timestamp: they take the last one seen before them."""
    rows = recs.filter(pl.col("msg").is_null() & pl.col("text").str.contains(" HTTP/", literal=True))
    if rows.height == 0:
        return pl.DataFrame()
    rows = rows.with_columns(_g=pl.col("text").str.extract_groups(ACCESS_RE)).filter(
        pl.col("_g").struct.field("status").is_not_null()
    )
    g = pl.col("_g").struct.field
    # The query string is dropped: it may carry tokens.
    return rows.select(
        "line",
        ts="ts_carried",
        client=g("client"),
        method=g("method"),
        path=g("path").str.replace(r"\?.*$", ""),
        http_status=g("status").cast(pl.Int64),
    )


SOURCES = [VllmLog()]
