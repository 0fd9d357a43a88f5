"""Public request traces as CSV: the Azure LLM/LMM inference traces (2023, 2024, 2025) and BurstGPT.

Both are one request per line with no request id, so ids are synthesised from the file name and the physical
line (`azure-<stem>-<line>`, `burstgpt-<stem>-<line>`): re-reading a file gives the same ids. Azure times
without an offset (2023) are taken as UTC; BurstGPT's are seconds after the trace start. `workload` is the
service a release file is named for (Azure code / conversation / multimodal) or BurstGPT's `Log Type`.
Also home of the trace start (`DEFAULT_TRACE_START`, `trace_start`) for every source with relative times.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl

from attribution.errors import UsageError
from attribution.privacy import redact_expr
from attribution.schema import TS
from attribution.sources.base import ParseContext, ParseResult, Source

# Relative trace times (Mooncake ms, BurstGPT s, bench offsets) are placed after this instant unless the user
# gives `--start` (ctx.options["start"]). A fixed constant, not "now", so re-ingesting gives identical rows.
DEFAULT_TRACE_START = datetime(2024, 1, 1, tzinfo=UTC)

_COMPRESSED = {".gz", ".zst", ".zstd", ".bz2", ".xz"}

# Trace files whose name says which service the traffic came from (Azure / Mooncake release names).
KNOWN_WORKLOADS = {
    "azurellminferencetrace_code": "code",
    "azurellminferencetrace_code_1week": "code",
    "azurellminferencetrace_conv": "conversation",
    "azurellminferencetrace_conv_1week": "conversation",
    "azurelmminferencetrace_multimodal": "multimodal",
    "conversation_trace": "conversation",
    "toolagent_trace": "toolagent",
    "synthetic_trace": "synthetic",
}


def trace_start(ctx: ParseContext) -> datetime:
    """The UTC instant that relative time 0 maps to: `ctx.options["start"]` (a datetime or an ISO-8601
    string; naive means local time in `ctx.tz`), else `DEFAULT_TRACE_START`."""
    raw: Any = ctx.options.get("start")
    if raw is None:
        return DEFAULT_TRACE_START
    if isinstance(raw, str):
        try:
            raw = datetime.fromisoformat(raw.strip())
        except ValueError as exc:
            raise UsageError(f"--start {raw!r} is not an ISO-8601 time such as 2024-05-10T00:00:00Z") from exc
    if not isinstance(raw, datetime):
        raise UsageError(f"--start must be a time, got {raw!r}")
    if raw.tzinfo is None:
        raw = raw.replace(tzinfo=ZoneInfo(ctx.tz))
    return raw.astimezone(UTC)


def epoch_us(dt: datetime) -> int:
    delta = dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def after_start(start: datetime, offset_s: pl.Expr) -> pl.Expr:
    """UTC timestamp `start + offset_s` seconds (rounded to the microsecond); null where the offset is."""
    return (pl.lit(epoch_us(start), pl.Int64) + (offset_s * 1e6).round().cast(pl.Int64, strict=False)).cast(TS)


def file_stem(path: str) -> str:
    """`data/AzureLLMInferenceTrace_code.csv.gz` -> `AzureLLMInferenceTrace_code`."""
    p = PurePath(path)
    while p.suffix.lower() in _COMPRESSED:
        p = p.with_suffix("")
    return p.stem if p.suffix else p.name


def known_workload(path: str) -> str | None:
    return KNOWN_WORKLOADS.get(file_stem(path).lower())


# `2023-11-16 18:17:03.9799600` (2023: naive, 7 digits), `2024-05-10 00:00:00.009930+00:00` and
# `2024-05-12 00:00:00+00:00` (2024), `2024-10-15T12:00:00.269Z` (2025).
def iso_to_utc(expr: pl.Expr) -> pl.Expr:
    """ISO-8601 text -> UTC timestamp, fractions truncated to the microsecond (as Python's `fromisoformat`);
    null when the text is not such a time. A time without an offset is taken as UTC: the Azure 2023 trace is
    naive and its 2024 successor states +00:00. The forms are normalised to one layout (`T` -> space, `Z` ->
    +00:00, missing offset -> +00:00) so that a single strptime parses them all."""
    s = expr.str.strip_chars().str.replace("T", " ", literal=True, n=1).str.strip_suffix("Z")
    has_off = s.str.slice(-6, 1).is_in(["+", "-"]) & (s.str.slice(-3, 1) == ":")
    full = pl.when(has_off).then(s).otherwise(pl.concat_str([s, pl.lit("+00:00")]))
    return full.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone(
        "UTC"
    )


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _clean_text() -> pl.Expr:
    return pl.col("text").str.strip_chars_start("\ufeff").str.strip_chars()


def _field(i: int | pl.Expr) -> pl.Expr:
    return pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars()


def _csv_rows(lines: pl.DataFrame, ctx: ParseContext, key: str, is_header: pl.Expr) -> pl.DataFrame:
    """Non-empty data lines split on `,`, with the header (remembered in ctx.state[key] as normalised
    column names) filtered out. Values never contain commas in these traces, so no quoting is handled."""
    df = lines.with_columns(_clean_text().alias("t")).filter(pl.col("t").str.len_bytes() > 0)
    df = df.with_columns(is_header.alias("is_header"))
    if key not in ctx.state:
        heads = df.filter(pl.col("is_header"))
        if heads.height:
            ctx.state[key] = [_norm(c) for c in heads["t"][0].split(",")]
    return df.filter(~pl.col("is_header")).with_columns(pl.col("t").str.split(",").alias("fields"))


def _errors(df: pl.DataFrame, reason: pl.Expr) -> pl.DataFrame:
    return df.select("line", reason.alias("reason"), redact_expr(pl.col("text")).alias("sample")).filter(
        pl.col("reason").is_not_null()
    )


class AzureTrace(Source):
    name = "azure_trace"
    kind = "trace"
    description = "Azure LLM inference traces 2023/2024 and the 2025 multimodal (LMM) trace (CSV)"

    _HEADER_RE = re.compile(r"^\ufeff?TIMESTAMP,(NumImages,)?ContextTokens,GeneratedTokens\s*$", re.I)

    def sniff(self, head: str, path: str) -> float:
        first = head.lstrip("\ufeff").split("\n", 1)[0].strip()
        if self._HEADER_RE.match(first):
            return 0.95
        cols = {_norm(c) for c in first.split(",")}
        return 0.8 if {"timestamp", "contexttokens", "generatedtokens"} <= cols else 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        df = _csv_rows(
            lines, ctx, "azure_columns", _clean_text().str.to_uppercase().str.starts_with("TIMESTAMP,")
        )
        if df.height == 0:
            return out
        cols = ctx.state.get("azure_columns")
        n = pl.col("fields").list.len()
        if cols and {"timestamp", "contexttokens", "generatedtokens"} <= set(cols):
            want = pl.lit(len(cols))
            ts, ctx_i, gen_i = (cols.index(c) for c in ("timestamp", "contexttokens", "generatedtokens"))
            df = df.with_columns(_field(ts).alias("ts"), _field(ctx_i).alias("p"), _field(gen_i).alias("o"))
        else:
            # No (usable) header: the published layouts, told apart by their field count.
            want = pl.when(n == 4).then(4).otherwise(3)
            df = df.with_columns(
                _field(0).alias("ts"),
                _field(pl.when(n == 4).then(2).otherwise(1)).alias("p"),
                _field(pl.when(n == 4).then(3).otherwise(2)).alias("o"),
            )
        df = df.with_columns(
            iso_to_utc(pl.col("ts")).alias("arrival"),
            pl.col("p").cast(pl.Int64, strict=False).alias("prompt_tokens"),
            pl.col("o").cast(pl.Int64, strict=False).alias("output_tokens"),
        )
        reason = (
            pl.when(n != want)
            .then(pl.format("expected {} comma-separated fields, found {}", want, n))
            .when(pl.col("arrival").is_null())
            .then(pl.lit("TIMESTAMP is not an ISO-8601 time"))
            .when(pl.col("prompt_tokens").is_null() | (pl.col("prompt_tokens") < 0))
            .then(pl.lit("ContextTokens is not a non-negative integer"))
            .when(pl.col("output_tokens").is_null() | (pl.col("output_tokens") < 0))
            .then(pl.lit("GeneratedTokens is not a non-negative integer"))
        )
        df = df.with_columns(reason.alias("reason"))
        out.add_errors(_errors(df, pl.col("reason")))
        stem = file_stem(ctx.path)
        out.add(
            "requests",
            df.filter(pl.col("reason").is_null()).select(
                pl.format("azure-{}-{}", pl.lit(stem), pl.col("line")).alias("request_id"),
                "line",
                "arrival",
                "prompt_tokens",
                "output_tokens",
                pl.lit("ok").alias("status"),
                pl.lit(known_workload(ctx.path), pl.Utf8).alias("workload"),
            ),
        )
        return out


class BurstGPTTrace(Source):
    name = "burstgpt_trace"
    kind = "trace"
    description = "BurstGPT (Azure OpenAI GPT service) CSV trace; Timestamp is seconds after --start"

    # Required columns (normalised header names); `sessionid` is read past: the schema has no session column.
    _REQUIRED = ("timestamp", "model", "requesttokens", "responsetokens")
    _DEFAULT = ["timestamp", "model", "requesttokens", "responsetokens", "totaltokens", "logtype"]

    def sniff(self, head: str, path: str) -> float:
        cols = {_norm(c) for c in head.lstrip("\ufeff").split("\n", 1)[0].strip().split(",")}
        return 0.95 if set(self._REQUIRED) <= cols else 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        df = _csv_rows(
            lines, ctx, "burstgpt_columns", _clean_text().str.to_lowercase().str.starts_with("timestamp,")
        )
        if df.height == 0:
            return out
        cols = ctx.state.get("burstgpt_columns") or self._DEFAULT
        if not set(self._REQUIRED) <= set(cols):
            cols = self._DEFAULT

        def col(name: str) -> pl.Expr:
            return _field(cols.index(name)) if name in cols else pl.lit(None, pl.Utf8)

        n = pl.col("fields").list.len()
        df = df.with_columns(
            col("timestamp").cast(pl.Float64, strict=False).alias("offset_s"),
            col("model").alias("model"),
            col("requesttokens").cast(pl.Float64, strict=False).alias("p"),
            col("responsetokens").cast(pl.Float64, strict=False).alias("o"),
            col("logtype").alias("workload"),
            col("elapsedtime").cast(pl.Float64, strict=False).alias("e2e_s"),
        )
        reason = (
            pl.when(n != len(cols))
            .then(pl.format("expected {} comma-separated fields, found {}", pl.lit(len(cols)), n))
            .when(pl.col("offset_s").is_null() | (pl.col("offset_s") < 0))
            .then(pl.lit("Timestamp is not a non-negative number of seconds"))
            .when(pl.col("p").is_null() | (pl.col("p") < 0) | (pl.col("p") != pl.col("p").floor()))
            .then(pl.lit("Request tokens is not a non-negative integer"))
            .when(pl.col("o").is_null() | (pl.col("o") < 0) | (pl.col("o") != pl.col("o").floor()))
            .then(pl.lit("Response tokens is not a non-negative integer"))
        )
        df = df.with_columns(reason.alias("reason"))
        out.add_errors(_errors(df, pl.col("reason")))
        start = trace_start(ctx)
        arrival = after_start(start, pl.col("offset_s"))
        ok = pl.col("o") > 0
        out.add(
            "requests",
            df.filter(pl.col("reason").is_null()).select(
                pl.format("burstgpt-{}-{}", pl.lit(file_stem(ctx.path)), pl.col("line")).alias("request_id"),
                "line",
                arrival.alias("arrival"),
                # BurstGPT's `Elapsed time` runs from submission to the full response (not TTFT).
                pl.when(ok).then(after_start(start, pl.col("offset_s") + pl.col("e2e_s"))).alias("finished"),
                pl.when(ok).then(pl.col("e2e_s")).alias("e2e_s"),
                "model",
                "workload",
                pl.col("p").alias("prompt_tokens"),
                pl.col("o").alias("output_tokens"),
                # The dataset marks a failed request by zero response tokens; it then has no latency.
                pl.when(ok).then(pl.lit("ok")).otherwise(pl.lit("failed")).alias("status"),
            ),
        )
        return out


SOURCES = [AzureTrace(), BurstGPTTrace()]
