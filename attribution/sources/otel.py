"""vLLM OpenTelemetry request spans exported as OTLP JSON (`otel`): one `ExportTraceServiceRequest` document,
or NDJSON with one per line as the OTel collector's file exporter writes. Each span named `llm_request`
becomes a `requests` row from its `gen_ai.*` attributes (section V-5 of ../shared/formats/engine-logs.md);
other spans and other signals (metrics, logs) are ignored. `line` is the 1-based index of the `llm_request`
span in the file; an unreadable document is an error at its physical line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from attribution.census import doc_records
from attribution.privacy import redact_expr
from attribution.schema import TS
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.bench import split_documents

if TYPE_CHECKING:
    from attribution.schema import PolarsType

# Every scalar is read as text: OTLP JSON writes 64-bit integers as strings ("intValue": "42",
# "startTimeUnixNano": "1718...") but some exporters write numbers; both decode to the same text.
_VALUE = pl.Struct(
    {"stringValue": pl.Utf8, "intValue": pl.Utf8, "doubleValue": pl.Utf8, "boolValue": pl.Utf8}
)
_ATTRS = pl.List(pl.Struct({"key": pl.Utf8, "value": _VALUE}))
_SPAN = pl.Struct(
    {
        "name": pl.Utf8,
        "startTimeUnixNano": pl.Utf8,
        "endTimeUnixNano": pl.Utf8,
        "attributes": _ATTRS,
        "status": pl.Struct({"code": pl.Utf8, "message": pl.Utf8}),
    }
)
_DOC = pl.Struct(
    {
        "resourceSpans": pl.List(
            pl.Struct(
                {
                    "resource": pl.Struct({"attributes": _ATTRS}),
                    "scopeSpans": pl.List(pl.Struct({"spans": pl.List(_SPAN)})),
                }
            )
        )
    }
)

# gen_ai.* attribute -> (requests column, type). V0 and V1 spans share these names (vllm/tracing*.py).
_ATTR_COLUMNS: dict[str, tuple[str, PolarsType]] = {
    "gen_ai.request.id": ("request_id", pl.Utf8),
    "gen_ai.response.model": ("model", pl.Utf8),
    "gen_ai.request.max_tokens": ("max_tokens", pl.Int64),
    "gen_ai.usage.prompt_tokens": ("prompt_tokens", pl.Int64),
    "gen_ai.usage.completion_tokens": ("output_tokens", pl.Int64),
    "gen_ai.latency.time_in_queue": ("queue_s", pl.Float64),
    "gen_ai.latency.time_to_first_token": ("ttft_s", pl.Float64),
    "gen_ai.latency.e2e": ("e2e_s", pl.Float64),
    "gen_ai.latency.time_in_model_prefill": ("prefill_s", pl.Float64),
    "gen_ai.latency.time_in_model_decode": ("decode_s", pl.Float64),
}
# Resource attributes that name the pod or host the engine ran on (set by the collector's k8s/host detectors);
# without them the ingest's deployment (--deployment or the path) is used.
_DEPLOYMENT_KEYS = ("k8s.pod.name", "host.name")


def _attr(col: str, key: str) -> pl.Expr:
    """The value of attribute `key` in the list column `col`, as text (null when absent)."""
    v = pl.col(col).list.eval(pl.element().filter(pl.element().struct.field("key") == key)).list.first()
    v = v.struct.field("value")
    return pl.coalesce(
        v.struct.field("stringValue"),
        v.struct.field("intValue"),
        v.struct.field("doubleValue"),
        v.struct.field("boolValue"),
    )


def _unix_nano(expr: pl.Expr) -> pl.Expr:
    ns = pl.coalesce(expr.cast(pl.Int64, strict=False), expr.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False))
    return (ns // 1000).cast(TS)


def _decode(docs: pl.DataFrame, out: ParseResult) -> pl.DataFrame:
    """Decode all documents at once; if that fails, decode them one by one to name the bad ones."""
    try:
        return docs.with_columns(pl.col("text").str.json_decode(_DOC).alias("doc"))
    except pl.exceptions.PolarsError:
        good, bad = [], []
        for i in range(docs.height):
            one = docs.slice(i, 1)
            try:
                good.append(one.with_columns(pl.col("text").str.json_decode(_DOC).alias("doc")))
            except pl.exceptions.PolarsError:
                bad.append(one)
        if bad:
            out.add_errors(
                pl.concat(bad).select(
                    "line",
                    pl.lit("not an OTLP JSON trace export (invalid JSON or unexpected types)").alias(
                        "reason"
                    ),
                    redact_expr(pl.col("text")).alias("sample"),
                )
            )
        return pl.concat(good) if good else docs.clear().with_columns(pl.lit(None, _DOC).alias("doc"))


class OtelSpans(Source):
    name = "otel"
    kind = "engine"
    mode = "whole"
    description = "vLLM OpenTelemetry llm_request spans as OTLP JSON (one document or collector NDJSON)"

    def sniff(self, head: str, path: str) -> float:
        if '"resourceSpans"' not in head:
            return 0.0
        if '"llm_request"' in head:
            return 0.95
        return 0.8 if '"gen_ai.request.id"' in head else 0.5

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        docs = split_documents(data.decode("utf-8", errors="replace"))
        out.records = doc_records(docs, self.name)
        # Other OTLP signals (resourceMetrics, resourceLogs) may share a collector file: not ours, skipped.
        docs = docs.filter(pl.col("text").str.contains('"resourceSpans"', literal=True))
        if docs.height == 0:
            return out
        spans = (
            _decode(docs, out)
            .select("line", pl.col("doc").struct.field("resourceSpans").alias("rs"))
            .explode("rs")
            .select(
                "line",
                pl.col("rs").struct.field("resource").struct.field("attributes").alias("res_attrs"),
                pl.col("rs").struct.field("scopeSpans").alias("ss"),
            )
            .explode("ss")
            .select("line", "res_attrs", pl.col("ss").struct.field("spans").alias("sp"))
            .explode("sp")
            .filter(pl.col("sp").struct.field("name") == "llm_request")
        )
        if spans.height == 0:
            return out
        spans = spans.with_columns(
            pl.col("sp").struct.field("attributes").alias("attrs"),
            pl.col("sp").struct.field("status").struct.field("code").alias("code"),
            pl.col("sp").struct.field("status").struct.field("message").alias("message"),
            _unix_nano(pl.col("sp").struct.field("startTimeUnixNano")).alias("arrival"),
            _unix_nano(pl.col("sp").struct.field("endTimeUnixNano")).alias("end"),
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("seq"),
        )
        spans = spans.with_columns(
            [_attr("attrs", k).cast(t, strict=False).alias(c) for k, (c, t) in _ATTR_COLUMNS.items()]
            + [pl.coalesce([_attr("res_attrs", k) for k in _DEPLOYMENT_KEYS]).alias("deployment")]
        )
        missing = spans.filter(pl.col("request_id").is_null())
        if missing.height:
            out.add_errors(
                missing.select(
                    "line",
                    pl.lit("llm_request span without gen_ai.request.id").alias("reason"),
                    pl.lit(None, pl.Utf8).alias("sample"),
                )
            )
        is_error = pl.col("code").is_in(["2", "STATUS_CODE_ERROR"]).fill_null(False)
        out_n = pl.col("output_tokens")
        rows = spans.filter(pl.col("request_id").is_not_null()).select(
            "request_id",
            pl.col("seq").alias("line"),
            "deployment",
            pl.lit("vllm").alias("engine"),
            "model",
            "arrival",
            (pl.col("arrival") + pl.duration(microseconds=(pl.col("ttft_s") * 1e6).round())).alias(
                "first_token"
            ),
            pl.coalesce(
                "end", pl.col("arrival") + pl.duration(microseconds=(pl.col("e2e_s") * 1e6).round())
            ).alias("finished"),
            "queue_s",
            "ttft_s",
            pl.when(out_n > 1).then((pl.col("e2e_s") - pl.col("ttft_s")) / (out_n - 1)).alias("tpot_s"),
            "e2e_s",
            "prefill_s",
            "decode_s",
            "prompt_tokens",
            "output_tokens",
            "max_tokens",
            pl.when(is_error).then(pl.lit("error")).otherwise(pl.lit("ok")).alias("status"),
            pl.when(is_error).then(redact_expr(pl.col("message"))).alias("error"),
        )
        out.add("requests", rows)
        return out


SOURCES = [OtelSpans()]
