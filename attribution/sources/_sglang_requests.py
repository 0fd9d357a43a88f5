"""SGLang `--log-requests` lines -> `request_events` (received) and `requests` (finished); `Req Time Stats`
lines -> `requests` for the sglang_reqtime source (engine-logs.md S-2). Only numbers are read from a request
line, never text: the `obj=` part can hold the prompt. request_key is the request id as written, since SGLang
ids carry no prefix to normalise.
"""

from __future__ import annotations

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources._sglang_header import msg_starts_with

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
_NUM_KEYS = [*META_INT, *META_FLOAT]
_COLUMN = {**META_INT, **META_FLOAT}
# every `'key': number` of the numeric meta_info keys; the first _KEY_CHARS characters tell the keys apart
_NUM_KEYS_RE = r"(?:^|, )'(?:" + "|".join(_NUM_KEYS) + rf")': {NUM}"
_KEY_CHARS = next(n for n in range(1, 64) if len({k[:n] for k in _NUM_KEYS}) == len(_NUM_KEYS))
assert _KEY_CHARS <= min(map(len, _NUM_KEYS))
QUOTED_RE = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
# a rid token's value (after `rid=`)
_RID_VALUE_RE = r"^(" + QUOTED_RE + r"|\[[^\]]*\]|None)"
_SCAN_RE = (
    r"(?:\(|, )rid=(?:" + QUOTED_RE + r"|\[[^\]]*\]|None)|'meta_info': \{|'max_new_tokens': \d+"
    r"|, stream=(?:True|False)|" + QUOTED_RE
)


def _first_token(tokens: pl.Expr, *prefixes: str) -> pl.Expr:
    """The first token that starts with one of `prefixes`."""
    e = pl.element()
    return tokens.list.filter(pl.any_horizontal(e.str.starts_with(p) for p in prefixes)).list.first()


def _epoch(expr: pl.Expr) -> pl.Expr:
    return (expr * 1e6).round(0).cast(pl.Int64, strict=False).cast(pl.Datetime("us", "UTC"))


def _secs(expr: pl.Expr) -> pl.Expr:
    return (expr * 1e6).round(0).cast(pl.Int64, strict=False).cast(pl.Duration("us"))


MAX_SECONDS = 1e11  # larger than any epoch time or duration in seconds (3,000 years)


def _out_of_range(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Finish rows with their impossible times (NaN, inf, beyond MAX_SECONDS) blanked, and those rows."""
    cols = [c for c in META_FLOAT.values() if c in df.columns]
    if not cols:
        return df, df.clear()
    wrong = {c: pl.col(c).is_nan() | (pl.col(c).abs() > MAX_SECONDS) for c in cols}
    flagged = df.filter(pl.any_horizontal(w.fill_null(False) for w in wrong.values()))
    if not flagged.height:
        return df, flagged
    return df.with_columns(pl.when(w).then(None).otherwise(pl.col(c)).alias(c) for c, w in wrong.items()), flagged


def _err(df: pl.DataFrame, reason: str) -> pl.DataFrame:
    return df.select("line", pl.lit(reason).alias("reason"), safe_sample(pl.col("msg")).alias("sample"))


def _repr_fields(df: pl.DataFrame) -> pl.DataFrame:
    """`_meta` (the text after `'meta_info': {`, or null) -> + `_meta_id`, `finish_reason` and the META_INT /
    META_FLOAT columns: for each key the first `(?:^|, )'key': value` of the text (a number for those
    columns), wherever it is.

    The numeric keys are read in one pass (_NUM_KEYS_RE) rather than one per key: a match of one key cannot
    start inside another's (a number holds no `, '`), so the first match of a key is its first token. Each
    token starts with its key, and rows with the same sequence of keys (normally all) take every key from
    the index of its first token.
    """
    meta = pl.col("_meta")
    # The dict normally opens with its id and finish reason: an anchored match there is the first match of
    # each (no `, '` fits in the id), and the unanchored ones run only on the other rows.
    lead = df["_meta"].str.extract_groups(r"^'id': ('[^']*'), 'finish_reason': \{'type': '([^']*)'").struct
    meta_id, finish = lead.field("1"), lead.field("2")
    redo = df["_meta"].is_not_null() & meta_id.is_null()
    if redo.any():
        idx = redo.arg_true()
        rest = df["_meta"].gather(idx)
        meta_id = meta_id.scatter(idx, rest.str.extract(r"(?:^|, )'id': ('[^']*')"))
        finish = finish.scatter(idx, rest.str.extract(r"(?:^|, )'finish_reason': \{'type': '([^']*)'"))
    df = df.with_columns(
        meta_id.str.strip_chars("'").alias("_meta_id"),
        finish.alias("finish_reason"),
        meta.str.extract_all(_NUM_KEYS_RE).alias("_nums"),
    )
    nums = pl.col("_nums")
    key_of = pl.element().str.strip_prefix(", ").str.slice(1, _KEY_CHARS)
    seqs = df.select(nums.list.eval(key_of).list.join("|").alias("_keys"))["_keys"]
    values: dict[str, pl.Expr] = {k: pl.lit(None, pl.Utf8) for k in _NUM_KEYS}
    distinct = seqs.unique().drop_nulls().to_list()
    for seq in distinct:
        order = seq.split("|") if seq else []
        rows = pl.lit(seqs) == seq
        for k in _NUM_KEYS:
            if k[:_KEY_CHARS] in order:
                token = nums.list.get(order.index(k[:_KEY_CHARS]), null_on_oob=True)
                value = token.str.strip_prefix(", ").str.strip_prefix(f"'{k}': ")
                # with a single sequence the rows without one have no token at all
                values[k] = value if len(distinct) == 1 else pl.when(rows).then(value).otherwise(values[k])
    return df.with_columns(
        # counts stay floats (each value is a NUM): the ingest checks them against their domain (whole, in
        # range) and reports a `11.5` or a `1e20`, which an integer cast here would null silently
        *(values[k].cast(pl.Float64, strict=False).alias(c) for k, c in _COLUMN.items()),
    ).drop("_nums")


def _json_fields(prefix: str) -> list[pl.Expr]:
    def jp(k: str) -> pl.Expr:
        return pl.coalesce(
            pl.col("msg").str.json_path_match(f"{prefix}.meta_info.{k}"),
            pl.col("msg").str.json_path_match(f"{prefix}.{k}"),
        )

    return [
        jp("id").alias("_meta_id"),
        pl.coalesce(jp("finish_reason.type"), jp("finish_reason")).alias("finish_reason"),
        # counts as the record's text: the ingest checks it (not a number, not whole, out of range) and says so
        *(jp(k).alias(c) for k, c in META_INT.items()),
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


def _candidates(df: pl.DataFrame) -> pl.DataFrame:
    """The request-log rows of `df` (line, ts, model, msg): `Receive: obj=` / `Finish: obj=` lines, `in=` lines
    with a meta_info dict, JSON `request.*` records. The second literal tests run only on the few rows starting
    with `in=` or `{` (an expression would run them on every row)."""
    m = df["msg"]
    keep = msg_starts_with(df, "Receive: obj=") | msg_starts_with(df, "Finish: obj=")
    other = msg_starts_with(df, "in=") | msg_starts_with(df, "{")
    if other.any():
        idx = other.arg_true()
        sub = m.gather(idx)
        ok = (sub.str.starts_with("in=") & sub.str.contains("'meta_info': {", literal=True)) | (
            sub.str.starts_with("{")
            & sub.str.contains('"event"', literal=True)
            & sub.str.contains("request.", literal=True)
        )
        keep = keep.scatter(idx, ok)
    return df.select("line", "ts", "model", "msg", *(["_head"] if "_head" in df.columns else [])).filter(keep)


def _json_rows(js: pl.DataFrame, tz: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """JSON request records -> (rows, invalid JSON lines)."""
    msg = pl.col("msg")
    js = js.with_columns(
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
        msg.str.json_path_match("$.obj.sampling_params.max_new_tokens").alias("max_tokens"),  # checked at the ingest
        msg.str.json_path_match("$.obj.stream")
        .replace_strict({"true": True, "false": False}, default=None, return_dtype=pl.Boolean)
        .alias("stream"),
        *_json_fields("$.out"),
    )
    return js.drop("_event", "_valid"), bad_json


_META = "'meta_info': {"
# _SCAN_RE plus two tokens that the scan steps over either way (no other token starts inside them): a quote
# that opens no string, and an unquoted `rid=[` that opens no list; they show a string or list cut short
_SCAN_LONE_RE = _SCAN_RE + r"""|['"]|rid=\["""


def _obj_fields(tokens: pl.Expr) -> list[pl.Expr]:
    """`_rid`, `_max_tok`, `_stream_tok`: from the first matching scan tokens (the latter two as tokens)."""
    return [
        _first_token(tokens, "(rid=", ", rid=").str.extract(r"rid=(.*)$").alias("_rid"),
        _first_token(tokens, "'max_new_tokens'").alias("_max_tok"),
        _first_token(tokens, ", stream=").alias("_stream_tok"),
    ]


def _scan(text: pl.DataFrame) -> pl.DataFrame:
    """`_rid`, `_max_tok`, `_stream_tok`, `_has_meta` and `_meta` (what follows the last `'meta_info': {`; the
    out dict comes after obj) for the text request lines.

    Markers are matched only outside quoted strings: the scan (_SCAN_RE) consumes every quoted string whole, so
    a prompt that quotes `rid='x'` or `'meta_info': {` cannot be taken for the real field. The meta_info dict
    holds most of a Finish line's strings, so only the part before the first literal `'meta_info': {` is
    scanned. That scan finds the whole line's tokens up to there unless one of them runs across that point (the
    literal is inside a string or a `rid=[...]` list), and then it meets a string or list that does not close
    (a lone token of _SCAN_LONE_RE). Otherwise the literal is the next token of the whole line (so
    `_has_meta`), and a field not found before it can only come after it if its marker's literal follows.
    Lines that fail these tests (normally none) are scanned whole.
    """
    msg = pl.col("msg")
    tokens = pl.col("_tok")
    parts = text["msg"].str.split(_META)
    n_parts = parts.list.len()
    cut = n_parts > 1
    rest = parts.list.last()
    fast = pl.DataFrame({"_tok": parts.list.first().str.extract_all(_SCAN_LONE_RE)}).select(
        *_obj_fields(tokens),
        (tokens.list.contains("'") | tokens.list.contains('"') | tokens.list.contains("rid=[")).alias("_lone"),
    )
    # with several literals the text after the first is not `rest`: scan those lines whole
    redo = cut & (fast["_lone"] | (n_parts > 2))
    for col, lit in (("_rid", "rid="), ("_max_tok", "'max_new_tokens'"), ("_stream_tok", ", stream=")):
        check = cut & ~redo & fast[col].is_null()
        if check.any():
            idx = check.arg_true()
            redo = redo.scatter(idx, rest.gather(idx).str.contains(lit, literal=True))
    out = pl.concat([text, fast.drop("_lone")], how="horizontal").with_columns(
        cut.alias("_has_meta"), rest.alias("_meta")
    )
    if redo.any():
        idx = redo.arg_true()
        full = out.select(msg.gather(idx).str.extract_all(_SCAN_RE).alias("_tok")).select(
            *_obj_fields(tokens), tokens.list.contains(_META).alias("_has_meta")
        )
        out = out.with_columns(out[c].scatter(idx, full[c]) for c in full.columns)
    return out.with_columns(pl.when("_has_meta").then("_meta").alias("_meta"))


def _first_rids(text: pl.DataFrame) -> pl.DataFrame:
    """+ `_rid` (the first rid token's value, as _scan finds it) for request lines whose other fields are not
    needed (Receive lines).

    A Receive line names its rid early: the text before the first literal `rid=` is checked instead of the
    whole line being scanned. When that text holds no quote (no string to hide the literal in, no token to
    run across it) and ends with `(` or `, `, the scan of the whole line reaches that marker between tokens,
    and finds no rid token before it (there is no other `rid=`); the marker's value read from there is then
    the first rid token's. The other lines are scanned whole.
    """
    msg = text["msg"]
    at = msg.str.find("rid=", literal=True)
    before = msg.str.head(at)
    value = msg.str.slice(at + 4, 80).str.extract(_RID_VALUE_RE)  # a longer value does not close: scanned
    ok = (
        (before.str.len_bytes() == at)  # ASCII up to there, so the byte offset is a character offset
        & (before.str.ends_with("(") | before.str.ends_with(", "))
        & ~before.str.contains("'", literal=True)
        & ~before.str.contains('"', literal=True)
        & value.is_not_null()
    ).fill_null(False)
    rid = pl.select(pl.when(ok).then(value)).to_series().alias("_rid")
    redo = at.is_not_null() & ~ok
    if redo.any():
        idx = redo.arg_true()
        tokens = pl.DataFrame({"_tok": msg.gather(idx).str.extract_all(_SCAN_RE)})
        rid = rid.scatter(idx, tokens.select(_obj_fields(pl.col("_tok"))[0])["_rid"])
    return text.with_columns(rid)


def _rid_lists(rid: pl.Series) -> pl.Series:
    """`_rid` (the value after `rid=` as written) -> list of request ids: one Receive can name a batch
    (`rid=['a', 'b']`); quotes are removed; anything else (`None`, a JSON rid) is kept as is."""
    r = pl.lit(rid)
    expr = (
        pl.when(r.str.starts_with("[") | r.str.contains(r"^['\"]"))
        .then(r.str.extract_all(r"'[^']*'|\"[^\"]*\"").list.eval(pl.element().str.slice(1).str.head(-1)))
        .otherwise(pl.concat_list(r))
    )
    return pl.select(expr).to_series().alias("_rids")


def _single_rids(rid: pl.Series) -> pl.Series | None:
    """The one request id of each row when no `_rid` names a list (the usual case): what _rid_lists would give
    as a one-element list, a plain quoted string losing its quotes; else None."""
    if rid.is_empty():
        return None
    simple = rid.str.contains(r"^'[^'\"]*'$")
    if not (simple | ~rid.str.contains(r"^['\"\[]")).fill_null(True).all():
        return None
    return rid.str.slice(1).str.head(-1).zip_with(simple.fill_null(False), rid).alias("_rid1")


def parse_requests(
    df: pl.DataFrame, tz: str
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """Headed segments (with `model`) -> (requests, request_events, errors).

    `Receive: obj=...` -> a `received` event per rid. `Finish: obj=..., out={...}` (0.4.1+), `in=...,
    out={...}` (<=0.4.0) and JSON `request.finished` records -> a requests row from the top-level keys of the
    last `'meta_info': {` dict (request_id = its `id`, else the obj `rid`), plus `max_new_tokens` and
    `stream` from `obj`; a Finish line without meta_info -> a `finished` event.
    """
    cand = _candidates(df)
    if cand.height == 0:
        return None, None, None
    is_json = msg_starts_with(cand, "{")
    any_json = bool(is_json.any())
    text = cand.filter(~is_json) if any_json else cand
    received = msg_starts_with(text, "Receive: ")
    # only the rid of a Receive line is used
    recv = _first_rids(text.filter(received)).with_columns(pl.lit("received").alias("_kind"))
    fin = _scan(text.filter(~received)).with_columns(
        pl.lit("finished").alias("_kind"),
        pl.col("_max_tok").str.extract(r"(\d+)$").cast(pl.Int64, strict=False).alias("max_tokens"),
        pl.col("_stream_tok")
        .str.extract(r"=(\w+)$")
        .replace_strict({"True": True, "False": False}, default=None, return_dtype=pl.Boolean)
        .alias("stream"),
    )
    fin = _repr_fields(fin).drop("_max_tok", "_stream_tok", "_meta")
    if any_json:
        js, bad_json = _json_rows(cand.filter(is_json), tz)
        recv = pl.concat([js.filter(pl.col("_kind") == "received"), recv], how="diagonal_relaxed")
        fin = pl.concat([js.filter(pl.col("_kind") == "finished"), fin], how="diagonal_relaxed")
    else:
        bad_json = cand.clear()
    one = _single_rids(recv["_rid"])
    if one is not None:
        # one id per row: the lists below would hold it alone (or a null, which no event gets)
        recv = recv.select("line", "ts", "msg", one.alias("_rids"))
        events = recv.filter(pl.col("_rids").is_not_null())
        no_rid = recv.filter(pl.col("_rids").is_null())
    else:
        recv = recv.select("line", "ts", "msg", _rid_lists(recv["_rid"]))
        events = recv.explode("_rids").filter(pl.col("_rids").is_not_null())
        no_rid = recv.filter(pl.col("_rids").list.drop_nulls().list.len() == 0)
    events = events.select(
        "line",
        "ts",
        pl.col("_rids").alias("request_id"),
        pl.col("_rids").alias("request_key"),
        pl.lit("received").alias("event"),
    )

    one = _single_rids(fin["_rid"])
    first_rid = one if one is not None else _rid_lists(fin["_rid"]).list.first()
    fin = fin.with_columns(pl.coalesce(pl.col("_meta_id"), first_rid).alias("request_id"))
    fin_events = fin.filter(~pl.col("_has_meta") & pl.col("request_id").is_not_null()).select(
        "line",
        "ts",
        "request_id",
        pl.col("request_id").alias("request_key"),
        pl.lit("finished").alias("event"),
    )
    fin, impossible = _out_of_range(fin)
    requests = request_rows(fin.filter(pl.col("_has_meta") & pl.col("request_id").is_not_null()))
    errors = pl.concat(
        [
            _err(impossible, "meta_info time out of range (NaN, infinite or beyond 1e11 s): kept the request "
                             "without it"),
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
