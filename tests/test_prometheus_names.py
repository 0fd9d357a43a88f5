"""Issue 18: every engine metric name we read, checked against the engines' source (read from source, not from
docs): vLLM vllm/v1/metrics/loggers.py (`PrometheusStatLogger.__init__`) at three versions and V0's
vllm/engine/metrics.py (`Metrics.__init__`); SGLang python/sglang/srt/metrics/collector.py
(`SchedulerMetricsCollector`, `TokenizerMetricsCollector`). Commits are those of the stored snapshots the
table was read from (the whole repositories were too large to fetch, so no line numbers: the class and the
section of the file are named instead). Also the bucket edges the simulator writes, and SGLang's per-TP-rank
series under --enable-metrics-for-all-schedulers."""

from __future__ import annotations

from pathlib import Path

import pytest

from attribution.histograms.catalogue import LATENCY, LENGTHS, PREFIX_CACHE
from attribution.ingest import parse_path
from attribution.simulate.writers import prometheus as sim
from attribution.sources.prom_common import ENGINE_INDEX_LABELS, GAUGES

V1_08 = "vllm/v1/metrics/loggers.py @a6f0308 (0.8.x: gpu_* names only, prefix counters in blocks)"
V1_010 = "vllm/v1/metrics/loggers.py @005a810 (0.10: gpu_* deprecated in 0.9, renamed)"
V1_NEW = "vllm/v1/metrics/loggers.py, newest stored (0.12+: time_per_output_token hidden, gpu_* gone)"
V0 = "vllm/engine/metrics.py @00c33e8 (V0 `Metrics`)"
SGL = "python/sglang/srt/metrics/collector.py @00ae9c1"
SGL_OLD = "an early SGLang collector.py (`PrometheusMetricsCollector` over `Stats`)"

# (name as exposed, where we use it, engine versions, source). Read from source; "where" is checked below.
NAMES = [
    ("vllm:num_requests_running", "gauge running", "V0, V1 0.8+", f"{V0}; {V1_NEW} 'Scheduler state'"),
    ("vllm:num_requests_waiting", "gauge waiting", "V0, V1 0.8+", f"{V0}; {V1_NEW} 'Scheduler state'"),
    ("vllm:num_requests_swapped", "gauge swapped", "V0 only", V0),
    ("vllm:gpu_cache_usage_perc", "gauge kv_usage", "V0, V1 up to 0.10", f"{V0}; {V1_010} 'GPU cache'"),
    ("vllm:kv_cache_usage_perc", "gauge kv_usage", "V1 0.9+", f"{V1_010}; {V1_NEW}"),
    ("vllm:cpu_cache_usage_perc", "gauge cpu_kv_usage", "V0", V0),
    ("vllm:gpu_prefix_cache_hit_rate", "gauge prefix_hit_rate", "V0 0.5-0.7 (deprecated 0.8)",
     "vllm/engine/metrics.py (V0, 'Prefix caching block hit rate')"),
    ("vllm:gpu_prefix_cache_queries_total", "prefix looked-up alias", "V1 0.8-0.10", f"{V1_08}; {V1_010}"),
    ("vllm:gpu_prefix_cache_hits_total", "prefix hit alias", "V1 0.8-0.10", f"{V1_08}; {V1_010}"),
    ("vllm:prefix_cache_queries_total", "prefix looked-up", "V1 0.9+", f"{V1_010}; {V1_NEW}"),
    ("vllm:prefix_cache_hits_total", "prefix hit", "V1 0.9+", f"{V1_010}; {V1_NEW}"),
    ("vllm:time_to_first_token_seconds", "latency ttft", "V0, V1", f"{V0}; {V1_NEW} 'timing intervals'"),
    ("vllm:time_per_output_token_seconds", "latency itl", "V0, V1 to 0.10 (hidden 0.11-0.12)",
     f"{V0}; {V1_NEW}: 'Deprecated in 0.11 - Renamed as vllm:inter_token_latency_seconds', observed per "
     "inter-token gap"),
    ("vllm:inter_token_latency_seconds", "latency itl", "V1 0.11+", V1_NEW),
    ("vllm:request_time_per_output_token_seconds", "latency tpot", "V1 0.11+ (not in 0.10)",
     f"{V1_NEW}: observes finished_request.mean_time_per_output_token"),
    ("vllm:e2e_request_latency_seconds", "latency e2e", "V0, V1", f"{V0}; {V1_NEW}"),
    ("vllm:request_queue_time_seconds", "latency queue", "V1 0.8+", f"{V1_08}; {V1_NEW}"),
    ("vllm:request_prompt_tokens", "length prompt", "V0, V1", f"{V0}; {V1_NEW} 'Histograms of counts'"),
    ("vllm:request_generation_tokens", "length output", "V0, V1", f"{V0}; {V1_NEW} 'Histograms of counts'"),
    ("sglang:num_running_reqs", "gauge running", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:num_queue_reqs", "gauge waiting", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:token_usage", "gauge kv_usage", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:num_used_tokens", "gauge kv_tokens", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:mamba_usage", "gauge state_usage", "hybrid models, newer", f"{SGL} SchedulerMetricsCollector"),
    ("sglang:swa_token_usage", "gauge swa_usage", "SWA models, newer", f"{SGL} SchedulerMetricsCollector"),
    ("sglang:cache_hit_rate", "gauge prefix_hit_rate", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:gen_throughput", "gauge gen_tput", "all", f"{SGL_OLD}; {SGL} SchedulerMetricsCollector"),
    ("sglang:time_to_first_token_seconds", "latency ttft", "all", f"{SGL_OLD}; {SGL} TokenizerMetricsCollector"),
    ("sglang:time_per_output_token_seconds", "latency itl", "early versions", SGL_OLD),
    ("sglang:inter_token_latency_seconds", "latency itl", "newer", f"{SGL} TokenizerMetricsCollector: one "
     "observation per new token (observe_inter_token_latency)"),
    ("sglang:e2e_request_latency_seconds", "latency e2e", "all", f"{SGL_OLD}; {SGL} TokenizerMetricsCollector"),
    ("sglang:queue_time_seconds", "latency queue", "newer", "collector.py SchedulerMetricsCollector 'Request "
     "latency' (newer than @00ae9c1)"),
    ("sglang:request_time_per_output_token_seconds", "latency tpot", "newer (version not pinned)",
     "named in SGLang's tokenizer metrics tests (labels engine_type, stream)"),
    ("sglang:prompt_tokens_histogram", "length prompt", "with --collect-tokens-histogram",
     f"{SGL} TokenizerMetricsCollector"),
    ("sglang:generation_tokens_histogram", "length output", "with --collect-tokens-histogram",
     f"{SGL} TokenizerMetricsCollector"),
    ("sglang:cached_tokens_total", "prefix hit", "newer; a cache_source label in the newest (summed)",
     f"{SGL} TokenizerMetricsCollector"),
    ("sglang:prompt_tokens_total", "prefix looked-up", "a counter in newer versions (a gauge in early ones)",
     f"{SGL_OLD}; {SGL} TokenizerMetricsCollector"),
]


def _used_as(name: str) -> str:
    """Where our code reads `name`, in the table's words."""
    family = name.removesuffix("_total")
    if name in GAUGES:
        return f"gauge {GAUGES[name]}"
    if name in LATENCY:
        return f"latency {LATENCY[name]}"
    if name in LENGTHS:
        return f"length {LENGTHS[name]}"
    for hits, looked in PREFIX_CACHE.values():
        if name in hits:
            return "prefix hit" + (" alias" if name != hits[0] else "")
        if name in looked:
            return "prefix looked-up" + (" alias" if name != looked[0] else "")
    return f"unread ({family})"


@pytest.mark.parametrize("name,where,versions,source", NAMES)
def test_each_name_from_the_engines_source_is_read_as_it_means(name, where, versions, source):
    assert _used_as(name) == where, f"{name} ({versions}; {source})"


def test_every_name_we_read_is_in_the_source_table():
    ours = {*GAUGES, *LATENCY, *LENGTHS, *(n for pair in PREFIX_CACHE.values() for names in pair for n in names)}
    assert ours - {n for n, *_ in NAMES} == {"vllm:avg_prompt_throughput_toks_per_s",
                                            "vllm:avg_generation_throughput_toks_per_s",
                                            "vllm:cpu_prefix_cache_hit_rate"}  # V0 gauges, not used in answers


def test_engine_index_labels_are_the_engines():
    # vLLM V1: labelnames = ["model_name", "engine"]; SGLang: dp_rank only under data parallelism
    assert ENGINE_INDEX_LABELS == ("engine", "dp_rank")


# vLLM V1 bucket edges, read from source (loggers.py, newest stored and @005a810: unchanged since 0.8)
VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0, 160.0, 640.0, 2560.0]
VLLM_ITL_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                 80.0]
VLLM_REQUEST_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                        240.0, 480.0, 960.0, 1920.0, 7680.0]


def test_the_simulator_writes_vllm_v1_bucket_edges():
    assert list(sim.TTFT) == VLLM_TTFT
    assert list(sim.TPOT) == VLLM_ITL_TPOT
    assert list(sim.PHASES) == VLLM_REQUEST_LATENCY  # e2e and queue share request_latency_buckets
    # build_1_2_5_buckets(max_value): the docstring's example, and a context length between two steps
    assert sim.tokens_1_2_5(100) == (1, 2, 5, 10, 20, 50, 100)
    assert sim.tokens_1_2_5(32768)[-3:] == (5000, 10000, 20000)
    assert sim.tokens_1_2_5(262144)[-1] == 200000


def _sglang_rank_snapshot(folder: Path, ts: int) -> Path:
    """SGLang with --enable-metrics-for-all-schedulers on TP 2 and two DP ranks: each scheduler's TP ranks
    export the same queue and the same queue-time observations (labels as in scheduler.py)."""
    folder.mkdir(exist_ok=True)
    lines = ["# TYPE sglang:num_queue_reqs gauge", "# TYPE sglang:queue_time_seconds histogram"]
    for dp, tps, queued, seen in ((0, (0, 1), 3, 5), (1, (2, 3), 4, 7)):
        for tp in tps:
            lab = f'dp_rank="{dp}",engine_type="unified",model_name="m",pp_rank="0",tp_rank="{tp}"'
            lines.append(f"sglang:num_queue_reqs{{{lab}}} {queued}")
            lines += [f'sglang:queue_time_seconds_bucket{{{lab},le="{le}"}} {seen}' for le in ("1.0", "+Inf")]
            lines += [f"sglang:queue_time_seconds_sum{{{lab}}} 1.5", f"sglang:queue_time_seconds_count{{{lab}}} {seen}"]
    path = folder / f"metrics-{ts}.prom"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sglang_tp_ranks_of_one_scheduler_count_once_and_dp_ranks_each(tmp_path):
    pf = parse_path(_sglang_rank_snapshot(tmp_path / "sgl", 1764633600))
    steps = pf.tables["engine_steps"].sort("engine_index")
    assert steps.select("engine_index", "waiting").rows() == [(0, 3), (1, 4)]
    count = pf.tables["metric_histograms"].filter(part="count").sort("series")
    assert count["value"].to_list() == [5, 7]  # tp_rank 0 for dp 0, tp_rank 2 for dp 1: 12 requests, not 24
    assert all("tp_rank=0" in s or "tp_rank=2" in s for s in count["series"])
