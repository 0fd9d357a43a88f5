"""Log writers: the lines follow the engine formats in ../shared/formats (regexes written here from the
format strings quoted there), the numbers read back equal the simulated ones, and engine and gateway ids
join."""

from __future__ import annotations

import gzip
import json
import re

import polars as pl
import pytest

from attribution.ingest import parse_path
from attribution.simulate import simulate
from attribution.simulate.writers import write_litellm, write_sglang_logs, write_vllm_logs

# engine-logs.md V-0 prefix + V-1 stats line (0.20: Engine prefix, optional Preemptions, hit rate).
VLLM_STATS = re.compile(
    r"^\(APIServer pid=\d+\) INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine 000: "
    r"Avg prompt throughput: (\d+\.\d) tokens/s, Avg generation throughput: (\d+\.\d) tokens/s, "
    r"Running: (\d+) reqs, Waiting: (\d+) reqs(?:, Preemptions: (\d+))?, GPU KV cache usage: (\d+\.\d)%, "
    r"Prefix cache hit rate: (\d+\.\d)%$"
)
VLLM_ADDED = re.compile(r"Added request (chatcmpl-[0-9a-f]{16})-([0-9a-f]{8})\.$")
# engine-logs.md S-1, 0.5.9 hybrid SSM forms.
SGL_PREFILL = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+), "
    r"full token usage: (\d\.\d\d), mamba usage: (\d\.\d\d), #running-req: (\d+), #queue-req: (\d+), "
    r"input throughput \(token/s\): \d+\.\d\d, cuda graph: (True|False)$"
)
SGL_DECODE = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Decode batch, #running-req: (\d+), #full token: (\d+), "
    r"full token usage: (\d\.\d\d), mamba num: (\d+), mamba usage: (\d\.\d\d), cuda graph: (True|False), "
    r"gen throughput \(token/s\): \d+\.\d\d, #queue-req: (\d+)$"
)
SGL_FINISH = re.compile(
    r"Finish: obj=GenerateReqInput\(rid='([0-9a-f]{32})'.*'prompt_tokens': (\d+), 'weight_version': 'default', "
    r"'completion_tokens': (\d+), 'cached_tokens': (\d+), 'e2e_latency': ([0-9.e-]+)"
)


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory):
    res = simulate("vllm-chat-small", requests=1500, workers=1)
    out = tmp_path_factory.mktemp("vllm")
    (log,) = write_vllm_logs(res, out, gz=True)
    gw = write_litellm(res, out / "litellm.jsonl")
    with gzip.open(log, "rt") as f:
        lines = f.read().splitlines()
    return res, lines, gw


def test_vllm_log_startup_and_request_lines(vllm_run):
    res, lines, _ = vllm_run
    assert "vLLM API server version 0.20.0" in lines[0]
    assert re.search(
        r"non-default args: \{'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', .*'max_num_seqs': 256",
        lines[1],
    )
    # 450,000 tokens / 32,768 per request = 13.73x
    assert lines[2].endswith("GPU KV cache size: 450,000 tokens")
    assert lines[3].endswith("Maximum concurrency for 32,768 tokens per request: 13.73x")
    added = [m for m in map(VLLM_ADDED.search, lines) if m]
    received = [ln for ln in lines if "Received request chatcmpl-" in ln]
    assert len(added) == len(received) == res.requests.height
    assert {m.group(1) for m in added} == set(res.requests["request_id"].to_list())
    assert sum('"POST /v1/chat/completions HTTP/1.1" 200 OK' in ln for ln in lines) == res.requests.height


def test_vllm_stats_lines_read_back(vllm_run):
    res, lines, _ = vllm_run
    stats = [m for m in map(VLLM_STATS.match, lines) if m]
    assert len(stats) == sum("loggers.py" in ln for ln in lines) > 50  # 1500 requests at 2/s: ~75 intervals
    # Throughput x 10 s summed over the lines = computed prompt tokens (cached excluded, vLLM 0.20+) and
    # output tokens of all requests, up to the 0.05 tokens/s rounding of each line.
    r = res.requests
    prompt = sum(float(m.group(2)) for m in stats) * 10
    gen = sum(float(m.group(3)) for m in stats) * 10
    assert prompt == pytest.approx((r["prompt_tokens"] - r["cached_tokens"]).sum(), abs=0.5 * len(stats) + 1)
    assert gen == pytest.approx(r["output_tokens"].sum(), abs=0.5 * len(stats) + 1)
    assert max(int(m.group(4)) for m in stats) <= res.scenario.running_cap
    assert all(0.0 <= float(m.group(7)) <= 100.0 for m in stats)


def test_litellm_rows_join_engine_rows_and_hold_no_secrets(vllm_run):
    res, lines, gw = vllm_run
    text = gw.read_text()
    assert "sk-" not in text
    rows = [json.loads(ln) for ln in text.splitlines()]
    assert len(rows) == res.requests.height
    engine_ids = {m.group(1) for m in map(VLLM_ADDED.search, lines) if m}  # suffix stripped
    assert {r["id"] for r in rows} == engine_ids
    by_id = {r["request_id"]: r for r in res.requests.iter_rows(named=True)}
    for row in rows[:200]:
        eng = by_id[row["id"]]
        meta = row["metadata"]
        assert re.fullmatch(r"[0-9a-f]{64}", meta["user_api_key_hash"])
        assert meta["user_api_key_alias"] == eng["key_alias"]
        assert (row["prompt_tokens"], row["completion_tokens"]) == (
            eng["prompt_tokens"],
            eng["output_tokens"],
        )
        assert meta["usage_object"]["prompt_tokens_details"]["cached_tokens"] == eng["cached_tokens"]
        assert row["startTime"] < row["completionStartTime"] <= row["endTime"]
        assert row["endTime"] - row["startTime"] == pytest.approx(eng["e2e_s"] + 0.006, abs=1e-5)
    aliases = {r["metadata"]["user_api_key_alias"]: r["metadata"]["user_api_key_hash"] for r in rows}
    assert len(set(aliases.values())) == len(aliases) == 2


def test_sglang_log_lines_read_back(tmp_path):
    res = simulate("sglang-hybrid-small", requests=1500, steps=True, workers=1)
    (log,) = write_sglang_logs(res, tmp_path)
    lines = log.read_text().splitlines()
    m = res.scenario.memory
    assert f"Mamba Cache is allocated. max_mamba_cache_size: {m.state_slots}, conv_state size: " in "\n".join(
        lines
    )
    # 96 state slots, 3 per running request (radix cache, no_buffer): 32 running requests at most.
    assert any("max_total_num_tokens=600000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
               "max_running_requests=32, context_len=65536" in ln for ln in lines)  # fmt: skip
    prefill = [x for x in map(SGL_PREFILL.match, lines) if x]
    decode = [x for x in map(SGL_DECODE.match, lines) if x]
    assert len(prefill) == sum("Prefill batch" in ln for ln in lines)
    assert len(decode) == sum("Decode batch" in ln for ln in lines) > 0
    r = res.requests
    # Every uncached prompt token is prefilled in exactly one prefill batch; cached ones are reported once.
    assert sum(int(x.group(2)) for x in prefill) == (r["prompt_tokens"] - r["cached_tokens"]).sum()
    assert sum(int(x.group(3)) for x in prefill) == r["cached_tokens"].sum()
    # One decode line per 40 decode steps: steps 0, 40, 80, ... of the pod's decode steps.
    s = res.steps
    decode_steps = s.filter(pl.col("decode_reqs") > 0, pl.col("prefill_tokens") == 0)["n_steps"].sum()
    assert len(decode) == -(-decode_steps // 40)
    # Decode steps run only when nothing prefills (SGLang without mixed chunks): every running request
    # decodes and holds 3 state slots.
    assert all(int(x.group(1)) <= 32 and int(x.group(4)) == 3 * int(x.group(1)) for x in decode)
    assert all(float(x.group(5)) == pytest.approx(round(3 * int(x.group(1)) / 96, 2)) for x in decode)
    finish = {x.group(1): x for x in (SGL_FINISH.search(ln) for ln in lines) if x}
    assert set(finish) == set(r["request_id"].to_list())
    for row in r.head(100).iter_rows(named=True):
        x = finish[row["request_id"]]
        assert (int(x.group(2)), int(x.group(3)), int(x.group(4))) == (
            row["prompt_tokens"], row["output_tokens"], row["cached_tokens"])  # fmt: skip
        assert float(x.group(5)) == pytest.approx(row["e2e_s"], abs=1e-6)


def test_written_logs_ingest_back_to_the_simulated_values(vllm_run, tmp_path):
    res, _, gw = vllm_run
    (log,) = sorted(p for p in gw.parent.iterdir() if p.name.endswith(".log.gz"))
    eng = parse_path(log, year=2025, tz="UTC").tables
    assert eng["engine_config"]["kv_pool_tokens"].drop_nulls().to_list() == [450_000]
    parsed = eng["engine_steps"].filter(pl.col("kind") == "stats").select("ts", "running", "waiting")
    sim = res.stats.select("ts", pl.col("running").alias("r"), pl.col("waiting").alias("w"))
    both = parsed.join(sim, on="ts")
    assert both.height == parsed.height > 50
    assert (both["running"] == both["r"]).all() and (both["waiting"] == both["w"]).all()
    gate = parse_path(gw, tz="UTC").tables["requests"]
    joined = gate.join(res.requests, on="request_id", suffix="_sim")
    assert joined.height == res.requests.height
    assert (joined["key_alias"] == joined["key_alias_sim"]).all()
    assert (joined["cached_tokens"] == joined["cached_tokens_sim"]).all()

    small = simulate("sglang-hybrid-small", requests=800, steps=True, workers=1)
    (slog,) = write_sglang_logs(small, tmp_path, gz=True)
    sg = parse_path(slog, tz="UTC").tables
    j = sg["requests"].join(small.requests, on="request_id", suffix="_sim")
    assert j.height == small.requests.height
    for c in ("prompt_tokens", "output_tokens", "cached_tokens"):
        assert (j[c] == j[f"{c}_sim"]).all()
    assert ((j["e2e_s"] - j["e2e_s_sim"]).abs() < 1e-6).all()
    new = sg["engine_steps"].filter(pl.col("kind") == "prefill")["new_tokens"].sum()
    assert new == (small.requests["prompt_tokens"] - small.requests["cached_tokens"]).sum()
