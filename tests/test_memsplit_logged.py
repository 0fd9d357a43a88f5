"""memsplit takes the pool sizes an SGLang start printed (`KV Cache is allocated. #tokens: N`, `Mamba Cache is
allocated. max_mamba_cache_size: S`, `max_total_num_tokens=`) before rebuilding any from other numbers, and says
which it used (`pool_sizes`: logged / reconstructed). Also the real SGLang log's full-attention pool through the
store's engine_config view.

The start below is the sample SGLang pod's (sample_logs/, Qwen3.5-35B-A3B at 2.5e9 B of cache): 18 state
slots, 65,478 KV tokens, 6 running requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared

from attribution.ingest import ingest
from attribution.memsplit import memsplit
from attribution.store import Store

GIB = 1 << 30
B_BF16, S_QWEN35 = 20_480, 64_389_120  # memory-and-thresholds.md A3.1
START = [
    "[2026-05-07 23:59:00] server_args=ServerArgs(model_path='Qwen/Qwen3.5-35B-A3B', tp_size=1, "
    "disable_radix_cache=False, mamba_full_memory_ratio=0.9)",
    "[2026-05-07 23:59:03] Mamba Cache is allocated. max_mamba_cache_size: 18, conv_state size: 0.03GB, "
    "ssm_state size: 1.11GB ",
    "[2026-05-07 23:59:04] KV Cache is allocated. #tokens: 65478, K size: 0.62 GB, V size: 0.62 GB",
    "[2026-05-07 23:59:05] Memory pool end. avail mem=9.50 GB",
    "[2026-05-07 23:59:06] max_total_num_tokens=65478, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=6, context_len=32768, available_gpu_mem=7.40 GB",
]
STEPS = [
    f"[2026-05-08 00:00:{s:02d}] Decode batch, #running-req: 6, #full token: 9000, full token usage: 0.14, "
    f"mamba num: 18, mamba usage: 1.00, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: {q}"
    for s, q in ((0, 3), (10, 2))
]


def _current(tmp_path: Path, lines: list[str]) -> dict:
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    ingest([str(log)], tmp_path / "store", tz="UTC", deployment="pod")
    res = memsplit(Store.open(tmp_path / "store").connect(), "qwen3.5-35b-a3b", run_whatif=False)
    (cur,) = res.tables["current"].to_dicts()
    (summary,) = res.tables["summary"].to_dicts()
    assert summary["pool_sizes"] == cur["pool_sizes"]
    return cur


def test_every_pool_size_logged(tmp_path):
    cur = _current(tmp_path, START + STEPS)
    assert (cur["kv_pool_tokens"], cur["state_slots"], cur["cap"]) == (65_478, 18, 6)
    assert cur["kv_pool_bytes"] == round(1.24 * GIB) and cur["state_pool_bytes"] == round(1.14 * GIB)
    assert (cur["kv_pool_source"], cur["state_pool_source"], cur["pool_sizes"]) == ("logged", "logged", "logged")
    assert cur["cache_source"] == "log"


def test_a_log_cut_before_the_summary_keeps_the_allocated_kv_pool(tmp_path):
    # Before, kv_pool_tokens came from the summary line only: without it memsplit rebuilt the pool as
    # (R - cap k S) // B = (2,555,505,541 - 6 x 3 x 64,389,120) // 20,480 = 68,188 tokens, not the 65,478
    # the engine allocated.
    cur = _current(tmp_path, [ln for ln in START if "max_total_num_tokens" not in ln] + STEPS)
    assert cur["kv_pool_tokens"] == 65_478 and cur["pool_sizes"] == "logged"
    assert (2_555_505_541 - 6 * 3 * S_QWEN35) // B_BF16 == 68_188 != cur["kv_pool_tokens"]


def test_without_allocation_lines_the_state_pool_is_reconstructed(tmp_path):
    cur = _current(tmp_path, [ln for ln in START if "Cache is allocated" not in ln] + STEPS)
    assert (cur["kv_pool_source"], cur["state_pool_source"]) == ("logged", "reconstructed")
    assert cur["pool_sizes"] == "KV logged, state reconstructed"
    assert cur["cache_source"] == "estimate" and cur["kv_pool_tokens"] == 65_478
    # R = T B + (cap k + 1) S; the state pool is what R leaves beside the KV pool, in whole slots
    R = 65_478 * B_BF16 + (6 * 3 + 1) * S_QWEN35
    assert cur["state_slots"] == (R - 65_478 * B_BF16) // S_QWEN35 == 19


@pytest.fixture(scope="module")
def real_store(tmp_path_factory) -> Path:
    log = shared("traces", "real_logs", "sglang_repo-sostrowsk-dgx-spark-local-llm.log")
    store = tmp_path_factory.mktemp("real") / "store"
    ingest([str(log)], store, tz="UTC", deployment="laguna")
    return store


def test_real_log_engine_config_holds_the_full_attention_pool(real_store):
    # the log names the sliding-window pool's size (148,717 tokens) and the full pool's (185,897), then
    # allocates the SWA pool (10.21 + 10.21 GB), the full pool (4.25 + 4.25 GB), ends the target's memory
    # pool, allocates the DFlash draft's pool (2.13 + 2.13 GB), and its summary says 185,897 tokens
    con = Store.open(real_store).connect()
    row = con.execute("select kv_pool_tokens, kv_pool_bytes, state_pool_slots from engine_config").fetchall()
    assert row == [(185_897, round(8.50 * GIB), None)]
