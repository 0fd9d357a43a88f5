"""Which engine histogram answers which question: the latency phases (TTFT, TPOT per request, ITL per
token, e2e, queue) and the length histograms of vLLM and SGLang, with what each engine measures. Names read
from the engines' source (vllm/v1/metrics/loggers.py, vllm/engine/metrics.py, sglang's metrics/collector.py;
the table with versions and sources is tests/test_prometheus_names.py)."""

from __future__ import annotations

# engine histogram (family name, no _bucket/_sum/_count) -> phase. `tpot` is per request (its decode time
# over its output tokens after the first, the same as the per-request rows' tpot_s); `itl` is per token
# (one observation per gap between two output tokens): the two are different distributions and never merged.
LATENCY: dict[str, str] = {
    "vllm:time_to_first_token_seconds": "ttft",
    "sglang:time_to_first_token_seconds": "ttft",
    "vllm:request_time_per_output_token_seconds": "tpot",  # V1 0.11+, per request
    "sglang:request_time_per_output_token_seconds": "tpot",  # 0.5.23+, per request
    "vllm:inter_token_latency_seconds": "itl",  # V1 0.11+, per token
    "vllm:time_per_output_token_seconds": "itl",  # V0 and V1 before 0.11: per token, despite its name
    "sglang:inter_token_latency_seconds": "itl",  # 0.4.6+, per token
    "sglang:time_per_output_token_seconds": "itl",  # 0.4.0-0.4.5, replaced by inter_token_latency_seconds
    "vllm:e2e_request_latency_seconds": "e2e",
    "sglang:e2e_request_latency_seconds": "e2e",
    "vllm:request_queue_time_seconds": "queue",
    "sglang:queue_time_seconds": "queue",  # 0.5.3+
}
PHASES = ("queue", "ttft", "tpot", "itl", "e2e")

# token-count histograms -> what they count
LENGTHS: dict[str, str] = {
    "vllm:request_prompt_tokens": "prompt",
    "sglang:prompt_tokens_histogram": "prompt",
    "vllm:request_generation_tokens": "output",
    "sglang:generation_tokens_histogram": "output",
}

# prefix-cache counters per engine: (hit tokens, looked-up tokens), preferred name first. vLLM V1 counts
# both in tokens (the deprecated gpu_* aliases carry the same counts: never added to the new ones; in 0.8,
# where only gpu_* exist, their help text says blocks: the ratio is still the hit rate).
# SGLang counts cached prompt tokens against every prompt token of its requests.
PREFIX_CACHE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "vllm": (("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
             ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
    "sglang": (("sglang:cached_tokens_total",), ("sglang:prompt_tokens_total",)),
}

LABEL = "bucket-interpolated"
DEFINITIONS = {
    "label": f"{LABEL}: from Prometheus histogram buckets, never from per-request rows; exact figures stand "
    "in their own columns",
    "increase": "growth of each cumulative series in the window as PromQL increase() reads a drop (a counter "
    "reset: the value after it counts whole), from the last sample before the window (else the first in it) to "
    "the last in it, without PromQL's extrapolation to the window edges: counts stay whole and adjacent "
    "windows add up",
    "value": "histogram_quantile with Prometheus semantics (promql/quantile.go bucketQuantile): linear "
    "interpolation inside the bucket holding rank q * count, 0 as the first bucket's lower bound, the last "
    "finite bound when the rank falls in the +Inf bucket; none without observations",
    "lo, hi": "the bucket edges around the answer: the observation of that rank lies in (lo, hi]; hi is "
    "inf when it fell in the +Inf bucket",
    "phase": "ttft: arrival to first token; tpot: per request, decode time over output tokens after the first "
    "(vllm/sglang request_time_per_output_token_seconds); itl: per token, each gap between two output tokens "
    "(vllm inter_token_latency_seconds, V0 / pre-0.11 time_per_output_token_seconds, sglang "
    "inter_token_latency_seconds); e2e: arrival to finish; queue: waiting before the first schedule",
    "observations": "the increase of the histogram's +Inf bucket: requests (tokens for itl) observed",
    "mean": "increase of _sum over increase of _count",
}
