"""SGLang `--export-metrics-to-file` JSON Lines (`sglang-request-metrics-YYYYmmdd_HH.log`, 0.5.7+,
engine-logs.md S-2) -> `requests` (source `sglang_metrics`).

Each record is `{"request_parameters": "<JSON string>", **meta_info}`. `request_parameters` holds the request
(prompt included) and is never stored: only `stream` and `sampling_params.max_new_tokens` are read from it.
The meta_info keys give the row with the same rules as `--log-requests` (see _sglang_requests); a record has
no time of its own, so without the `--enable-metrics` epoch keys (`request_received_ts`, `request_finished_ts`)
arrival and finished are null. A line that is not a JSON object is an error with its line number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from attribution.sources._sglang_requests import META_FLOAT, META_INT, request_rows, safe_sample
from attribution.sources.base import ParseContext, ParseResult, Source

if TYPE_CHECKING:
    from attribution.schema import PolarsType


def _num(key: str, dtype: PolarsType) -> pl.Expr:
    v = pl.col("text").str.json_path_match(f"$.{key}").cast(pl.Float64, strict=False)
    return v  # counts stay floats: the ingest checks them against their domain (whole, in range)


class SGLangMetrics(Source):
    name = "sglang_metrics"
    kind = "engine"
    description = "SGLang --export-metrics-to-file request records (JSON Lines)"

    def sniff(self, head: str, path: str) -> float:
        first = next((ln for ln in head.splitlines() if ln.strip()), "")
        if first.startswith("{") and '"request_parameters"' in first and '"prompt_tokens"' in first:
            return 0.95
        if "sglang-request-metrics-" in path and first.startswith("{"):
            return 0.7
        return 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        df = lines.with_columns(pl.col("text").str.strip_chars()).filter(pl.col("text").str.len_bytes() > 0)
        valid = pl.col("text").str.starts_with("{") & pl.col("text").str.json_path_match("$").is_not_null()
        df = df.with_columns(valid.alias("_ok"))
        res.add_errors(
            df.filter(~pl.col("_ok")).select(
                "line",
                pl.lit("not a JSON object").alias("reason"),
                safe_sample(pl.col("text")).alias("sample"),
            )
        )
        df = df.filter("_ok")
        params = pl.col("text").str.json_path_match("$.request_parameters")
        fr = pl.col("text").str.json_path_match("$.finish_reason")
        df = df.select(
            "line",
            pl.col("text").str.json_path_match("$.id").alias("request_id"),
            pl.coalesce(fr.str.json_path_match("$.type"), fr).alias("finish_reason"),
            *(_num(k, pl.Int64).alias(c) for k, c in META_INT.items()),
            *(_num(k, pl.Float64).alias(c) for k, c in META_FLOAT.items()),
            params.str.json_path_match("$.sampling_params.max_new_tokens")
            .cast(pl.Int64, strict=False)
            .alias("max_tokens"),
            params.str.json_path_match("$.stream")
            .replace_strict({"true": True, "false": False}, default=None, return_dtype=pl.Boolean)
            .alias("stream"),
            pl.lit(None, pl.Datetime("us", "UTC")).alias("ts"),
            pl.lit(None, pl.Utf8).alias("model"),
        )
        res.add_errors(
            df.filter(pl.col("request_id").is_null()).select(
                "line", pl.lit("record without an id").alias("reason"), pl.lit(None, pl.Utf8).alias("sample")
            )
        )
        res.add("requests", request_rows(df.filter(pl.col("request_id").is_not_null())).drop("model"))
        return res


SOURCES = [SGLangMetrics()]
