"""The canonical tables: names, columns, types and units (a contract, see ../shared/DESIGN.md).

Parsers emit Polars frames holding any subset of a table's columns; `conform` adds the missing ones as
nulls and casts to the canonical types, so every Parquet file of a table has the same schema.
Units: durations in seconds, usages and rates as fractions 0-1, token counts as Int64, timestamps UTC.
`DOMAINS` says which values each numeric column admits (checked at the ingest, see attribution.domains).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

import polars as pl
from polars.datatypes import DataTypeClass

TS = pl.Datetime("us", "UTC")
# A dtype as the code writes it: an instance (pl.List(pl.Utf8), TS) or the class itself (pl.Utf8).
PolarsType = pl.DataType | DataTypeClass

# Columns every stored row carries; the ingest fills them, parsers do not have to.
PROVENANCE: dict[str, PolarsType] = {
    "source": pl.Utf8,  # format name: vllm_log, sglang_log, litellm, azure_trace, ...
    "source_kind": pl.Utf8,  # engine / gateway / trace / bench
    "file": pl.Utf8,  # path as ingested
    "line": pl.Int64,  # 1-based physical line in the (decompressed) file; record index for JSON arrays
    "deployment": pl.Utf8,
    "label": pl.Utf8,
}

REQUESTS: dict[str, PolarsType] = {
    "request_id": pl.Utf8,
    "request_key": pl.Utf8,  # normalised join key, see attribution.keys.request_key
    **PROVENANCE,
    "engine": pl.Utf8,
    "engine_version": pl.Utf8,
    "model": pl.Utf8,
    "workload": pl.Utf8,
    "key_alias": pl.Utf8,
    "key_hash": pl.Utf8,  # sha256 hex of the API key, never the key
    "team": pl.Utf8,
    "user": pl.Utf8,
    "arrival": TS,
    "first_token": TS,
    "finished": TS,
    "queue_s": pl.Float64,
    "ttft_s": pl.Float64,
    "tpot_s": pl.Float64,
    "e2e_s": pl.Float64,
    "prefill_s": pl.Float64,
    "decode_s": pl.Float64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "max_tokens": pl.Int64,
    "stream": pl.Boolean,
    "status": pl.Utf8,  # ok / error / aborted / failed / received
    "http_status": pl.Int64,
    "finish_reason": pl.Utf8,
    "error": pl.Utf8,
    "block_hashes": pl.List(pl.Int64),
    "cost": pl.Float64,  # what the gateway billed for the request, USD (LiteLLM `response_cost` / `spend`)
}

# Events that complete a request row of the same source (vLLM `Added`, `Finished`, `Aborted` lines).
# The `requests` view folds them into the request they name.
REQUEST_EVENTS: dict[str, PolarsType] = {
    "request_id": pl.Utf8,
    "request_key": pl.Utf8,
    **PROVENANCE,
    "ts": TS,
    "event": pl.Utf8,  # received / added / finished / aborted
}

ENGINE_STEPS: dict[str, PolarsType] = {
    "ts": TS,
    **PROVENANCE,
    "engine": pl.Utf8,
    "engine_index": pl.Int64,  # vLLM `Engine 000`, SGLang DP rank
    # stats / prefill / decode / iteration / scrape (a Prometheus gauge sample, at the scrape interval); vLLM also spec_decode (a SpecDecoding metrics line) and prefix_cache
    # (a V0 `Prefix cache hit rate: GPU/CPU` line that could not be merged into its stats row because the
    # two lines fell into different chunks; no stats interval counts it)
    "kind": pl.Utf8,
    "running": pl.Int64,
    "waiting": pl.Int64,
    "swapped": pl.Int64,
    "preemptions": pl.Int64,
    "kv_usage": pl.Float64,  # fraction 0-1 (full-attention pool for hybrid SGLang)
    "cpu_kv_usage": pl.Float64,
    "swa_usage": pl.Float64,
    "state_usage": pl.Float64,  # hybrid `mamba usage`, fraction 0-1
    "state_slots": pl.Int64,  # hybrid `mamba num`
    "prefix_hit_rate": pl.Float64,  # fraction 0-1
    "cpu_prefix_hit_rate": pl.Float64,  # fraction 0-1 (vLLM V0 CPU prefix cache)
    "prompt_tput": pl.Float64,  # tokens/s
    "gen_tput": pl.Float64,  # tokens/s
    "new_seqs": pl.Int64,
    "new_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "batch_tokens": pl.Int64,  # tokens processed in the step (vLLM iteration context + generation tokens)
    "kv_tokens": pl.Int64,  # KV tokens in use (SGLang `#token` / `#full token`)
    "pending_tokens": pl.Int64,
    "accept_len": pl.Float64,  # mean acceptance length (speculative decoding, bonus token included)
    "spec_accepted_tokens": pl.Int64,  # draft tokens accepted in the interval
    "spec_drafted_tokens": pl.Int64,  # draft tokens proposed in the interval
    "spec_accept_rate": pl.Float64,  # accepted / drafted, fraction 0-1
    "spec_accepted_tput": pl.Float64,  # tokens/s
    "spec_drafted_tput": pl.Float64,  # tokens/s
    "spec_position_rates": pl.List(pl.Float64),  # acceptance rate per draft position, fractions 0-1
    "elapsed_s": pl.Float64,  # vLLM iteration elapsed time
    "cuda_graph": pl.Boolean,
}

# Stored as partial rows, one per startup line that carries a fact; `start_line` names the engine start
# (the line that began it) and the `engine_config` view folds the partial rows into one row per start.
ENGINE_CONFIG: dict[str, PolarsType] = {
    "start_line": pl.Int64,
    "ts": TS,
    **PROVENANCE,
    "engine": pl.Utf8,
    "version": pl.Utf8,
    "model": pl.Utf8,
    "served_model": pl.Utf8,
    "flags": pl.List(pl.Struct({"key": pl.Utf8, "value": pl.Utf8})),  # MAP(VARCHAR, VARCHAR) in the view
    "kv_pool_tokens": pl.Int64,
    "kv_pool_bytes": pl.Int64,
    "state_pool_slots": pl.Int64,
    "state_pool_bytes": pl.Int64,
    "available_kv_bytes": pl.Int64,
    "max_concurrency": pl.Float64,
    "max_running_requests": pl.Int64,
    "max_model_len": pl.Int64,
    "block_size": pl.Int64,
    "mamba_page_padding": pl.Float64,  # fraction
    "chunked_prefill_size": pl.Int64,
    "max_prefill_tokens": pl.Int64,
    "available_gpu_mem_bytes": pl.Int64,
    "weights_bytes": pl.Int64,
    "tp_size": pl.Int64,
}

# Prometheus / OpenMetrics histograms (vLLM `vllm:*`, SGLang `sglang:*`), one row per sample of one series:
# the `_bucket{le=...}` samples (cumulative counts, as exposed), `_sum` and `_count`. Values are the raw
# counter values; increases over a window (with counter resets, as PromQL `increase()`) are the analyses' job.
METRIC_HISTOGRAMS: dict[str, PolarsType] = {
    "ts": TS,  # the sample's time (API export), the OpenMetrics timestamp, or the snapshot's scrape time
    **PROVENANCE,
    "engine": pl.Utf8,  # vllm / sglang (from the metric's namespace)
    "model": pl.Utf8,  # `model_name` label
    "metric": pl.Utf8,  # the family name without `_bucket`/`_sum`/`_count`: vllm:time_to_first_token_seconds
    "series": pl.Utf8,  # the other labels (not le, deployment, model), sorted `k=v` joined by `,`; "" if none
    "part": pl.Utf8,  # bucket / sum / count
    "le": pl.Float64,  # the bucket's upper bound (inf for `+Inf`); null for sum and count
    "value": pl.Float64,  # cumulative count (bucket, count) or sum, as exposed
}

# Prometheus counters (`*_total`, OpenMetrics `counter` families): raw values, resets handled by the analyses.
METRIC_COUNTERS: dict[str, PolarsType] = {
    "ts": TS,
    **PROVENANCE,
    "engine": pl.Utf8,
    "model": pl.Utf8,
    "metric": pl.Utf8,  # the name as exposed, `_total` included: vllm:prefix_cache_hits_total
    "series": pl.Utf8,
    "value": pl.Float64,
}

# uvicorn / SGLang HTTP access lines seen in engine logs (status codes per deployment).
ACCESS_LOG: dict[str, PolarsType] = {
    "ts": TS,  # nearest earlier timestamped line: uvicorn access lines carry none
    **PROVENANCE,
    "client": pl.Utf8,
    "method": pl.Utf8,
    "path": pl.Utf8,
    "http_status": pl.Int64,
}

INGEST_ERRORS: dict[str, PolarsType] = {
    "file": pl.Utf8,
    "line": pl.Int64,
    "source": pl.Utf8,
    "reason": pl.Utf8,
    "sample": pl.Utf8,  # short and redacted: never a prompt or a key
}

# The line census of each file (attribution.census): lines that made rows (one `parsed` row, no shape) and
# lines that made none, per class, reason and shape. Stored per chunk; the public view sums them per file.
INGEST_LINE_SHAPES: dict[str, PolarsType] = {
    "file": pl.Utf8,
    "source": pl.Utf8,  # the format whose rules classed the lines (a wrapped file's inner format)
    "class": pl.Utf8,  # parsed / skipped / unrecognised
    "reason": pl.Utf8,  # why skipped: a skip rule's name, or `malformed: <the ingest_errors reason>`
    "shape": pl.Utf8,  # the line with numbers, ids, hex, IPs and quoted strings masked
    "lines": pl.Int64,  # lines (records, for wrapped and document files) of this shape
    "first_line": pl.Int64,
    "sample": pl.Utf8,  # the first such line, quoted strings masked and keys redacted: never a prompt or a key
}

TABLES: dict[str, dict[str, PolarsType]] = {
    "requests": REQUESTS,
    "request_events": REQUEST_EVENTS,
    "engine_steps": ENGINE_STEPS,
    "engine_config": ENGINE_CONFIG,
    "access_log": ACCESS_LOG,
    "metric_histograms": METRIC_HISTOGRAMS,
    "metric_counters": METRIC_COUNTERS,
    "ingest_errors": INGEST_ERRORS,
    "ingest_line_shapes": INGEST_LINE_SHAPES,
}
# Tables the ingest writes about the input itself: not rows of the data, not written by sources.
META_TABLES = ("ingest_errors", "ingest_line_shapes")


# -- domains: what a stored value may be (attribution.domains checks every parsed value against them) ------

@dataclass(frozen=True)
class Domain:
    """The admissible values of a numeric column: `lo` <= value <= `hi`, whole numbers when `integral`."""

    lo: float
    hi: float
    integral: bool = False
    what: str = ""  # for messages: "a count", "a fraction 0-1", ...


# Counts stop at 2^53: every count is then exact as a float (the analyses compute in floats) and a sum of a
# thousand of them still fits in int64; no log counts 9e15 tokens or requests.
COUNT_MAX = float(2**53 - 1)
COUNT = Domain(0, COUNT_MAX, True, "a count 0-2^53")
FRACTION = Domain(0.0, 1.0, False, "a fraction 0-1")
SECONDS = Domain(0.0, 10 * 366 * 86400.0, False, "a duration of 0-10 years in seconds")
RATE = Domain(0.0, 1e12, False, "a rate 0-1e12 per second")
# Timestamps: from TS_MIN to the ingest's clock plus `max_future` (config.py), checked with the clock.
TS_MIN = datetime(2015, 1, 1, tzinfo=UTC)

DOMAINS: dict[str, Domain] = {
    **dict.fromkeys(("queue_s", "ttft_s", "tpot_s", "e2e_s", "prefill_s", "decode_s", "elapsed_s"), SECONDS),
    **dict.fromkeys(("prompt_tokens", "output_tokens", "cached_tokens", "max_tokens", "running", "waiting",
                     "swapped", "preemptions", "state_slots", "new_seqs", "new_tokens", "batch_tokens",
                     "kv_tokens", "pending_tokens", "spec_accepted_tokens", "spec_drafted_tokens",
                     "kv_pool_tokens", "kv_pool_bytes", "state_pool_slots", "state_pool_bytes",
                     "available_kv_bytes", "max_running_requests", "max_model_len", "block_size",
                     "chunked_prefill_size", "max_prefill_tokens", "available_gpu_mem_bytes", "weights_bytes",
                     "tp_size", "engine_index", "start_line"), COUNT),
    **dict.fromkeys(("kv_usage", "cpu_kv_usage", "swa_usage", "state_usage", "prefix_hit_rate",
                     "cpu_prefix_hit_rate", "spec_accept_rate", "mamba_page_padding"), FRACTION),
    **dict.fromkeys(("prompt_tput", "gen_tput", "spec_accepted_tput", "spec_drafted_tput"), RATE),
    "accept_len": Domain(0.0, 1e6, False, "a mean length 0-1e6"),
    "max_concurrency": Domain(0.0, COUNT_MAX, False, "a number of requests 0-2^53"),
    "http_status": Domain(0, 999, True, "an HTTP status 0-999"),
    "cost": Domain(0.0, 1e9, False, "an amount of 0-1e9 USD"),
    "value": Domain(0.0, 1e18, False, "a counter value 0-1e18"),
    "le": Domain(0.0, float("inf"), False, "a bucket bound 0-+Inf"),
}


def domain_of(table: str, column: str) -> Domain | str | None:
    """A column's domain: a Domain, "ts" for a timestamp (bounded by the ingest's clock), None: unchecked
    (text, booleans, provenance, lists other than per-position rates)."""
    if column in PROVENANCE:
        return None
    dtype = TABLES[table].get(column)
    if dtype == TS:
        return "ts"
    if column == "spec_position_rates":
        return FRACTION
    return DOMAINS.get(column)


def conform(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """Return `df` with exactly the columns of `table`, in order, cast to their canonical types.

    Unknown columns are an error in the parser (a typo would silently drop data), not in the input.
    """
    return df.select(_conforming(table, tuple(df.columns)))


@lru_cache(maxsize=512)
def _conforming(table: str, columns: tuple[str, ...]) -> list[pl.Expr]:
    """conform's expressions for a frame of `columns` (kept: building them costs ~1 ms a call in Python, and the
    ingest conforms every table of every chunk, a process parsing many small files the same columns each time)."""
    schema = TABLES[table]
    unknown = set(columns) - set(schema)
    if unknown:
        raise ValueError(f"parser produced unknown columns for {table}: {sorted(unknown)}")
    exprs = []
    for name, dtype in schema.items():
        if name in columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return exprs


def empty(table: str) -> pl.DataFrame:
    """A table with no rows (a new frame each call; building one from the schema costs ~0.1 ms a table)."""
    return _EMPTY[table].clear()


_EMPTY = {name: pl.DataFrame(schema=schema) for name, schema in TABLES.items()}
