"""Mooncake (Kimi) request traces: JSONL with relative `timestamp` (ms), `input_length`, `output_length` and
`hash_ids` (prefix-chained hashes of 512-token blocks), as released in kvcache-ai/Mooncake FAST25-release and
the arXiv `mooncake_trace.jsonl`. Arrival = trace start (`--start`, else `DEFAULT_TRACE_START`) + timestamp;
request ids are synthesised as `mooncake-<file stem>-<line>`.
"""

from __future__ import annotations

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.traces import after_start, file_stem, known_workload, trace_start

_KEYS = ('"timestamp"', '"input_length"', '"output_length"', '"hash_ids"')
_INT_LIST_RE = r"^\[\s*(-?\d+\s*(,\s*-?\d+\s*)*)?\]$"


class MooncakeTrace(Source):
    name = "mooncake_trace"
    kind = "trace"
    description = "Mooncake JSONL trace (timestamp ms after --start, input/output length, block hash ids)"

    def sniff(self, head: str, path: str) -> float:
        first = head.lstrip("\ufeff").lstrip().split("\n", 1)[0]
        if not first.startswith("{") or not all(k in first for k in _KEYS):
            return 0.0
        # Qwen-Bailian traces share these keys but count seconds and 16-token blocks: not ours.
        return 0.0 if '"chat_id"' in first else 0.95

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        df = lines.with_columns(pl.col("text").str.strip_chars_start("\ufeff").str.strip_chars().alias("t"))
        # A record is any line that looks like a JSON object; anything else is noise and skipped.
        df = df.filter(pl.col("t").str.starts_with("{"))
        if df.height == 0:
            return out
        t = pl.col("t")
        df = df.with_columns(
            t.str.json_path_match("$.timestamp").cast(pl.Float64, strict=False).alias("ms"),
            t.str.json_path_match("$.input_length").cast(pl.Float64, strict=False).alias("p"),
            t.str.json_path_match("$.output_length").cast(pl.Float64, strict=False).alias("o"),
            t.str.json_path_match("$.hash_ids").alias("h"),
        )

        def count_bad(c: str) -> pl.Expr:
            return pl.col(c).is_null() | (pl.col(c) < 0) | (pl.col(c) != pl.col(c).floor())

        reason = (
            pl.when(pl.col("ms").is_null() | (pl.col("ms") < 0))
            .then(pl.lit("not valid JSON, or timestamp missing or not a non-negative number (ms)"))
            .when(count_bad("p"))
            .then(pl.lit("input_length missing or not a non-negative integer"))
            .when(count_bad("o"))
            .then(pl.lit("output_length missing or not a non-negative integer"))
            .when(pl.col("h").is_not_null() & ~pl.col("h").str.contains(_INT_LIST_RE))
            .then(pl.lit("hash_ids is not a list of integers"))
        )
        df = df.with_columns(reason.alias("reason"))
        out.add_errors(
            df.filter(pl.col("reason").is_not_null()).select(
                "line", "reason", redact_expr(pl.col("text")).alias("sample")
            )
        )
        ok = df.filter(pl.col("reason").is_null())
        out.add(
            "requests",
            ok.select(
                pl.format("mooncake-{}-{}", pl.lit(file_stem(ctx.path)), pl.col("line")).alias("request_id"),
                "line",
                after_start(trace_start(ctx), pl.col("ms") / 1000).alias("arrival"),
                pl.col("p").alias("prompt_tokens"),
                pl.col("o").alias("output_tokens"),
                pl.lit("ok").alias("status"),
                pl.lit(known_workload(ctx.path), pl.Utf8).alias("workload"),
                pl.col("h")
                .str.extract_all(r"-?\d+")
                .list.eval(pl.element().cast(pl.Int64, strict=False))
                .alias("block_hashes"),
            ),
        )
        return out


SOURCES = [MooncakeTrace()]
