"""The SGLang server console log (`sglang_log`, engine-logs.md Part B): scheduler batch lines -> engine_steps,
start-up lines -> engine_config, `--log-requests` lines -> requests / request_events, uvicorn access lines ->
access_log. The header, step, config and request rules live in the `_sglang_*` helper modules; this module
ties them together and keeps the state (dates, last timestamp, current start and its served model).
"""

from __future__ import annotations

import re

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources._sglang_config import parse_memory, parse_server_args, start_lines
from attribution.sources._sglang_header import headed
from attribution.sources._sglang_requests import parse_requests
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.sglang_steps import parse_steps

# uvicorn access line; SGLang 0.4.3+ puts its own `[ts] ` header in front, older ones print it bare.
ACCESS_RE = r'^(?:\(.*? pid=\d+\) )?[A-Z]+:\s+(\S+):(\d+) - "(\S+) (\S+) HTTP/[\d.]+" (\d{3})(?: .*)?$'
# ACCESS_RE for a line without prefix, with an IPv4 or host name client and printable-ASCII method and path:
# one-pass, and every match is an ACCESS_RE match with the same groups
_ACCESS_ASCII_RE = r'^[A-Z]+: +([!-9;-~]+):([0-9]+) - "([!-~]+) ([!-~]+) HTTP/[0-9.]+" ([0-9]{3})(?: .*)?$'
_STRONG = (
    "] Prefill batch",
    "] Decode batch",
    # the scheduler lines after any other header (Dynamo's `LEVEL module.func: `, custom logging layouts)
    "Prefill batch, #new-seq: ",
    "Prefill batch. #new-seq: ",
    "Decode batch, #running-req: ",
    "Decode batch. #running-req: ",
    "server_args=ServerArgs(",
    "] Receive: obj=",
    "] Finish: obj=",
    "] in=GenerateReqInput(",
    '"event": "request.received',
    '"event": "request.finished"',
)
_WEAK = ("max_total_num_tokens=", "KV Cache is allocated", "Mamba Cache is allocated", "Load weight end. ")
_HEADER = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: [A-Z][A-Z_]*\d+)*\] |\[\d\d:\d\d:\d\d TP\d+\] "
)


def served_models(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Add `model`: the served model name (else model path) of the start each segment belongs to."""
    is_args = df["is_args"]
    if not is_args.any():
        return df.with_columns(pl.lit(state.get("model"), pl.Utf8).alias("model"))
    # read on the server_args lines only (an expression would read every message)
    idx = is_args.arg_true()
    msg = df["msg"].gather(idx)
    names = pl.select(
        pl.coalesce(
            msg.str.extract(r", served_model_name='([^']*)'"), msg.str.extract(r"\(model_path='([^']*)'")
        )
    ).to_series()
    name = pl.Series("model", dtype=pl.Utf8).extend_constant(None, df.height).scatter(idx, names).forward_fill()
    df = df.with_columns(name.fill_null(pl.lit(state.get("model"), pl.Utf8)).alias("model"))
    state["model"] = df["model"][-1]
    return df


def parse_access(df: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    cand = df.filter(pl.col("msg").str.contains(' - "', literal=True)).select("line", "ts", "msg")
    if cand.height == 0:
        return None, None
    msg = cand["msg"]
    # The usual line first, with ACCESS_RE's groups from a one-pass ASCII form of it (several times faster);
    # the other lines (a prefix, an IPv6 client, non-ASCII text, or no access line at all) go through
    # ACCESS_RE itself.
    m = msg.str.extract_groups(_ACCESS_ASCII_RE).struct
    groups = {g: m.field(g) for g in ("1", "3", "4", "5")}
    keep = groups["1"].is_not_null()
    ok = keep
    if not keep.all():
        idx = (~keep).arg_true()
        rest = msg.gather(idx)
        slow = rest.str.extract_groups(ACCESS_RE).struct
        for g in groups:
            groups[g] = groups[g].scatter(idx, slow.field(g))
        ok = groups["1"].is_not_null()
        keep = keep.scatter(idx, rest.str.contains(r"^(?:\(.*? pid=\d+\) )?[A-Z]+:\s"))
    cand = cand.with_columns(
        groups["1"].alias("client"),
        groups["3"].alias("method"),
        groups["4"].alias("_path"),
        groups["5"].alias("_status"),
        ok.alias("_ok"),
    ).filter(keep)
    if cand.height == 0:
        return None, None
    rows = cand.filter("_ok").select(
        "line",
        "ts",
        "client",
        "method",
        # the query string can carry keys or user data: only the path is kept
        pl.col("_path").str.replace(r"\?.*$", "").alias("path"),
        pl.col("_status").cast(pl.Int64, strict=False).alias("http_status"),
    )
    errors = cand.filter(~pl.col("_ok")).select(
        "line", pl.lit("unreadable access line").alias("reason"), redact_expr(pl.col("msg")).alias("sample")
    )
    return rows, errors


NO_TIME = (
    "no timestamp: an old `[gpu=N]` line carries no time of its own, and no wrapper record time or earlier "
    "line gave one"
)
RAY_DEDUP = (
    "Ray collapsed repeated lines into `[repeated Nx across cluster]` (first here: {n} lines hidden); the "
    "hidden scheduler lines are lost: rerun with RAY_DEDUP_LOGS=0, or read the worker files under /tmp/ray"
)
DYNAMO = (
    "Dynamo re-layout (`<time> LEVEL module.func: msg`): SGLang's DP/TP rank tags are not in these lines, so "
    "data-parallel ranks cannot be told apart (DYN_SKIP_SGLANG_LOG_FORMATTING=1 keeps SGLang's own header)"
)


def layout_notes(df: pl.DataFrame, state: dict) -> pl.DataFrame | None:
    """Errors for unreadable or missing times (per line), and a note once per file (kept in the state) for
    Ray's dedup and for Dynamo's layout, which both lose data the file cannot give back."""
    sample = redact_expr(pl.col("text")).alias("sample")
    parts = [
        df.filter("bad_ts").select("line", pl.lit("unreadable timestamp").alias("reason"), sample),
        df.filter("no_ts").select("line", pl.lit(NO_TIME).alias("reason"), sample),
    ]
    if not state.get("ray_dedup_noted") and df["ray_repeated"].is_not_null().any():
        first = df.filter(pl.col("ray_repeated").is_not_null()).head(1)
        parts.append(first.select("line", pl.lit(RAY_DEDUP.format(n=first["ray_repeated"][0])).alias("reason"), sample))
        state["ray_dedup_noted"] = True
    if not state.get("dynamo_noted") and df["dynamo"].any():
        parts.append(df.filter("dynamo").head(1).select("line", pl.lit(DYNAMO).alias("reason"), sample))
        state["dynamo_noted"] = True
    return pl.concat(parts)


class SGLangLog(Source):
    name = "sglang_log"
    kind = "engine"
    description = "SGLang server console log (scheduler batch lines, start-up, --log-requests, access lines)"

    def sniff(self, head: str, path: str) -> float:
        if any(s in head for s in _STRONG):
            return 0.95
        if _HEADER.search(head) and any(s in head for s in _WEAK):
            return 0.8
        if _HEADER.search(head) and "sglang" in (head + path).lower():
            return 0.6
        return 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        st = ctx.state
        res = ParseResult()
        df = headed(lines, ctx)
        res.add_errors(layout_notes(df, st))
        if df["bad_ts"].any() or df["no_ts"].any():
            df = df.filter(~pl.col("bad_ts") & ~pl.col("no_ts"))
        df = served_models(start_lines(df, st), st)

        steps, errs = parse_steps(df)
        res.add("engine_steps", steps)
        res.add_errors(errs)

        args, errs = parse_server_args(df)
        res.add_errors(errs)
        facts, errs, folded = parse_memory(df, st)
        res.add_errors(errs)
        res.add_consumed(folded)
        for part in ([args] if args is not None else []) + facts:
            res.add("engine_config", part.with_columns(pl.lit("sglang").alias("engine")))

        requests, events, errs = parse_requests(df, ctx.tz)
        res.add("requests", requests)
        res.add("request_events", events)
        res.add_errors(errs)

        access, errs = parse_access(df)
        res.add("access_log", access)
        res.add_errors(errs)
        return res


SOURCES = [SGLangLog()]
