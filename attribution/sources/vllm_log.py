"""The vLLM server console log (Part A of ../shared/formats/engine-logs.md, vLLM 0.2 to 0.33).

Periodic stats and iteration lines -> `engine_steps`; `Received request` -> `requests`; Added / Finished /
Aborted -> `request_events`; uvicorn access lines -> `access_log`; startup lines -> `engine_config`
(see `vllm_config`). Parsing is vectorised over the records of a chunk; `ctx.state` carries the year, the
last timestamp, the current engine start and its context across chunks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from attribution.keys import request_keys
from attribution.privacy import redact_expr
from attribution.sources import _vllm_layouts as layouts
from attribution.sources import _vllm_variants as variants
from attribution.sources import vllm_config
from attribution.sources._vllm_records import GLUE_RE, HEADER_RE, LEVEL, continuation_lines, records
from attribution.sources.base import ParseContext, ParseResult, Source

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

T = TypeVar("T")
__all__ = ["GLUE_RE", "HEADER_RE", "SOURCES", "VllmLog"]

ACCESS_RE = (
    rf'^(?:{layouts.PROC})*{LEVEL}:\s+(?P<client>\S+):(?P<port>\d+)(?: \d+)? - "(?P<method>[A-Z]+) '
    r'(?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})\b'
)
_PLAIN_ACCESS_RE = rf"^(?:\([^()]*? pid=\d+\) )?{LEVEL}:"
ITER_RE = (
    r"^(?:Engine (?P<eng>\d+): )?Iteration\(\d+\): (?P<cr>\d+) context requests, (?P<ct>\d+) context tokens, "
    r"(?P<gr>\d+) generation requests, (?P<gt>\d+) generation tokens, iteration elapsed time: (?P<ms>[\d.]+) ms"
    r"(?: \(dummy\))?(?:, [\w +]+? KV cache usage: (?P<kv>[\d.]+)%)?"
)
EVENT_RE = r"^(?P<event>Added|Finished|Aborted) request(?:\(s\))? (?P<ids>.+?)\.?$"
_RECEIVED, _ADDED, _FINISHED, _ABORTED = (
    "Received request ",
    "Added request ",
    "Finished request ",
    "Aborted request",
)
_RECEIVED_RE = r"^Received request (\S+): (?:prompt|params|sampling_params)"
# `\S+` up to `: ` is the token minus its last `:`; for a token with no other `:` this is the same group.
_RECEIVED_FAST_RE = r"^Received request ([^\s:]+): (?:prompt|params|sampling_params)"
_KINDS = (_RECEIVED, _ADDED, _FINISHED, _ABORTED, variants.V0_PREFIX, variants.SPEC_V1, variants.SPEC_V0)
_KIND_RE = "^(?:" + "|".join(re.escape(k) for k in _KINDS) + ")"

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


def _version_at_least(version: pl.Expr, major: int, minor: int) -> pl.Expr:
    parts = version.str.extract_groups(r"^(\d+)\.(\d+)")
    ma, mi = parts.struct.field("1").cast(pl.Int64, strict=False), parts.struct.field("2").cast(pl.Int64, strict=False)
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
    # at a line start, or behind a process, Ray, parent-process (`... - INFO - `) or bracketed prefix
    _HEAD_RE = re.compile(rf"(?m)(?:^|\) | - |\] ){LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[\w./-]+\.py:\d+\] ")

    def sniff(self, head: str, path: str) -> float:
        if any(m in head for m in self._STRONG):
            return 0.95
        if any(m in head for m in self._SGLANG):
            return 0.0
        return 0.8 if self._HEAD_RE.search(head) else 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        recs, (hidden, first) = records(lines, ctx)
        if hidden and not ctx.state.get("ray_dedup_reported"):
            # Once per file, not per line: the count is what this chunk shows (later chunks may hide more).
            ctx.state["ray_dedup_reported"] = True
            res.add_errors(pl.DataFrame({
                "line": [first],
                "reason": [f"warning: Ray deduplicated repeated lines ([repeated Nx across cluster]): at least "
                           f"{hidden} lines are lost; set RAY_DEDUP_LOGS=0 or read the Ray worker log files"],
                "sample": [None],
            }, schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}))
        res.add_errors(_errors(recs.filter("bad_ts"), "unreadable timestamp (not a date, or a local time that "
                                                      "does not exist in --tz)"))
        # Once the records exist, the access lines and then the request events and stats lines are parsed on
        # a second thread (Polars releases the GIL) while this one does the rest; results are added in a
        # fixed order. With a one-thread Polars pool (POLARS_MAX_THREADS=1), everything runs here.
        with _helper() if pl.thread_pool_size() > 1 else _Inline() as pool:
            access = pool.submit(_access, recs)
            heads = recs.filter(pl.col("msg").is_not_null())
            # Which known prefix a message starts with (one anchored pass, not a `starts_with` per test).
            heads = heads.with_columns(
                _kind=pl.col("msg").str.extract(_KIND_RE, 0),
                _stats=pl.col("msg").str.contains("Avg prompt throughput", literal=True),
            )
            kind = pl.col("_kind")
            heads = heads.with_columns(
                traffic=(kind == _RECEIVED).fill_null(False)
                | (kind == _ADDED).fill_null(False)
                | pl.col("_stats")
            )
            facts, cfg_errors = vllm_config.extract_facts(heads)
            res.add_errors(cfg_errors)
            heads = vllm_config.assign_starts(heads, facts, ctx.state)
            steps = [pool.submit(f, heads) for f in (_stats, variants.v0_prefix, _iterations, _spec_decode)]
            events = pool.submit(_events, heads)
            received = _received(heads)
            res.add("engine_config", vllm_config.config_rows(facts, heads))
            res.add_consumed(facts["line"] if facts.height else None)
            (stats, stats_err), (prefix, prefix_err), iters, (spec, spec_err) = (s.result() for s in steps)
            stats, leftover, merged = variants.merge_v0_prefix(stats, prefix)
            res.add_consumed(merged)
            spec = variants.attach_engine(spec, stats, ctx.state)
            for rows, errors in ((stats.drop("idx") if stats.height else stats, stats_err),
                                 (leftover, prefix_err), iters, (spec, spec_err)):
                res.add("engine_steps", rows)
                res.add_errors(errors)
            req, req_errors = received
            res.add("requests", req)
            res.add_errors(req_errors)
            res.add("request_events", events.result())
            res.add("access_log", access.result())
        row_lines = [df["line"].cast(pl.Int64, strict=False) for df in res.tables.values()]
        if row_lines or res.consumed is not None:
            made = pl.concat([*row_lines, *([res.consumed] if res.consumed is not None else [])])
            res.add_consumed(continuation_lines(lines, made))
        if res.consumed is not None:
            # disjoint from the rows' lines and each line once: the census counts both as parsed
            in_rows = pl.concat(row_lines).implode() if row_lines else pl.Series([[]], dtype=pl.List(pl.Int64))
            res.consumed = res.consumed.unique().sort().filter(~res.consumed.unique().sort().is_in(in_rows))
        return res


_HELPER: tuple[int, ThreadPoolExecutor] | None = None


@contextmanager
def _helper() -> Iterator[ThreadPoolExecutor]:
    """The second thread, kept for the process (per pid: a forked child gets its own): Polars keeps compiled
    regexes per thread, so a thread started per chunk compiled every pattern of its tasks again on every chunk."""
    global _HELPER
    if _HELPER is None or _HELPER[0] != os.getpid():
        _HELPER = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-log"))
    yield _HELPER[1]


class _Inline:
    """An executor that runs each task when it is submitted."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        future.set_result(fn(*args))
        return future


def _errors(df: pl.DataFrame, reason: pl.Expr | str, sample: pl.Expr | None = None) -> pl.DataFrame:
    reason = pl.lit(reason) if isinstance(reason, str) else reason
    return df.select(
        "line", reason=reason, sample=redact_expr(sample if sample is not None else pl.col("text"))
    )


def _stats(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = heads.filter(pl.col("_stats"))
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    body = pl.col("msg").str.strip_chars_end().str.strip_suffix(".")  # V0 ends with `.`
    prefix = r"^(?:Engine (\d+): |(\d+) Engines Aggregated: )"
    rows = rows.with_columns(
        engine_index=body.str.extract(prefix, 1).cast(pl.Int64, strict=False),
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
    # Not strict: a digit `\d` admits but Float64 does not read (`١٢`) is an unparseable value of this line.
    num = pl.when(unit_ok).then(v.struct.field("num").cast(pl.Float64, strict=False))
    kv = kv.with_columns(num=pl.when(pl.col("kind") == "pct").then(num / 100).otherwise(num))
    bad = (
        kv.filter(pl.col("num").is_null())
        .group_by("idx")
        .agg(_bad=pl.format("unparseable stats value for {}", pl.col("key").first()))
    )
    wide = kv.group_by("idx").agg(
        # Counts stay floats here: the ingest checks each against its domain (whole, within range) and casts.
        pl.col("num").filter(pl.col("col") == c).first().alias(c) for c in _STATS_COLS
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
        "idx", "ts", "line", *_STATS_COLS, engine=pl.lit("vllm"), kind=pl.lit("stats"),
        engine_index=pl.coalesce("engine_index", _proc_rank()),
    )
    return ok, errors


def _proc_rank() -> pl.Expr:
    return layouts.proc_rank(pl.col("text"), pl.col("proc"))


def _spec_decode(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    return variants.spec_decode(heads, _proc_rank())


def _iterations(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    msg = pl.col("msg")
    rows = heads.filter(msg.str.contains("Iteration(", literal=True))
    rows = rows.filter(msg.str.contains("context requests", literal=True))
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
        engine_index=pl.coalesce(g("eng").cast(pl.Int64, strict=False), _proc_rank()),
        running=g("cr").cast(pl.Int64, strict=False) + g("gr").cast(pl.Int64, strict=False),
        batch_tokens=g("ct").cast(pl.Int64, strict=False) + g("gt").cast(pl.Int64, strict=False),
        elapsed_s=g("ms").cast(pl.Float64, strict=False) / 1000,
        kv_usage=g("kv").cast(pl.Float64, strict=False) / 100,
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
    rows = heads.filter(pl.col("_kind") == _RECEIVED)
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    # The part after the last marker, null without one (split once: a list of one means no marker). Most
    # versions log no token ids: skip that split when no line has them.
    has_ids = rows["msg"].str.contains("prompt_token_ids: ", literal=True)
    rows = rows.with_columns(
        request_id=_request_ids(rows["msg"]),
        _params=msg.str.split("params: SamplingParams("),
        _ids=msg.str.split("prompt_token_ids: ") if has_ids.any() else pl.lit([""], pl.List(pl.Utf8)),
    ).with_columns(
        pl.when(pl.col(c).list.len() > 1).then(pl.col(c).list.last()).alias(c) for c in ("_params", "_ids")
    )
    max_tokens = pl.col("_params").str.extract(r"(?:^|, )max_tokens=(\d+|None)[,)]", 1)
    n_ids = pl.col("_ids").str.split("]").list.first().str.count_matches(",", literal=True) + 1
    complete = pl.col("_ids").str.contains(r"^\[[\d,\s]*\d\]")
    limit = pl.col("ctx_max_log_len")
    rows = rows.with_columns(
        max_tokens=max_tokens.cast(pl.Int64, strict=False),
        prompt_tokens=pl.when(complete & (limit.is_null() | (n_ids < limit))).then(n_ids).cast(pl.Int64, strict=False),
    )
    bad = pl.col("request_id").is_null()
    errors = _errors(
        rows.filter(bad),
        "unparseable Received request line",
        pl.col("msg").str.replace(r"(?s)^(Received request \S{0,60}).*$", "$1 <omitted>"),
    )
    ok = rows.filter(~bad)
    ok = ok.select(
        "request_id",
        "line",
        request_key=request_keys(ok["request_id"]),
        engine=pl.lit("vllm"),
        engine_version="ctx_version",
        model="ctx_model",
        arrival="ts",
        prompt_tokens="prompt_tokens",
        max_tokens="max_tokens",
        status=pl.lit("received"),
    )
    return ok, errors


def _request_ids(msgs: pl.Series) -> pl.Series:
    """The id of each `Received request` message (null when the line does not parse). An id without `:`
    (nearly all) is found by a regex that never backtracks over a `:` (2x faster); where it matches it gives
    the same group as `_RECEIVED_RE`, which decides the other messages."""
    ids = msgs.str.extract(_RECEIVED_FAST_RE, 1)
    missing = ids.is_null()
    if missing.any():
        ids = ids.scatter(missing.arg_true(), msgs.filter(missing).str.extract(_RECEIVED_RE, 1))
    return ids


def _events(heads: pl.DataFrame) -> pl.DataFrame:
    msg = pl.col("msg")
    kind = pl.col("_kind")
    rows = heads.filter(kind.is_in([_ADDED, _FINISHED, _ABORTED]))
    if rows.height == 0:
        return pl.DataFrame()
    # EVENT_RE without a capture engine: the prefix by literal tests, then the rest minus one trailing `.`
    # (`.+?` keeps at least one character; `.` matches no newline, so a rest with one does not match).
    event = pl.when(kind == _ADDED).then(pl.lit("added")).when(kind == _FINISHED).then(pl.lit("finished"))
    rows = rows.with_columns(_rest=msg.str.strip_prefix(kind), event=event.otherwise(pl.lit("aborted")))
    rest = pl.col("_rest")
    if (rows["_kind"] == _ABORTED).any():  # `Aborted request(s) ` or `Aborted request `
        after: Then | ChainedThen = pl.when(rest.str.starts_with("(s) ")).then(rest.str.slice(4))
        after = after.when(rest.str.starts_with(" ")).then(rest.str.slice(1))
        rows = rows.with_columns(_rest=pl.when(kind == _ABORTED).then(after).otherwise(rest))
    ids = pl.when((rest.str.len_bytes() > 0) & ~rest.str.contains("\n", literal=True)).then(
        pl.when(rest.str.len_bytes() > 1).then(rest.str.strip_suffix(".")).otherwise(rest)
    )
    rows = rows.with_columns(_ids=ids).filter(pl.col("_ids").is_not_null())
    # One id per line (nearly always): then the split into a list and back is skipped.
    if rows["_ids"].str.contains(", ", literal=True).any():
        rows = rows.with_columns(pl.col("_ids").str.split(", ")).explode("_ids")
    rows = rows.select(
        "line", "ts", "ctx_version", "event", request_id=pl.col("_ids").str.strip_chars()
    ).filter(pl.col("request_id").str.len_bytes() > 0)
    # The `-xxxxxxxx` engine suffix exists from 0.14 on; with no version seen yet, strip it (vLLM's own
    # 16/32-hex ids never end in `-` + 8 hex, so only a client id shaped like that could be cut). Decided
    # once per distinct version, not per row.
    versions = rows["ctx_version"].drop_nulls().unique()
    at_least = pl.select(_version_at_least(pl.lit(versions), 0, 14).fill_null(True)).to_series()
    version = pl.col("ctx_version")
    engine_side = version.is_null() | version.replace_strict(versions, at_least, default=None).fill_null(True)
    rows = rows.with_columns(_engine_side=engine_side)
    return rows.select(
        "request_id",
        "line",
        "ts",
        "event",
        request_key=request_keys(rows["request_id"], rows["_engine_side"]),
    )


def _access(recs: pl.DataFrame) -> pl.DataFrame:
    """uvicorn access lines carry no timestamp: they take the last one seen before them."""
    text = pl.col("text")
    rows = recs.filter(pl.col("msg").is_null())
    rows = rows.filter(text.str.contains(" HTTP/", literal=True))
    if rows.height == 0:
        return pl.DataFrame()
    # Rows that match ACCESS_RE (a match test: no capture engine), then its groups by literal splits, which
    # the match makes exact: the `(NAME pid=N) ` prefix ends at the first `) ` (NAME has no parentheses),
    # LEVEL at the next `:`; the `\S+:\d+` token ends at the first ` - "`, its port after the last `:`;
    # method, path, `HTTP/x"` and the status are then separated by single spaces.
    rows = rows.filter(text.str.contains(ACCESS_RE))
    # Ray-nested or parenthesised process names (rare): drop every prefix first.
    nested = rows["text"].str.count_matches("(", literal=True) > 1
    if nested.any():
        nested = nested & rows["text"].str.contains(_PLAIN_ACCESS_RE).not_()
    if nested.any():
        stripped = rows["text"].filter(nested).str.replace(rf"^(?:{layouts.PROC})+", "")
        rows = rows.with_columns(text=rows["text"].scatter(nested.arg_true(), stripped))
    rest = (
        pl.when(text.str.starts_with("("))
        .then(text.str.splitn(") ", 2).struct.field("field_1"))
        .otherwise(text)
    )
    rest = rest.str.splitn(":", 2).struct.field("field_1").str.strip_chars_start().str.splitn(' - "', 2)
    rows = rows.select("line", "ts_carried", _parts=rest).unnest("_parts")
    rows = rows.select("line", "ts_carried", "field_0", _request=pl.col("field_1").str.splitn(" ", 4))
    request = pl.col("_request").struct.field
    # The query string is dropped: it may carry tokens.
    return rows.select(
        "line",
        ts="ts_carried",
        client=pl.col("field_0").str.replace(r":\d+(?: \d+)?$", ""),
        method=request("field_0"),
        path=request("field_1").str.replace(r"\?.*$", ""),
        http_status=request("field_3").str.head(3).cast(pl.Int64, strict=False),
    )


SOURCES = [VllmLog()]
