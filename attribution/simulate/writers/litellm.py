"""Render a SimResult's requests as LiteLLM StandardLoggingPayload NDJSON (gateway-logs.md 1.1), one object
per request, as a custom callback or the generic_api `ndjson` sink writes them.

`id` is the engine's response id (vLLM `chatcmpl-<16 hex>`, SGLang rid), so a gateway row joins the engine
row of the same request. Keys are never written: `user_api_key_hash` is the sha256 of a stand-in key per
alias; messages and responses are omitted. The gateway adds a little latency on both sides of the engine.
`response_cost` is what LiteLLM computes for a model with custom pricing (the scenario's `[pricing]`):
(prompt - cached) x input_cost_per_token + cached x cache_read_input_token_cost (0 when not set) + output x
output_cost_per_token; without a price LiteLLM writes 0.0 and `response_cost_failure_debug_info`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from attribution.privacy import hash_key
from attribution.simulate.result import SimResult
from attribution.simulate.writers.common import fake_key, seconds, write_lines

GATEWAY_IN_S, GATEWAY_OUT_S = 0.004, 0.002  # proxy overhead before the engine sees / after it answers


def priced(result: SimResult) -> SimResult:
    """`result` with each request's `response_cost` (USD, null where the scenario has no price), computed as
    LiteLLM's generic_cost_per_token does: cached prompt tokens are billed at the cache-read rate."""
    if "response_cost" in result.requests.columns:
        return result
    p = result.scenario.pricing
    cached = pl.col("cached_tokens").fill_null(0)
    cost = pl.lit(None, pl.Float64) if p is None else (
        (pl.col("prompt_tokens") - cached) * p.input_cost_per_token + cached * p.cache_read_input_token_cost
        + pl.col("output_tokens") * p.output_cost_per_token)
    return replace(result, requests=result.requests.with_columns(cost.cast(pl.Float64).alias("response_cost")))


def write_litellm(result: SimResult, path: str | Path) -> Path:
    """Write every request of `result` to `path` (`.jsonl` or `.jsonl.gz`), ordered by end time; the cost
    from a `response_cost` column (see `priced`: several scenarios behind one gateway), else `result`'s price."""
    epoch = result.scenario.start.timestamp()
    req = priced(result).requests
    aliases = req["key_alias"].unique().to_list()
    hashes = {a: hash_key(fake_key(a)) for a in aliases}
    start = seconds(result, "arrival") + epoch - GATEWAY_IN_S
    end = seconds(result, "finished") + epoch + GATEWAY_OUT_S
    first = seconds(result, "first_token") + epoch + GATEWAY_OUT_S
    provider = pl.when(pl.col("engine") == "sglang").then(pl.lit("openai")).otherwise(pl.lit("hosted_vllm"))
    unpriced = pl.col("response_cost").is_null()
    failure = pl.when(unpriced).then(pl.struct(  # the cost calculator's exception for an unmapped model
        pl.concat_str(pl.lit("This model isn't mapped yet. model="), "model", pl.lit(", custom_llm_provider="),
                      provider, pl.lit(".")).alias("error_str"),
        pl.lit("").alias("traceback_str"),
        pl.col("model").alias("model"),
        provider.alias("custom_llm_provider"),
        pl.lit("acompletion").alias("call_type"),
        pl.lit(False).alias("custom_pricing"),
    ))
    api_base = pl.concat_str(pl.lit("http://"), "deployment", pl.lit(":8000/v1"))
    usage = pl.struct(
        pl.col("output_tokens").alias("completion_tokens"),
        pl.col("prompt_tokens").alias("prompt_tokens"),
        (pl.col("prompt_tokens") + pl.col("output_tokens")).alias("total_tokens"),
        pl.struct(pl.col("cached_tokens").alias("cached_tokens")).alias("prompt_tokens_details"),
    )
    metadata = pl.struct(
        pl.col("key_alias").replace_strict(hashes).alias("user_api_key_hash"),
        pl.col("key_alias").alias("user_api_key_alias"),
        pl.concat_str(pl.lit("team-"), "team").alias("user_api_key_team_id"),
        pl.col("team").alias("user_api_key_team_alias"),
        pl.lit(None, pl.Utf8).alias("user_api_key_user_id"),
        pl.lit(None, pl.Utf8).alias("user_api_key_org_id"),
        pl.lit(None, pl.Utf8).alias("requester_ip_address"),
        usage.alias("usage_object"),
    )
    payload = pl.struct(
        pl.col("request_id").alias("id"),
        pl.concat_str(pl.lit("trace-"), pl.col("request_id").str.slice(-12)).alias("trace_id"),
        pl.lit("acompletion").alias("call_type"),
        pl.lit(True).alias("stream"),
        pl.lit("success").alias("status"),
        provider.alias("custom_llm_provider"),
        (pl.col("prompt_tokens") + pl.col("output_tokens")).alias("total_tokens"),
        pl.col("prompt_tokens"),
        pl.col("output_tokens").alias("completion_tokens"),
        start.alias("startTime"),
        end.alias("endTime"),
        first.alias("completionStartTime"),
        (end - start).alias("response_time"),
        pl.col("response_cost").fill_null(0.0).alias("response_cost"),  # LiteLLM: `raw cost or 0.0`
        pl.concat_str(provider, pl.lit("/"), "model").alias("model"),
        pl.col("deployment").alias("model_id"),
        pl.col("model").alias("model_group"),
        api_base.alias("api_base"),
        metadata.alias("metadata"),
        pl.lit(None, pl.Boolean).alias("cache_hit"),
        pl.lit("").alias("end_user"),
        pl.struct(pl.col("max_tokens"), pl.lit(True).alias("stream")).alias("model_parameters"),
        pl.struct(api_base.alias("api_base"), pl.col("model").alias("litellm_model_name"),
                  pl.col("response_cost")).alias("hidden_params"),
        pl.lit(None, pl.Utf8).alias("error_str"),
        failure.alias("response_cost_failure_debug_info"),
    )
    lines = req.select(end.alias("t"), pl.lit(0).alias("order"), payload.struct.json_encode().alias("text"))
    return write_lines(lines, Path(path))
