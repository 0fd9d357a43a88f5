"""SGLang `--enable-request-time-stats-logging` lines (`Req Time Stats(...)` / `ReqTimeStats(...)`) in a
server console log -> `requests` (source `sglang_reqtime`). A source of its own, chosen with
`--format sglang_reqtime` on the same file: the `--log-requests` lines of that file already give `sglang_log` one
requests row per request, and a table holds one row per request per source. Never picked by sniffing.
"""

from __future__ import annotations

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources._sglang_config import start_lines
from attribution.sources._sglang_header import headed
from attribution.sources._sglang_requests import parse_reqtime
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.sglang_log import served_models


class SGLangReqTime(Source):
    name = "sglang_reqtime"
    kind = "engine"
    description = "SGLang Req Time Stats lines (--enable-request-time-stats-logging); only with --format"

    def sniff(self, head: str, path: str) -> float:
        return 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        df = headed(lines, ctx)
        res.add_errors(
            df.filter("bad_ts").select(
                "line",
                pl.lit("unreadable timestamp").alias("reason"),
                redact_expr(pl.col("text")).alias("sample"),
            )
        )
        df = served_models(start_lines(df.filter(~pl.col("bad_ts") & ~pl.col("no_ts")), ctx.state), ctx.state)
        rows, errs = parse_reqtime(df)
        res.add("requests", rows)
        res.add_errors(errs)
        return res


SOURCES = [SGLangReqTime()]
