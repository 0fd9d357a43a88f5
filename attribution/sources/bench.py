"""Client benchmark results with per-request lists: `vllm bench serve` / `benchmark_serving.py` result JSON
(`vllm_bench`; `--append-result` writes one run per line) and `sglang.bench_serving --output-file` JSONL
(`sglang_bench`, one run per line). Index-aligned lists (input_lens, output_lens, ttfts, itls, ...) become
one `requests` row per request; run summaries (means, percentiles, goodput) are not stored, and neither are
`generated_texts`. See section V-6 and S-5 of ../shared/formats/engine-logs.md.

Rows: `line` is the 1-based index of the request in the file (runs in file order), request_id is
`<format>-<file stem>-<run line>-<list index>` (run line = physical line of the run, list index 0-based).
Timing: e2e = `latencies[i]`, else ttft + sum(itls[i]); tpot = (e2e - ttft) / (output - 1) for output > 1,
as vLLM's benchmark defines it; a request is `failed` when its error is non-empty or its output length is 0,
and then carries no timings (the tools record 0.0 for them). Arrival = run start + (start_times[i] -
min(start_times)); without start_times (SGLang, vLLM <= 0.14) arrival is null. Run start = the run's `date`
minus `duration` (see `_vllm_run_start`); `--start` moves the first run there and the others with it; a run
without `date` starts at `--start`, else `DEFAULT_TRACE_START`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import polars as pl

from attribution.census import doc_records
from attribution.privacy import redact_expr
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.traces import after_start, file_stem, trace_start

if TYPE_CHECKING:
    from attribution.schema import PolarsType

# Per-request lists we read, with their element types. Anything else (generated_texts) is never touched.
_LISTS: dict[str, PolarsType] = {
    "input_lens": pl.Int64,
    "output_lens": pl.Int64,
    "ttfts": pl.Float64,
    "itls": pl.List(pl.Float64),
    "latencies": pl.Float64,
    "start_times": pl.Float64,
    "errors": pl.Utf8,
    "server_queue_times": pl.Float64,  # vLLM 0.33: the server's own queue time
    "cached_tokens": pl.Int64,  # SGLang --cache-report
}
_ROW_KEYS = ("input_lens", "output_lens", "ttfts")


def split_documents(text: str) -> pl.DataFrame:
    """`line`, `text`: one row per JSON document. A file whose first non-empty line is a whole one-line object
    is NDJSON (a row per non-empty line, keeping its physical line number, so a truncated line is one bad
    document); anything else (pretty-printed JSON) is one document at its first line."""
    text = text.lstrip("\ufeff")
    lines = pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1)
    lines = lines.with_columns(pl.col("line").cast(pl.Int64, strict=False), pl.col("text").str.strip_chars())
    lines = lines.filter(pl.col("text").str.len_bytes() > 0)
    if lines.height == 0:
        return lines
    first = lines["text"][0]
    if first.startswith("{") and first.endswith("}"):
        return lines
    return pl.DataFrame(
        {"line": [int(lines["line"][0])], "text": [text]}, schema={"line": pl.Int64, "text": pl.Utf8}
    )


def _runs(data: bytes, out: ParseResult, source: str) -> list[tuple[int, dict]]:
    """The run objects of a file, in order; unreadable documents become errors. Each document is a record of
    the line census."""
    runs: list[tuple[int, dict]] = []
    docs = split_documents(data.decode("utf-8", errors="replace"))
    out.records = doc_records(docs, source)
    for line, text in docs.iter_rows():
        try:
            obj = json.loads(text)
        except ValueError as exc:  # (also an integer too long to convert, which is no JSONDecodeError)
            _run_error(out, line, f"not valid JSON: {exc.msg if isinstance(exc, json.JSONDecodeError) else exc}")
            continue
        for o in obj if isinstance(obj, list) else [obj]:
            if isinstance(o, dict):
                runs.append((line, o))
            else:
                _run_error(out, line, "a benchmark result must be a JSON object")
    return runs


def _run_error(out: ParseResult, line: int, reason: str) -> None:
    # No sample: a run object can hold generated texts, which are never stored.
    schema = {"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}
    out.add_errors(pl.DataFrame({"line": [line], "reason": [reason], "sample": [None]}, schema=schema))


def _request_frame(run: dict, line: int, out: ParseResult) -> pl.DataFrame | None:
    """The per-request lists of one run as columns, or None when the run has none (saved without
    --save-detailed / --output-details) or they are unusable (an error is recorded)."""
    present = {k: run[k] for k in _LISTS if isinstance(run.get(k), list)}
    if not any(k in present for k in _ROW_KEYS):
        return None
    lengths = {k: len(v) for k, v in present.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        _run_error(out, line, f"per-request lists differ in length ({detail})")
        return None
    try:
        return pl.DataFrame([pl.Series(k, v, dtype=_LISTS[k], strict=False) for k, v in present.items()])
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        _run_error(out, line, f"per-request lists are malformed: {exc}"[:200])
        return None


def _rows(
    df: pl.DataFrame,
    *,
    prefix: str,
    stem: str,
    run_line: int,
    first_seq: int,
    model: str | None,
    anchor: datetime | None,
) -> pl.DataFrame:
    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in df.columns else pl.lit(None, _LISTS[name])

    err = col("errors").str.strip_chars()
    failed = (err.str.len_chars() > 0).fill_null(False) | (col("output_lens") == 0).fill_null(False)
    ttft = pl.when(~failed).then(col("ttfts"))
    e2e = pl.when(~failed).then(
        pl.coalesce(
            pl.when(col("latencies") > 0).then(col("latencies")), col("ttfts") + col("itls").list.sum()
        )
    )
    out_n = col("output_lens")
    frame = df.select(
        pl.format(
            "{}-{}-{}-{}", pl.lit(prefix), pl.lit(stem), pl.lit(run_line), pl.int_range(pl.len())
        ).alias("request_id"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + first_seq).alias("line"),
        pl.lit(model, pl.Utf8).alias("model"),
        col("input_lens").alias("prompt_tokens"),
        out_n.alias("output_tokens"),
        col("cached_tokens").alias("cached_tokens"),
        pl.when(~failed).then(col("server_queue_times")).alias("queue_s"),
        ttft.alias("ttft_s"),
        e2e.alias("e2e_s"),
        pl.when(out_n > 1).then((e2e - ttft) / (out_n - 1)).alias("tpot_s"),
        pl.when(failed).then(pl.lit("failed")).otherwise(pl.lit("ok")).alias("status"),
        pl.when(failed & (err.str.len_chars() > 0)).then(redact_expr(err)).alias("error"),
        # start_times are time.perf_counter() values: only their differences mean anything.
        (col("start_times") - col("start_times").min()).alias("offset_s"),
    )
    if anchor is None or "start_times" not in df.columns:
        arrival = pl.lit(None, pl.Datetime("us", "UTC"))
        return frame.with_columns(arrival.alias("arrival")).drop("offset_s")
    return frame.with_columns(
        after_start(anchor, pl.col("offset_s")).alias("arrival"),
        after_start(anchor, pl.col("offset_s") + pl.col("ttft_s")).alias("first_token"),
        after_start(anchor, pl.col("offset_s") + pl.col("e2e_s")).alias("finished"),
    ).drop("offset_s")


def _vllm_run_start(run: dict, ctx: ParseContext) -> datetime | None:
    """`date` is taken after the benchmark finished (vllm/benchmarks/serve.py), in the client's local time
    and to the second, so the run began about `duration` seconds earlier."""
    raw = run.get("date")
    if not isinstance(raw, str):
        return None
    try:
        end = datetime.strptime(raw, "%Y%m%d-%H%M%S").replace(tzinfo=ZoneInfo(ctx.tz))
    except ValueError:
        return None
    dur = run.get("duration")
    try:
        return end - timedelta(seconds=float(dur)) if isinstance(dur, int | float) and dur >= 0 else end
    except (OverflowError, ValueError):  # a duration no calendar holds (1e300 s): the start is unknown
        return None


class VllmBench(Source):
    name = "vllm_bench"
    kind = "bench"
    mode = "whole"
    description = (
        "vllm bench serve / benchmark_serving.py result JSON (also --append-result, one run per line)"
    )

    def sniff(self, head: str, path: str) -> float:
        h = head.lstrip("\ufeff").lstrip()
        if not h.startswith(("{", "[")):
            return 0.0
        # `tokenizer_id` is written by every version (old script and `vllm bench serve`), SGLang never does.
        if '"tokenizer_id"' in h and ('"date"' in h or '"num_prompts"' in h):
            return 0.9
        if '"request_goodput:"' in h:
            return 0.9
        return 0.0

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        runs = _runs(data, out, self.name)
        starts = [_vllm_run_start(run, ctx) for _, run in runs]
        # --start names when the first run began; later runs keep their spacing from their `date` keys.
        known = [s for s in starts if s is not None]
        if "start" in ctx.options or not known:
            start = trace_start(ctx)
            shift = start - known[0] if known else None
            starts = [s + shift if s is not None and shift is not None else start for s in starts]
        stem, seq = file_stem(ctx.path), 1
        for (line, run), anchor in zip(runs, starts, strict=True):
            df = _request_frame(run, line, out)
            if df is None:
                continue
            model = run.get("model_id") if isinstance(run.get("model_id"), str) else None
            out.add(
                "requests",
                _rows(
                    df,
                    prefix="vllm-bench",
                    stem=stem,
                    run_line=line,
                    first_seq=seq,
                    model=model,
                    anchor=anchor,
                ),
            )
            seq += df.height
        return out


class SglangBench(Source):
    name = "sglang_bench"
    kind = "bench"
    mode = "whole"
    description = "sglang.bench_serving --output-file JSONL (per-request rows need --output-details)"

    def sniff(self, head: str, path: str) -> float:
        h = head.lstrip("\ufeff").lstrip()
        if not h.startswith("{") or '"tokenizer_id"' in h:
            return 0.0
        return 0.9 if '"total_output_tokens_retokenized"' in h else 0.0

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        stem, seq = file_stem(ctx.path), 1
        for line, run in _runs(data, out, self.name):
            df = _request_frame(run, line, out)
            if df is None:
                continue
            info = run.get("server_info")
            model = run.get("model_id") or (info.get("model_path") if isinstance(info, dict) else None)
            # SGLang saves no per-request send times, so arrivals are unknown (null).
            out.add(
                "requests",
                _rows(
                    df,
                    prefix="sglang-bench",
                    stem=stem,
                    run_line=line,
                    first_seq=seq,
                    model=model if isinstance(model, str) else None,
                    anchor=None,
                ),
            )
            seq += df.height
        return out


SOURCES = [VllmBench(), SglangBench()]
