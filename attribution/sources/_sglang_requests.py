"""SGLang `--log-requests` lines -> `request_events` (received) and `requests` (finished); `Req Time Stats`
lines -> `requests` for the sglang_reqtime source (engine-logs.md S-2). Only numbers are read from a request
line, never text: the `obj=` part can hold the prompt. request_key is the request id as written, since SGLang
ids carry no prefix to normalise.
"""

from __future__ import annotations

import polars as pl

from attribution.privacy import redact_expr

NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
META_INT = {
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "output_tokens",
    "cached_tokens": "cached_tokens",
}
META_FLOAT = {
    "e2e_latency": "e2e_s",
    "queue_time": "queue_s",
    "first_token_latency": "_ttft",
    "request_received_ts": "_recv",
    "request_finished_ts": "_fin",
    "prefill_finished_ts": "_prefill_fin",
}
QUOTED_RE = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
_SCAN_RE = (
    r"(?:\(|, )rid=(?:" + QUOTED_RE + r"|\[[^\]]*\]|None)|'meta_info': \{|'max_new_tokens': \d+"
    r"|, stream=(?:True|False)|" + QUOTED_RE
)


def _first_token(tokens: pl.Expr, pattern: str) -> pl.Expr:
    return tokens.list.eval(pl.element().filter(pl.element().str.contains(pattern))).list.first()


def _epoch(expr: pl.Expr) -> pl.Expr:
    return (expr * 1e6).round(0).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))


def _secs(expr: pl.Expr) -> pl.Expr:
    return (expr * 1e6).round(0).cast(pl.Int64).cast(pl.Duration("us"))


def _err(df: pl.DataFrame, reason: str) -> pl.DataFrame:
    return df.select("line", pl.lit(reason).alias("reason"), safe_sample(pl.col("msg")).alias("sample"))


def _repr_fields(meta: pl.Expr) -> list[pl.Expr]:
    def key(k: str, val: str) -> pl.Expr:
        return meta.str.extract(rf"(?:^|, )'{k}': ({val})")

    return [
        key("id", r"'[^']*'").str.strip_chars("'").alias("_meta_id"),
        meta.str.extract(r"(?:^|, )'finish_reason': \{'type': '([^']*)'").alias("finish_reason"),
        *(key(k, NUM).cast(pl.Int64, strict=False).alias(c) for k, c in META_INT.items()),
        *(key(k, NUM).cast(pl.Float64, strict=False).alias(c) for k, c in META_FLOAT.items()),
    ]


def _json_fields(prefix: str) -> list[pl.Expr]:
    def jp(k: str) -> pl.Expr:
        return pl.coalesce(
            pl.col("msg").str.json_path_match(f"{prefix}.meta_info.{k}"),
            pl.col("msg").str.json_path_match(f"{prefix}.{k}"),
        )

    return [
        jp("id").alias("_meta_id"),
        pl.coalesce(jp("finish_reason.type"), jp("finish_reason")).alias("finish_reason"),
        *(jp(k).cast(pl.Float64, strict=False).cast(pl.Int64).alias(c) for k, c in META_INT.items()),
        *(jp(k).cast(pl.Float64, strict=False).alias(c) for k, c in META_FLOAT.items()),
    ]


def _json_ts(expr: pl.Expr, tz: str) -> pl.Expr:
    from attribution.sources.timefmt import to_utc

    aware = expr.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_zone="UTC")
    naive = to_utc(expr.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False), tz)
    return pl.coalesce(aware.dt.cast_time_unit("us"), naive)


def request_rows(done: pl.DataFrame) -> pl.DataFrame:
    """Finished requests with meta_info fields (`request_id`, `ts` = the line's time or null, `model`,
    `max_tokens`, `stream`, META_INT / META_FLOAT columns) -> `requests` rows.

    finished = `request_finished_ts`, else the line's time, else (a metrics-file record has no time of its
    own) request_received_ts + e2e_latency; arrival = `request_received_ts`, else finished - e2e_latency;
    ttft_s = `first_token_latency`, else prefill_finished_ts - request_received_ts (0.5.9); first_token =
    arrival + ttft_s; queue_s = `queue_time`; status `aborted` for finish type `abort`, else `ok`.
    """
    finished = pl.coalesce(_epoch(pl.col("_fin")), "ts", _epoch(pl.col("_recv")) + _secs(pl.col("e2e_s")))
    arrival = pl.coalesce(_epoch(pl.col("_recv")), finished - _secs(pl.col("e2e_s")))
    # a difference of two epoch floats carries ~1e-7 s of float noise: keep microseconds, as timestamps do
    ttft = pl.coalesce("_ttft", (pl.col("_prefill_fin") - pl.col("_recv")).round(6))
    return done.with_columns(
        finished.alias("finished"), arrival.alias("arrival"), ttft.alias("ttft_s")
    ).select(
        "line",
        "request_id",
        pl.col("request_id").alias("request_key"),
        pl.lit("sglang").alias("engine"),
        "model",
        "arrival",
        (pl.col("arrival") + _secs(pl.col("ttft_s"))).alias("first_token"),
        "finished",
        "queue_s",
        "ttft_s",
        "e2e_s",
        *META_INT.values(),
        "max_tokens",
        "stream",
        pl.when(pl.col("finish_reason") == "abort")
        .then(pl.lit("aborted"))
        .otherwise(pl.lit("ok"))
        .alias("status"),
        "finish_reason",
    )


def safe_sample(expr: pl.Expr) -> pl.Expr:
    """A sample of a request line that cannot hold prompt text: quoted strings become `<str>`, and anything
    after an unclosed quote (a cut line) is dropped."""
    blanked = expr.str.slice(0, 2000).str.replace_all(QUOTED_RE, "<str>")
    return redact_expr(blanked.str.replace(r"""['"].*$""", "..."))


def parse_requests(
    df: pl.DataFrame, tz: str
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """Headed segments (with `model`) -> (requests, request_events, errors).

    `Receive: obj=...` -> a `received` event per rid. `Finish: obj=..., out={...}` (0.4.1+), `in=...,
    out={...}` (<=0.4.0) and JSON `request.finished` records -> a requests row from the top-level keys of the
    last `'meta_info': {` dict (request_id = its `id`, else the obj `rid`), plus `max_new_tokens` and
    `stream` from `obj`; a Finish line without meta_info -> a `finished` event.
    """
    msg = pl.col("msg")
    cand = df.filter(
        msg.str.starts_with("Receive: obj=")
        | msg.str.starts_with("Finish: obj=")
        | (msg.str.starts_with("in=") & msg.str.contains("'meta_info': {", literal=True))
        | (
            msg.str.starts_with("{")
            & msg.str.contains('"event"', literal=True)
            & msg.str.contains("request.", literal=True)
        )
    )
    if cand.height == 0:
        return None, None, None
    is_json = msg.str.starts_with("{")
    js = cand.filter(is_json).with_columns(
        msg.str.json_path_match("$.event").alias("_event"),
        msg.str.json_path_match("$").is_not_null().alias("_valid"),
    )
    bad_json = js.filter(~pl.col("_valid"))
    js = js.filter(pl.col("_valid") & pl.col("_event").is_in(["request.received", "request.finished"]))
    js = js.with_columns(
        pl.when(pl.col("_event") == "request.received")
        .then(pl.lit("received"))
        .otherwise(pl.lit("finished"))
        .alias("_kind"),
        pl.coalesce(msg.str.json_path_match("$.rid"), msg.str.json_path_match("$.obj.rid")).alias("_rid"),
        pl.coalesce(_json_ts(msg.str.json_path_match("$.timestamp"), tz), "ts").alias("ts"),
        (msg.str.json_path_match("$.out").is_not_null()).alias("_has_meta"),
        msg.str.json_path_match("$.obj.sampling_params.max_new_tokens")
        .cast(pl.Int64, strict=False)
        .alias("max_tokens"),
        msg.str.json_path_match("$.obj.stream")
        .replace_strict({"true": True, "false": False}, default=None, return_dtype=pl.Boolean)
        .alias("stream"),
        *_json_fields("$.out"),
    )

    # Markers are matched only outside quoted strings: the scan consumes every quoted string whole, so a
    # prompt that quotes `rid='x'` or `'meta_info': {` cannot be taken for the real field.
    tokens = pl.col("_tok")
    text = cand.filter(~is_json).with_columns(msg.str.extract_all(_SCAN_RE).alias("_tok"))
    text = text.with_columns(
        pl.when(msg.str.starts_with("Receive: "))
        .then(pl.lit("received"))
        .otherwise(pl.lit("finished"))
        .alias("_kind"),
        _first_token(tokens, r"^(?:\(|, )rid=").str.extract(r"rid=(.*)$").alias("_rid"),
        tokens.list.contains("'meta_info': {").alias("_has_meta"),
        _first_token(tokens, "^'max_new_tokens'").str.extract(r"(\d+)$").cast(pl.Int64).alias("max_tokens"),
        _first_token(tokens, "^, stream=")
        .str.extract(r"=(\w+)$")
        .replace_strict({"True": True, "False": False}, default=None, return_dtype=pl.Boolean)
        .alias("stream"),
    )
    # what follows the last `'meta_info': {` (the out dict comes after obj): taken once as a column, since
    # an eager with_columns would run it again for every field read from it
    meta = pl.when("_has_meta").then(msg.str.split("'meta_info': {").list.last())
    text = text.with_columns(meta.alias("_meta")).with_columns(*_repr_fields(pl.col("_meta")))
    text = text.drop("_tok", "_meta")
    rows = pl.concat([js.drop("_event", "_valid"), text], how="diagonal_relaxed")
    # one Receive can name a batch (`rid=['a', 'b']`); a JSON rid is already bare
    rows = rows.with_columns(
        pl.when(pl.col("_rid").str.starts_with("[") | pl.col("_rid").str.contains(r"^['\"]"))
        .then(
            pl.col("_rid")
            .str.extract_all(r"'[^']*'|\"[^\"]*\"")
            .list.eval(pl.element().str.slice(1).str.head(-1))
        )
        .otherwise(pl.concat_list(pl.col("_rid")))
        .alias("_rids")
    )
    recv = rows.filter(pl.col("_kind") == "received")
    events = (
        recv.explode("_rids")
        .filter(pl.col("_rids").is_not_null())
        .select(
            "line",
            "ts",
            pl.col("_rids").alias("request_id"),
            pl.col("_rids").alias("request_key"),
            pl.lit("received").alias("event"),
        )
    )
    no_rid = recv.filter(pl.col("_rids").list.drop_nulls().list.len() == 0)

    fin = rows.filter(pl.col("_kind") == "finished").with_columns(
        pl.coalesce("_meta_id", pl.col("_rids").list.first()).alias("request_id")
    )
    fin_events = fin.filter(~pl.col("_has_meta") & pl.col("request_id").is_not_null()).select(
        "line",
        "ts",
        "request_id",
        pl.col("request_id").alias("request_key"),
        pl.lit("finished").alias("event"),
    )
    requests = request_rows(fin.filter(pl.col("_has_meta") & pl.col("request_id").is_not_null()))
    errors = pl.concat(
        [
            _err(bad_json, "request log line is not valid JSON"),
            _err(no_rid, "Receive line without a rid"),
            _err(fin.filter(pl.col("request_id").is_null()), "Finish line without an id or rid"),
        ]
    )
    return requests, pl.concat([events, fin_events]), errors


REQTIME_RE = r"^(?:Req Time Stats|ReqTimeStats)\(rid=([^,)]+)"


def parse_reqtime(df: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """`Req Time Stats(...)` (0.4.9-0.5.9) / `ReqTimeStats(...)` (0.5.23) -> requests rows.

    Logged by the scheduler when a request finishes: finished = the line's timestamp, queue_s =
    queue_duration, arrival = finished - queue_duration - forward_duration (entry into the scheduler's
    waiting queue, so tokenisation is not included). Only TP-rank-0 lines count (every TP rank may log it);
    each data-parallel rank schedules its own requests, so all DP ranks count.
    """
    msg = pl.col("msg")
    cand = df.filter(
        pl.col("has_header") & pl.col("tp0") & msg.str.contains(r"^(?:Req Time Stats|ReqTimeStats)\(")
    )
    if cand.height == 0:
        return None, None
    cand = cand.with_columns(
        msg.str.extract(REQTIME_RE).str.strip_chars("'\" ").alias("request_id"),
        msg.str.extract(r"[(,] input[ _]len=(\d+)").cast(pl.Int64, strict=False).alias("prompt_tokens"),
        msg.str.extract(r", cached_input_len=(\d+)").cast(pl.Int64, strict=False).alias("cached_tokens"),
        msg.str.extract(r", output[ _]len=(\d+)").cast(pl.Int64, strict=False).alias("output_tokens"),
        (msg.str.extract(r"queue_duration=(" + NUM + ")ms").cast(pl.Float64, strict=False) / 1000).alias(
            "queue_s"
        ),
        (msg.str.extract(r"forward_duration=(" + NUM + ")ms").cast(pl.Float64, strict=False) / 1000).alias(
            "_fwd"
        ),
    )
    ok = pl.col("request_id").is_not_null() & pl.col("prompt_tokens").is_not_null()
    rows = cand.filter(ok).select(
        "line",
        "request_id",
        pl.col("request_id").alias("request_key"),
        pl.lit("sglang").alias("engine"),
        "model",
        (pl.col("ts") - _secs(pl.col("queue_s") + pl.col("_fwd"))).alias("arrival"),
        pl.col("ts").alias("finished"),
        "queue_s",
        "prompt_tokens",
        "output_tokens",
        "cached_tokens",
        pl.lit("ok").alias("status"),
    )
    return rows, _err(cand.filter(~ok), "unreadable Req Time Stats line")
