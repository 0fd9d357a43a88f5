"""LiteLLM proxy logs -> `requests` (gateway), ../shared/formats/gateway-logs.md section 1: the
StandardLoggingPayload as NDJSON (`litellm`, read in chunks) or as one JSON array / object (`litellm_json`:
generic_api `json_array`, an S3/GCS object), and `LiteLLM_SpendLogs` exports as CSV or Parquet
(`litellm_spendlogs`). Messages, responses and headers are never read into a column.

Rules: request_key = `id` / `request_id` minus a `chatcmpl-` or `cmpl-` prefix (vLLM answers with
`chatcmpl-<its request id>`), null for cache hits (`..._cache_hit<time>` ids, `cache_hit` true), which never
reached an engine. Times are epoch seconds or `YYYY-MM-DD HH:MM:SS[.f]` text, naive text read as UTC.
ttft_s / first_token come from completionStartTime only when it is before endTime (LiteLLM sets it to
endTime when it saw no first token) and, in the payload, only when `stream` is true; SpendLogs has no
`stream` column, so there the first condition alone decides. deployment = host[:port] of `api_base` (the
vLLM replica), else the ingest's default. model = the model sent upstream without LiteLLM's provider prefix
(`hosted_vllm/`). key_hash = metadata.user_api_key_hash / api_key, hashed again unless 64 hex; team = team
alias, else team id; user = the key's user id. error = error_information.error_class (never the message,
which can quote the prompt); http_status = a 3-digit error_code. cost = `response_cost` (USD; else
hidden_params.response_cost), null where LiteLLM had no price for the model (`response_cost_failure_debug_info`
set: it then writes 0.0), or SpendLogs `spend` (there 0 may also mean "no price": the row does not say).
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterable, Iterator

import polars as pl

from attribution.census import doc_records
from attribution.keys import gateway_request_key
from attribution.sources._stray_commas import StrayCommas
from attribution.sources.access_log import (
    NUMBER_RE,
    epoch,
    finish,
    first_json_line,
    host_of,
    json_records,
    parse_time,
    samples,
    seconds_between,
)
from attribution.sources.base import ParseContext, ParseResult, Source, document_start, merged

# StandardLoggingPayload fields, by the name this module gives them.
SLP_PATHS: dict[str, list[str]] = {
    "request_id": ["$.id"],
    "stream": ["$.stream"],
    "status": ["$.status"],
    "start": ["$.startTime"],
    "end": ["$.endTime"],
    "first": ["$.completionStartTime"],
    "call_type": ["$.call_type"],
    "raw_model": ["$.hidden_params.litellm_model_name", "$.model"],
    "provider": ["$.custom_llm_provider"],
    "model_group": ["$.model_group"],
    "api_base": ["$.api_base", "$.hidden_params.api_base"],
    "prompt_tokens": ["$.prompt_tokens"],
    "output_tokens": ["$.completion_tokens"],
    "cached_tokens": ["$.metadata.usage_object.prompt_tokens_details.cached_tokens",
                      "$.hidden_params.usage_object.prompt_tokens_details.cached_tokens",
                      "$.response.usage.prompt_tokens_details.cached_tokens"],
    "max_tokens": ["$.model_parameters.max_tokens", "$.model_parameters.max_completion_tokens"],
    "key_alias": ["$.metadata.user_api_key_alias"],
    "key_hash": ["$.metadata.user_api_key_hash"],
    "team": ["$.metadata.user_api_key_team_alias", "$.metadata.user_api_key_team_id"],
    "user": ["$.metadata.user_api_key_user_id"],
    "error_class": ["$.error_information.error_class"],
    "error_code": ["$.error_information.error_code"],
    "error_str": ["$.error_str"],
    "cache_hit": ["$.cache_hit"],
    # USD billed: LiteLLM writes `response_cost or 0.0`, with the failure's debug info when it had no price
    "cost": ["$.response_cost", "$.hidden_params.response_cost"],
    "unpriced": ["$.response_cost_failure_debug_info"],
}
# The same facts inside SpendLogs' `metadata` JSON text.
_META_PATHS: dict[str, list[str]] = {
    "key_alias": ["$.user_api_key_alias"],
    "key_hash": ["$.user_api_key_hash"],
    "team": ["$.user_api_key_team_alias", "$.user_api_key_team_id"],
    "user": ["$.user_api_key_user_id"],
    "cached_tokens": ["$.additional_usage_values.prompt_tokens_details.cached_tokens",
                      "$.usage_object.prompt_tokens_details.cached_tokens"],
    "error_class": ["$.error_information.error_class"],
    "error_code": ["$.error_information.error_code"],
}
_SLP_KEYS = {"call_type", "model_group", "litellm_call_id", "hidden_params", "model_map_information",
             "response_cost", "completionStartTime"}
_SPEND_HEADER = ("request_id", "startTime", "api_key")
_SPEND_COLS = ("request_id", "startTime", "endTime", "completionStartTime", "request_duration_ms", "model",
               "custom_llm_provider", "model_group", "api_base", "api_key", "user", "team_id", "metadata", "status",
               "cache_hit", "prompt_tokens", "completion_tokens", "spend")


DOC_BATCH = 20_000  # records of a JSON document parsed at a time, at most
DOC_BATCH_CHARS = 4 << 20  # ... and about this much of their JSON text
SPEND_BATCH_BYTES = 8 << 20  # CSV bytes of a SpendLogs export parsed at a time


def _record_end(buf: bytearray, limit: int) -> int:
    """The end (just past a newline) of the last whole CSV record within buf[:limit], else of the first one
    after it (a record longer than `limit`): a newline after an even number of quote characters (RFC 4180
    doubles a quote inside a quoted field); 0 when buf holds no whole record yet."""
    pos = quotes = best = 0
    while (nl := buf.find(b"\n", pos)) >= 0:  # a loop over the newlines of one batch
        if nl >= limit and best:
            break
        quotes += buf.count(b'"', pos, nl)
        pos = nl + 1
        if quotes % 2 == 0:
            best = pos
            if nl >= limit:
                break
    return best


def _file_error(line: int, reason: str) -> pl.DataFrame:
    return pl.DataFrame({"line": [line], "reason": [reason], "sample": [None]},
                        schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8})


def _common(df: pl.DataFrame) -> pl.DataFrame:
    """Columns both LiteLLM record kinds derive the same way (input: the named text fields)."""
    model = pl.col("raw_model")
    served = pl.coalesce(model.str.strip_prefix(pl.concat_str(pl.col("provider"), pl.lit("/"))), model)
    # An exception class name (`litellm.RateLimitError: ...` -> `litellm.RateLimitError`), never the message.
    err_class = pl.col("error_str").str.extract(r"^([A-Za-z_][\w.]*(?:Error|Exception|Timeout))\b", 1) \
        if "error_str" in df.columns else pl.lit(None, pl.Utf8)
    cache_hit = pl.col("request_id").str.contains("_cache_hit", literal=True).fill_null(False) \
        | pl.col("cache_hit").str.to_lowercase().eq("true").fill_null(False)
    return df.with_columns(
        served.alias("model"),
        host_of(pl.col("api_base")).alias("deployment"),
        pl.when(cache_hit).then(None).otherwise(gateway_request_key(pl.col("request_id"))).alias("request_key"),
        pl.col("status").str.to_lowercase().replace({"success": "ok", "failure": "error"}).alias("status"),
        pl.coalesce(pl.col("error_class"), err_class).alias("error"),
        pl.col("error_code").str.extract(r"^(\d{3})$", 1).cast(pl.Int64, strict=False).alias("http_status"),
        *(pl.col(c).cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
          for c in ("prompt_tokens", "output_tokens", "cached_tokens", "max_tokens") if c in df.columns),
    )


def _with_times(df: pl.DataFrame, streamed: pl.Expr, out: ParseResult, lines: pl.DataFrame | None = None
                ) -> pl.DataFrame:
    """Parse start/end/first (text) into arrival/finished/first_token; rows whose times do not parse become
    errors (sampled from `lines` when given). `streamed` says where completionStartTime may be a first token."""
    names = (("start", "arrival"), ("end", "finished"), ("first", "first_token"))
    # `auto` evaluates its ISO-8601 branch on every row (`when` computes both); payload times are epoch
    # numbers, so when every value is one, the epoch reading alone gives the same times.
    epochs = df.select(pl.all_horizontal(pl.col(c).str.contains(NUMBER_RE).fill_null(True).all() for c, _ in names))
    conv = epoch if df.height == 0 or epochs.item() else parse_time
    df = df.with_columns(conv(pl.col(c)).alias(n) for c, n in names)
    bad = (pl.col("start").is_not_null() & pl.col("arrival").is_null()) \
        | (pl.col("end").is_not_null() & pl.col("finished").is_null()) \
        | (pl.col("arrival").is_null() & pl.col("finished").is_null())
    df = df.with_columns(bad.alias("bad"))
    bad_rows = df.filter("bad")
    sample = samples(lines, bad_rows) if lines is not None else bad_rows.select("line", "sample")
    reason = "startTime/endTime missing or not epoch seconds or YYYY-MM-DD HH:MM:SS text"
    out.add_errors(sample.with_columns(pl.lit(reason).alias("reason")))
    ft = pl.col("first_token")
    real = streamed & ft.is_not_null() & (ft < pl.col("finished")) & (ft >= pl.col("arrival"))
    return df.filter(~pl.col("bad")).with_columns(
        pl.when(real.fill_null(False)).then(ft).otherwise(None).alias("first_token"))


def _billed(df: pl.DataFrame, out: ParseResult, lines: pl.DataFrame | None = None) -> pl.DataFrame:
    """`cost` (text, the domain check reads it: a negative or absurd amount is an error there) null where
    LiteLLM had no price (`unpriced`: its cost calculation failed and it wrote 0.0) and where it is NaN,
    which the domain check would null silently: an error here, the rest of the row kept."""
    if "cost" not in df.columns:
        return df
    nan = pl.col("cost").cast(pl.Float64, strict=False).is_nan().fill_null(False)
    bad = df.filter(nan)
    if bad.height:
        sample = samples(lines, bad) if lines is not None else bad.select("line", "sample")
        out.add_errors(sample.with_columns(pl.lit("cost (response_cost / spend) is NaN, not an amount: cost "
                                                  "left unknown").alias("reason")))
    unpriced = pl.col("unpriced").is_not_null() if "unpriced" in df.columns else pl.lit(False)
    return df.with_columns(pl.when(nan | unpriced).then(None).otherwise(pl.col("cost")).alias("cost"))


def _payload_rows(lines: pl.DataFrame, out: ParseResult) -> pl.DataFrame | None:
    """StandardLoggingPayload records (line, text) -> requests rows."""
    recs, errors = json_records(lines, SLP_PATHS)
    out.add_errors(errors)
    # JSON lines that are not payloads (JSON-formatted app logs in the same stream) are noise.
    recs = recs.filter(pl.col("start").is_not_null() | pl.col("end").is_not_null() | pl.col("call_type").is_not_null())
    if recs.height == 0:
        return None
    stream = pl.col("stream").str.to_lowercase().eq("true")
    rows = _billed(_with_times(_common(recs), stream, out, lines), out, lines)
    return finish(rows.with_columns(stream.alias("stream")))


class LiteLLMPayload(Source):
    name = "litellm"
    kind = "gateway"
    description = "LiteLLM StandardLoggingPayload, one JSON object per line (custom callback, generic_api ndjson)"

    def sniff(self, head: str, path: str) -> float:
        line = first_json_line(head)
        if line is None:
            return 0.0
        try:
            rec = json.loads(line)
        except ValueError:
            # A payload line longer than the head: judge by the keys that come first.
            return 0.8 if all(f'"{k}"' in line for k in ("id", "call_type", "startTime")) else 0.0
        if not isinstance(rec, dict) or "startTime" not in rec or "request_id" in rec:
            return 0.0  # a SpendLogs row has request_id
        return 0.95 if len(_SLP_KEYS & rec.keys()) >= 2 else 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        out.add("requests", _payload_rows(lines, out))
        return out


class LiteLLMPayloadJSON(Source):
    name = "litellm_json"
    kind = "gateway"
    mode = "whole"
    description = "LiteLLM StandardLoggingPayloads as one JSON array (generic_api json_array) or one object"

    def sniff(self, head: str, path: str) -> float:
        s = head.lstrip("\ufeff").lstrip()
        # An array, or one pretty-printed object (a single-line object is NDJSON: `litellm`).
        if not (s.startswith("[") or s.startswith("{\n") or s.startswith("{\r\n")):
            return 0.0
        if '"startTime"' not in s or '"request_id"' in s[:2000]:
            return 0.0
        return 0.9 if sum(f'"{k}"' in s for k in _SLP_KEYS) >= 2 else 0.0

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        """The document in memory (tests, previews): the streamed batches merged into one result."""
        return merged(self.parse_document([data], ctx))

    def parse_document(self, pieces: Iterable[bytes], ctx: ParseContext) -> Iterator[ParseResult]:
        """The document streamed through ijson (the path the document wrappers use), in batches (DOC_BATCH
        records, DOC_BATCH_CHARS of text) to the vectorised parser: memory is bounded by a batch whatever the
        file's size. `line` is the
        1-based index of the record in the array (schema.PROVENANCE); a document that breaks off keeps the
        records before the break and reports it."""
        from attribution.wrappers import DocumentError, iter_items

        stray = StrayCommas()
        first, it = document_start(stray(pieces))
        # an array's items; else one object (an array of one), or several concatenated
        prefix = "item" if first.lstrip()[:1] == b"[" else ""
        texts: list[str] = []  # records as JSON text (dicts dropped as they come: the text is far smaller)
        size, line = 0, 1
        try:
            for items in iter_items(itertools.chain([first], it), prefix):
                for rec in items:
                    texts.append(json.dumps(rec, ensure_ascii=False, default=str))
                    size += len(texts[-1])
                    if len(texts) >= DOC_BATCH or size >= DOC_BATCH_CHARS:
                        yield self._batch(texts, line)
                        line += len(texts)
                        texts, size = [], 0
        except DocumentError as exc:
            out = self._batch(texts, line)
            out.add_errors(_file_error(line + len(texts), str(exc)))
            yield out
            return
        out = self._batch(texts, line)
        if stray.removed:
            out.add_errors(_file_error(1, f"{stray.removed} empty array element(s) (stray commas) ignored: "
                                          "every record kept"))
        yield out

    def _batch(self, texts: list[str], first_line: int) -> ParseResult:
        out = ParseResult()
        if not texts:
            return out
        # (records become JSON text again for the vectorised field extraction, a batch at a time)
        records = pl.DataFrame({
            "line": pl.int_range(first_line, first_line + len(texts), eager=True, dtype=pl.Int64),
            "text": texts,
        })
        out.records = doc_records(records, self.name)
        out.add("requests", _payload_rows(records, out))
        return out


def _spend_frame(data: bytes, line0: int = 0) -> pl.DataFrame:
    """The SpendLogs columns this source reads, as text (missing ones null), plus `line`: the physical line
    of a CSV record (quoted fields may hold newlines; `line0` physical lines of the file come before `data`'s
    records, after its header), the 1-based row of a Parquet file."""
    if data[:4] == b"PAR1":
        df = pl.read_parquet(io.BytesIO(data))
        conv = []
        for name, dtype in df.schema.items():
            if name not in _SPEND_COLS:
                continue  # messages, response, proxy_server_request, ... are never read
            c = pl.col(name)
            if isinstance(dtype, pl.Datetime):
                c = c.dt.replace_time_zone("UTC") if dtype.time_zone is None else c.dt.convert_time_zone("UTC")
                c = c.dt.strftime("%Y-%m-%d %H:%M:%S%.6f")
            elif isinstance(dtype, pl.Struct):
                c = c.struct.json_encode()  # metadata read back as a struct rather than JSON text
            conv.append(c.cast(pl.Utf8, strict=False).alias(name))
        df = df.select(conv).with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64, strict=False))
    else:
        df = pl.read_csv(io.BytesIO(data), infer_schema=False, encoding="utf8-lossy")
        newlines = pl.sum_horizontal(pl.col(c).str.count_matches("\n", literal=True).fill_null(0) for c in df.columns)
        start = (newlines + 1).cum_sum() - newlines + 1 + line0  # line 1 is the header
        df = df.select(start.cast(pl.Int64, strict=False).alias("line"), *(c for c in df.columns if c in _SPEND_COLS))
    return df.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in _SPEND_COLS if c not in df.columns)


class LiteLLMSpendLogs(Source):
    name = "litellm_spendlogs"
    kind = "gateway"
    mode = "whole"
    description = "LiteLLM_SpendLogs table exported as CSV (COPY ... CSV HEADER) or Parquet"

    def sniff(self, head: str, path: str) -> float:
        if head.startswith("PAR1"):
            # Column names live in the footer: seen only when the whole file fits in the head.
            if all(k in head for k in _SPEND_HEADER):
                return 0.9
            return 0.6 if "spend" in path.rsplit("/", 1)[-1].lower() else 0.0
        first = head.lstrip("\ufeff").split("\n", 1)[0]
        cols = {c.strip().strip('"') for c in first.split(",")}
        return 0.95 if set(_SPEND_HEADER) <= cols and "spend" in cols else 0.0

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        """A whole export in memory: a Parquet file (columnar: only the columns read are decoded), or a CSV."""
        return self._parse(_spend_frame(data), data.split(b"\n", 1)[0] if data[:4] != b"PAR1" else None)

    def parse_document(self, pieces: Iterable[bytes], ctx: ParseContext) -> Iterator[ParseResult]:
        """A CSV export streamed in batches of whole records (about SPEND_BATCH_BYTES each; a newline ends a
        record only outside quotes), so memory does not grow with the file; a Parquet file is read whole."""
        it = iter(pieces)
        buf = bytearray()
        for piece in it:
            buf += piece
            if len(buf) >= 4:
                break
        if buf[:4] == b"PAR1":
            buf += b"".join(it)
            yield self.parse_whole(bytes(buf), ctx)
            return
        header: bytes | None = None
        line0 = 0  # physical lines of the file before the batch's records, after the header
        for piece in itertools.chain([b""], it):
            buf += piece
            if header is None:
                nl = buf.find(b"\n")
                if nl < 0:
                    continue
                header, buf = bytes(buf[: nl + 1]), buf[nl + 1 :]
            while len(buf) >= SPEND_BATCH_BYTES and (cut := _record_end(buf, SPEND_BATCH_BYTES)) > 0:
                yield self._parse(_spend_frame(header + bytes(buf[:cut]), line0), header if line0 == 0 else None)
                line0 += buf.count(b"\n", 0, cut)
                del buf[:cut]
        if header is None:  # one line, no newline
            header, buf = bytes(buf), bytearray()
        if buf or line0 == 0:
            yield self._parse(_spend_frame(header + bytes(buf), line0), header if line0 == 0 else None)

    def _parse(self, df: pl.DataFrame, header: bytes | None) -> ParseResult:
        """Rows of a SpendLogs frame; `header`: the CSV's header line when `df` holds the file's first records."""
        out = ParseResult()
        # Census records: the export's rows (and a CSV's header line), named by request id, never by content.
        recs = df.select("line", pl.concat_str(pl.lit("request_id="), pl.col("request_id").fill_null("")).alias("text"))
        if header:
            head = header.split(b"\n", 1)[0].decode("utf-8", errors="replace").lstrip("\ufeff")
            recs = pl.concat([pl.DataFrame({"line": [1], "text": [head]}, schema=recs.schema), recs])
        out.records = doc_records(recs, self.name)
        if df.height and (df["request_id"].null_count() == df.height or df["startTime"].null_count() == df.height):
            out.add_errors(_file_error(1, "not a LiteLLM_SpendLogs export: no request_id or startTime values"))
            return out
        meta, bad_meta = json_records(df.select("line", pl.col("metadata").fill_null("").alias("text")), _META_PATHS)
        out.add_errors(bad_meta.with_columns(
            pl.lit("metadata is not valid JSON: key alias, team and cached tokens unknown").alias("reason")))
        df = df.join(meta.select("line", *(pl.col(c).alias(f"m_{c}") for c in _META_PATHS)), on="line", how="left")
        null = ["", "None", "null"]
        nz = {c: pl.when(pl.col(c).is_in(null)).then(None).otherwise(pl.col(c)).alias(c)
              for c in ("api_key", "user", "team_id", "api_base", "model", "custom_llm_provider", "model_group")}
        df = df.select(
            "line", "request_id", "status", "cache_hit", pl.col("m_cached_tokens").alias("cached_tokens"),
            pl.col("m_error_class").alias("error_class"), pl.col("m_error_code").alias("error_code"),
            pl.col("startTime").alias("start"), pl.col("endTime").alias("end"),
            pl.col("completionStartTime").alias("first"),
            nz["model"].alias("raw_model"), nz["custom_llm_provider"].alias("provider"), nz["api_base"],
            pl.col("prompt_tokens"), pl.col("completion_tokens").alias("output_tokens"),
            pl.coalesce(nz["api_key"], "m_key_hash").alias("key_hash"), pl.col("m_key_alias").alias("key_alias"),
            pl.coalesce("m_team", nz["team_id"]).alias("team"), pl.coalesce(nz["user"], "m_user").alias("user"),
            (pl.col("request_duration_ms").cast(pl.Float64, strict=False) / 1000).alias("e2e_ms_s"),
            nz["model_group"].alias("model_group"), pl.col("spend").alias("cost"),
            pl.concat_str(pl.lit("request_id="), pl.col("request_id")).alias("sample"),
        )
        df = _billed(_with_times(_common(df), pl.lit(True), out), out)
        # Times are exact to the microsecond; request_duration_ms only fills in where one is missing.
        secs = seconds_between(pl.col("arrival"), pl.col("finished"))
        out.add("requests", finish(df.with_columns(pl.coalesce(secs, "e2e_ms_s").alias("e2e_s"))))
        return out


SOURCES = [LiteLLMPayload(), LiteLLMPayloadJSON(), LiteLLMSpendLogs()]
