"""Memory profiles of hybrid models against every worked number in formats/memory-and-thresholds.md Part A.

Expected values are the doc's figures at the doc's rounding, or arithmetic written out from its formulas;
fixtures are the architecture fields of the published config.json files.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attribution.errors import AttributionError, InputError, UsageError
from attribution.memory import (
    ModelConfigError,
    UnknownArchitecture,
    UnknownPreset,
    UnsupportedOnEngine,
    balanced_max_concurrency,
    balanced_ratio,
    from_hf_config,
    get_preset,
    hybrid_blocks,
    kv_bytes_from_log,
    list_presets,
    load_profile,
    max_concurrency,
    pools_needed,
    sglang_max_running_requests,
    sglang_split,
    split_cache_bytes,
    state_bytes_from_log,
    state_slots_per_request,
)
from attribution.memory.catalog import PRESET_DIR

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "model_configs"
KiB, MiB, GiB = 1024, 1024**2, 1024**3


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def mb(n: float, digits: int) -> float:
    return round(n / 1e6, digits)


def mib(n: float, digits: int = 1) -> float:
    return round(n / MiB, digits)


# --- A3 worked example 1: Qwen3-Next-80B-A3B -------------------------------------------------------------


def test_qwen3_next_sglang_defaults():
    p = load_profile("Qwen3-Next-80B-A3B", engine="sglang")
    assert (p.n_layers, p.n_full_attention, p.n_state_layers) == (48, 12, 36)
    assert p.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2 == 24 * KiB
    assert p.conv_bytes_per_slot // 36 == (2 * 16 * 128 + 32 * 128) * 3 * 2 == 49_152
    assert p.ssm_bytes_per_slot // 36 == 32 * 128 * 128 * 4 == 2 * MiB
    assert p.state_bytes_per_layer == 2_146_304
    assert mb(p.state_bytes_per_slot, 2) == 77.27 and mib(p.state_bytes_per_slot) == 73.7
    assert round(p.state_token_equivalent) == 3_144  # "~3,144 bf16 KV tokens"
    assert (p.conv_dtype, p.ssm_dtype, p.kv_dtype) == ("bfloat16", "float32", "bfloat16")
    assert load_profile("qwen3-next-80b-a3b", kv_cache_dtype="fp8").kv_bytes_per_token == 12 * KiB


def test_qwen3_next_vllm_defaults_and_block_padding():
    p = load_profile("qwen3-next-80b-a3b", engine="vllm")
    assert p.ssm_bytes_per_slot // 36 == 1 * MiB  # bf16 SSM: the model dtype
    assert p.state_bytes_per_layer == 1_097_728
    assert mb(p.state_bytes_per_slot, 1) == 39.5 and mib(p.state_bytes_per_slot) == 37.7
    blocks = hybrid_blocks(p)
    assert blocks.attn_block_size == 544 and blocks.page_bytes == 1_114_112
    assert round(blocks.padding_fraction * 100, 2) == 1.49
    assert mb(36 * blocks.page_bytes, 1) == 40.1 == mb(blocks.state_bytes_per_request, 1)


def test_qwen3_next_tp4_replicates_kv_heads_and_splits_state():
    p = load_profile("qwen3-next-80b-a3b", engine="sglang", tp=4)
    assert p.kv_bytes_per_token == 12 * KiB  # 2 kv heads over 4 ranks: 1 per GPU
    assert mb(p.state_bytes_per_slot, 1) == 19.3
    one = load_profile("qwen3-next-80b-a3b")
    for tp in (2, 4, 8, 16):  # 16 key heads and 32 value heads divide every one of these
        assert load_profile("qwen3-next-80b-a3b", tp=tp).state_bytes_per_slot * tp == one.state_bytes_per_slot


# --- A3 worked example 2: NVIDIA-Nemotron-Nano-9B-v2 ------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang", "vllm"])  # fp32 SSM is the default in both engines
def test_nemotron_nano_9b_v2(engine):
    p = load_profile("nemotron-nano-9b-v2", engine=engine)
    assert p.layers == {"full_attention": 4, "mamba2": 27}  # the 25 '-' MLP layers hold nothing
    assert p.kv_bytes_per_token == 4 * 2 * 8 * 128 * 2 == 16 * KiB
    assert p.conv_bytes_per_slot // 27 == (10240 + 2 * 8 * 128) * 3 * 2 == 73_728
    assert p.ssm_bytes_per_slot // 27 == 128 * 80 * 128 * 4 == 5_242_880
    assert p.state_bytes_per_slot == 27 * 5_316_608
    assert mb(p.state_bytes_per_slot, 1) == 143.5 and mib(p.state_bytes_per_slot) == 136.9
    assert int(p.state_token_equivalent) == 8_761
    assert (
        mb(load_profile("nemotron-nano-9b-v2", engine=engine, mamba_ssm_dtype="bf16").state_bytes_per_slot, 1)
        == 72.8
    )
    assert load_profile("nemotron-nano-9b-v2", kv_cache_dtype="fp8_e4m3").kv_bytes_per_token == 8 * KiB


def test_nemotron_tp_shards_groups_and_replicates_them_past_n_groups():
    p2 = load_profile("nemotron-nano-9b-v2", tp=2)
    assert p2.kv_bytes_per_token == 4 * 2 * 4 * 128 * 2
    assert p2.state_bytes_per_layer == (10240 + 2 * 8 * 128) // 2 * 3 * 2 + 64 * 80 * 128 * 4
    p16 = load_profile("nemotron-nano-9b-v2", tp=16)
    assert p16.kv_bytes_per_token == 4 * 2 * 1 * 128 * 2  # 8 kv heads < 16 ranks: replicated
    # 8 groups do not divide 16 ranks: groups are replicated up to 16 (extra_groups_for_head_shards)
    assert p16.conv_bytes_per_slot // 27 == (10240 + 2 * 16 * 128) // 16 * 3 * 2
    assert p16.ssm_bytes_per_slot // 27 == 8 * 80 * 128 * 4


# --- A3 "Other models" and A3.1 ----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang", "vllm"])  # vLLM reads mamba_ssm_dtype=float32 from the config
def test_qwen35_35b_a3b(engine):
    p = load_profile("qwen3.5-35b-a3b", engine=engine)
    assert (p.n_full_attention, p.n_state_layers) == (10, 30)
    assert p.kv_bytes_per_token == 10 * 2 * 2 * 256 * 2 == 20_480
    assert p.state_bytes_per_slot == 30 * 2_146_304
    assert mb(p.state_bytes_per_slot, 2) == 64.39 and mib(p.state_bytes_per_slot) == 61.4
    assert round(p.state_token_equivalent) == 3_144
    fp32_conv = load_profile("qwen3.5-35b-a3b", engine=engine, mamba_conv_dtype="float32")
    assert mb(fp32_conv.state_bytes_per_slot, 1) == 65.9 and mib(fp32_conv.state_bytes_per_slot) == 62.8
    assert load_profile("qwen3.5-35b-a3b-FP8", kv_cache_dtype="fp8").kv_bytes_per_token == 10 * KiB


def test_qwen35_vllm_block_1056_and_groups():
    blocks = hybrid_blocks(load_profile("qwen3.5-35b-a3b", engine="vllm"))
    assert blocks.attn_block_size == 16 * -(-2_146_304 // 32_768) == 1056
    assert round(blocks.padding_fraction * 100, 2) == 0.76
    assert (blocks.group_size, blocks.attention_groups, blocks.state_groups) == (10, 1, 3)
    padded = blocks.state_bytes_per_request
    assert mb(padded, 1) == 64.9 and mib(padded) == 61.9


def test_vllm_max_concurrency_counts_blocks_per_group():
    blocks = hybrid_blocks(load_profile("qwen3.5-35b-a3b", engine="vllm"))
    available = 100 * 2_162_688 * 10  # 100 blocks of one padded page for each of 10 layers of a group
    # 10,560 tokens = 10 attention blocks of 1056; each of 3 GDN groups takes 1 block (2 with prefix caching)
    assert max_concurrency(blocks, available_bytes=available, max_model_len=10_560) == 100 / (10 + 3)
    assert max_concurrency(
        blocks, available_bytes=available, max_model_len=10_560, prefix_caching=True
    ) == 100 / (10 + 6)


def test_kimi_linear_mla_and_kda():
    for engine in ("sglang", "vllm"):  # KDA state is fp32 in both
        p = load_profile("Kimi-Linear-48B-A3B", engine=engine)
        assert (p.n_full_attention, p.n_state_layers, p.mla) == (7, 20, True)
        assert p.state_bytes_per_slot == 20 * (73_728 + 2_097_152)
        assert mb(p.state_bytes_per_slot, 1) == 43.4 and mib(p.state_bytes_per_slot) == 41.4
        assert p.kv_bytes_per_token == 7 * (512 + 64) * 2 == 8_064
    p2 = load_profile("kimi-linear-48b-a3b", tp=2)
    assert p2.kv_bytes_per_token == 8_064  # MLA: no TP split
    assert p2.state_bytes_per_slot == 20 * ((4096 + 2 * 4096) // 2 * 3 * 2 + 16 * 128 * 128 * 4)
    # SGLang 0.5.9 disables the radix cache for Kimi-Linear, so k = 1
    p = load_profile("kimi-linear-48b-a3b")
    assert p.sglang_radix == "disabled"
    assert state_slots_per_request("sglang", radix_cache=p.sglang_radix != "disabled") == 1


def test_minimax_lightning():
    p = load_profile("MiniMax-Text-01", engine="vllm")
    assert (p.n_layers, p.n_state_layers, p.n_full_attention) == (80, 70, 10)
    assert p.state_bytes_per_slot == 70 * 64 * 128 * 128 * 2 == 140 * MiB
    assert (
        load_profile("minimax-m1", engine="vllm", mamba_ssm_dtype="float32").state_bytes_per_slot == 280 * MiB
    )
    assert p.kv_bytes_per_token == 10 * 2 * 8 * 128 * 2 == 40 * KiB
    with pytest.raises(UnsupportedOnEngine, match="SGLang has no"):
        load_profile("minimax-text-01", engine="sglang")


def test_lfm2_short_conv():
    p = load_profile("LFM2-1.2B")
    assert (p.n_layers, p.n_full_attention, p.n_state_layers) == (16, 6, 10)
    assert p.state_bytes_per_slot == 10 * 2048 * 2 * 2 == 80 * KiB and p.ssm_bytes_per_slot == 0
    assert p.kv_bytes_per_token == 6 * 2 * 8 * 64 * 2 == 12 * KiB
    assert round(p.state_token_equivalent) == 7  # "the state is negligible (≈7 tokens)"


def test_jamba_vllm_only():
    p = load_profile("jamba-v0.1", engine="vllm")
    assert (p.n_full_attention, p.n_state_layers) == (4, 28)  # i % 8 == 4: layers 4, 12, 20, 28
    assert p.state_bytes_per_slot == 28 * 8192 * (3 + 16) * 2 and mib(p.state_bytes_per_slot) == 8.3
    assert p.kv_bytes_per_token == 16 * KiB
    with pytest.raises(UnsupportedOnEngine):
        load_profile("jamba-mini", engine="sglang")


def test_granite_4_h_small():
    p = load_profile("granite-4.0-h-small")
    assert (p.n_full_attention, p.n_state_layers) == (4, 36)
    assert p.state_bytes_per_slot == 36 * (8448 * 3 * 2 + 128 * 64 * 128 * 4)
    assert mb(p.state_bytes_per_slot, 1) == 152.8
    assert p.kv_bytes_per_token == 4 * 2 * 8 * 128 * 2 == 16 * KiB
    # The doc prints "76.9 MB bf16"; 36 * (8448*3*2 + 128*64*128*2) = 77,322,240 B is 77.3 MB.
    v = load_profile("granite-4.0-h-small", engine="vllm")
    assert v.state_bytes_per_slot == 36 * (50_688 + 2_097_152) and mb(v.state_bytes_per_slot, 1) == 77.3
    assert hybrid_blocks(v).attn_block_size == 528  # the block size in published vLLM logs (A2)
    p4 = load_profile("granite-4.0-h-small", tp=4)  # 1 group replicated to 4, heads and KV heads split
    assert p4.state_bytes_per_slot == 36 * ((8192 + 2 * 4 * 128) // 4 * 3 * 2 + 32 * 64 * 128 * 4)
    assert p4.kv_bytes_per_token == 4 * 2 * 2 * 128 * 2


def test_gemma3_sliding_window():
    p = load_profile("gemma-3-4b")
    assert p.layers == {"full_attention": 5, "sliding_attention": 29} and p.sliding_window == 1024
    assert p.kv_bytes_per_token == 20 * KiB and p.swa_kv_bytes_per_token == 116 * KiB
    assert p.state_bytes_per_slot == 0 and p.state_kind is None
    assert p.kv_bytes(32 * 1024) == 640 * MiB + 116 * MiB
    assert p.kv_bytes(512) == 512 * (20 + 116) * KiB


def test_families_without_a_doc_number_follow_the_a3_formulas():
    falcon = load_profile("falcon-h1-7b")  # every layer has attention and mamba
    assert falcon.layers == {"full_attention": 44, "mamba2": 44}
    assert falcon.kv_bytes_per_token == 44 * 2 * 2 * 128 * 2
    assert falcon.state_bytes_per_slot == 44 * ((3072 + 2 * 256) * 3 * 2 + 24 * 128 * 256 * 4)
    # vLLM keeps Falcon-H1, Granite and Jamba state in the model dtype: about half SGLang's size
    assert load_profile("falcon-h1-7b", engine="vllm").ssm_bytes_per_slot == 44 * 24 * 128 * 256 * 2
    tiny = load_profile("granite-4.0-h-tiny")
    assert tiny.state_bytes_per_slot == 36 * ((2 * 1536 + 2 * 128) * 3 * 2 + 48 * 64 * 128 * 4)
    assert tiny.kv_bytes_per_token == 4 * 2 * 4 * 128 * 2


# --- dtype flags --------------------------------------------------------------------------------------------


def test_dtype_flags_override_engine_defaults():
    sg = load_profile("qwen3-next-80b-a3b", mamba_ssm_dtype="bfloat16")
    assert sg.state_bytes_per_slot == load_profile("qwen3-next-80b-a3b", engine="vllm").state_bytes_per_slot
    assert (
        load_profile("qwen3-next-80b-a3b", engine="vllm", mamba_ssm_dtype="float32").state_bytes_per_slot
        == 36 * 2_146_304
    )
    # vLLM --mamba-cache-dtype sets conv, and the SSM too when that is auto ...
    conv32 = load_profile("qwen3-next-80b-a3b", engine="vllm", mamba_conv_dtype="float32")
    assert conv32.state_bytes_per_layer == 8192 * 3 * 4 + 32 * 128 * 128 * 4
    # ... but NemotronH's auto SSM is fp32 whatever the conv dtype
    assert load_profile("nemotron-nano-9b-v2", engine="vllm", mamba_conv_dtype="bf16").ssm_dtype == "float32"
    # the SGLang flag beats the config's mamba_ssm_dtype, which beats the fp32 default
    assert load_profile("qwen3.5-35b-a3b", mamba_ssm_dtype="bf16").ssm_dtype == "bfloat16"
    cfg = fixture("nemotron-nano-9b-v2") | {
        "mamba_ssm_dtype": "bfloat16",
        "mamba_ssm_cache_dtype": "bfloat16",
    }
    assert from_hf_config(cfg, engine="sglang").ssm_dtype == "bfloat16"
    assert mb(from_hf_config(cfg, engine="vllm").state_bytes_per_slot, 1) == 72.8
    assert load_profile("gemma-3-4b", dtype="float32").kv_bytes_per_token == 40 * KiB
    with pytest.raises(UsageError, match="unknown dtype"):
        load_profile("gemma-3-4b", kv_cache_dtype="int3")


# --- slots per running request (A1.3, A2) ------------------------------------------------------------------


def test_state_slots_per_request():
    assert state_slots_per_request("sglang", radix_cache=False) == 1
    assert state_slots_per_request("sglang") == 3
    assert state_slots_per_request("sglang", extra_buffer=True) == 5
    assert state_slots_per_request("sglang", spec_decode=True, extra_buffer=True) == 4
    assert state_slots_per_request("sglang", extra_buffer=True, sglang_version="0.5.23") == 5
    assert state_slots_per_request("sglang", extra_buffer=True, sglang_version="0.5.23", overlap=False) == 4
    assert state_slots_per_request("sglang", extra_buffer=True, sglang_version="0.5.23", lazy=True) == 4
    assert state_slots_per_request("sglang", sglang_version="0.5.23", skip_decode_lock=True) == 3
    assert state_slots_per_request("vllm", radix_cache=False) == 1
    assert state_slots_per_request("vllm", radix_cache=True) == 2
    assert state_slots_per_request("vllm", False, True, num_speculative_blocks=2) == 3
    assert (
        state_slots_per_request("vllm", True, True, num_speculative_blocks=1, prefill_checkpoint_blocks=1)
        == 4
    )
    with pytest.raises(UsageError):
        state_slots_per_request("vllm", extra_buffer=True)


# --- pool arithmetic (A0, A1.2, A1.5) -----------------------------------------------------------------------


def test_a15_worked_static_split():
    p = load_profile("qwen3.5-35b-a3b")
    S, B, R = p.state_bytes_per_slot, p.kv_bytes_per_token, 60 * GiB
    state_budget, kv_budget = split_cache_bytes(R, 0.9)
    assert round(state_budget / GiB, 1) == 28.4 and round(kv_budget / GiB, 1) == 31.6
    pool = {"state_per_slot": S, "kv_per_token": B}
    split = sglang_split(R, 0.9, **pool, slots_per_request=3)
    assert split.state_slots == 473 and split.max_requests_by_state == 157
    assert sglang_split(R, 0.9, **pool, slots_per_request=1).max_requests_by_state == 473  # radix disabled
    assert round(split.kv_tokens / 1e6, 2) == 1.66
    by_kv = split.kv_tokens / 5000
    assert round(by_kv, -1) == 330 and split.max_requests_by_state < by_kv  # the state pool binds first
    assert round(balanced_ratio(**pool, slots_per_request=3, mean_live_tokens=5000), 2) == 1.89
    assert round(balanced_max_concurrency(R, **pool, slots_per_request=3, mean_live_tokens=5000)) == 218


def test_split_variants_by_hand():
    # S = 1000 B, B = 10 B, R = 15,000 B, r = 4: state 12,000 B = 12 slots, KV 3,000 B = 300 tokens
    s = sglang_split(15_000, 4.0, state_per_slot=1000, kv_per_token=10)
    assert (s.state_slots, s.state_bytes, s.kv_tokens, s.max_requests_by_state) == (12, 12_000, 300, 4)
    fixed = sglang_split(15_000, 4.0, state_per_slot=1000, kv_per_token=10, max_mamba_cache_size=3)
    assert (fixed.state_slots, fixed.kv_bytes, fixed.kv_tokens) == (3, 12_000, 1200)
    padded = sglang_split(15_000, 4.0, state_per_slot=1000, kv_per_token=10, padding_slot=True)
    assert (padded.state_slots, padded.state_bytes, padded.kv_tokens) == (11, 12_000, 300)
    spec = sglang_split(15_000, 4.0, state_per_slot=1000, kv_per_token=10, spec_reserve_bytes=5000)
    assert (spec.state_slots, spec.kv_tokens) == (8, 200)
    with pytest.raises(UsageError):
        sglang_split(15_000, 4.0, state_per_slot=1000, kv_per_token=10, max_mamba_cache_size=16)
    need = pools_needed(4, 300, state_per_slot=1000, kv_per_token=10)
    assert (need.state_slots, need.state_bytes, need.kv_bytes, need.ratio) == (12, 12_000, 3000, 4.0)
    assert need.feasible(15_000) and not need.feasible(14_999)


@given(st.integers(1, 10**9), st.integers(1, 10**6), st.integers(1, 4096), st.integers(0, 10**8))
@pytest.mark.parametrize("k", [1, 3, 4, 5])
def test_needed_pools_round_trip_through_the_split(k, S, B, concurrency, live_tokens):
    need = pools_needed(concurrency, live_tokens + 1, state_per_slot=S, kv_per_token=B, slots_per_request=k)
    split = sglang_split(
        need.total_bytes + S + B, need.ratio, state_per_slot=S, kv_per_token=B, slots_per_request=k
    )
    assert split.state_slots >= k * concurrency and split.max_requests_by_state >= concurrency
    assert split.kv_tokens >= live_tokens + 1


def test_max_running_requests_default_rule():
    assert sglang_max_running_requests(1_000_000, 262_144) == 2048  # int(1953.1) raised to 2048
    assert sglang_max_running_requests(8_000_000, 32_768) == 4096  # int(125,000) capped at 4096
    assert sglang_max_running_requests(3000, 4096) == 1500  # never above tokens // 2
    assert sglang_max_running_requests(1_000_000, 262_144, state_slots=473) == 157
    assert sglang_max_running_requests(1_000_000, 262_144, state_slots=473, requested=64) == 64
    assert sglang_max_running_requests(1_000_000, 262_144, state_slots=473, requested=500) == 157
    assert sglang_max_running_requests(1_000_000, 262_144, state_slots=473, slots_per_request=1) == 473


def test_sizes_backed_out_of_startup_logs():
    assert state_bytes_from_log(0.5, 1.5, 1023) == 2 * GiB / 1024  # tensors hold max_mamba_cache_size + 1
    assert kv_bytes_from_log(1.0, 65_536) == 16 * KiB


# --- presets, paths, layer-selection variants ---------------------------------------------------------------


def test_every_preset_matches_its_fixture_and_loads():
    names = {path.stem for path in PRESET_DIR.glob("*.toml")}
    assert names == {path.stem for path in FIXTURES.glob("*.json")}
    for stem in names:
        preset = tomllib.loads((PRESET_DIR / f"{stem}.toml").read_text())
        assert preset["config"] == fixture(stem), stem
        via_path = load_profile(FIXTURES / f"{stem}.json", engine="vllm")
        assert (
            via_path.state_bytes_per_slot == load_profile(preset["name"], engine="vllm").state_bytes_per_slot
        )
    wanted = """Qwen3-Next-80B-A3B Qwen3.5-35B-A3B NVIDIA-Nemotron-Nano-9B-v2 Granite-4.0-H-Small
        Granite-4.0-H-Tiny Falcon-H1-7B Jamba-1.5-Mini LFM2-1.2B Kimi-Linear-48B-A3B MiniMax-Text-01
        Gemma-3-4B"""
    assert set(wanted.split()) <= set(list_presets())


def test_preset_lookup_is_case_insensitive_with_aliases_and_repo_ids(tmp_path):
    for name in ("QWEN3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b-fp8", " qwen3_5-35b-a3b "):
        assert get_preset(name).name == "Qwen3.5-35B-A3B", name
    assert get_preset("nvidia/NVIDIA-Nemotron-Nano-9B-v2").name == "NVIDIA-Nemotron-Nano-9B-v2"
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    shutil.copy(FIXTURES / "lfm2-1.2b.json", model_dir / "config.json")
    from_dir = load_profile(model_dir)
    assert from_dir.state_bytes_per_slot == 80 * KiB and from_dir.name == "my-model"
    with pytest.raises(UnknownPreset, match="did you mean Qwen3.5-35B-A3B"):
        load_profile("qwen3.5-35b-a3")
    with pytest.raises(ModelConfigError, match="no such config file"):
        load_profile(tmp_path / "missing" / "config.json")


def test_alternative_layer_spellings_give_the_same_counts():
    qn = fixture("qwen3-next-80b-a3b")
    listed = qn | {"layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 12}
    del listed["full_attention_interval"]
    assert from_hf_config(listed).layers == {"full_attention": 12, "gdn": 36}
    lfm = fixture("lfm2-1.2b")
    full = lfm.pop("full_attn_idxs")
    types = ["full_attention" if i in full else "conv" for i in range(16)]
    assert from_hf_config(lfm | {"layer_types": types}).layers == {"full_attention": 6, "short_conv": 10}
    nem = fixture("nemotron-nano-9b-v2")
    blocks = [{"M": "mamba", "*": "attention", "-": "mlp"}[c] for c in nem.pop("hybrid_override_pattern")]
    assert from_hf_config(nem | {"layers_block_type": blocks}).layers == {"full_attention": 4, "mamba2": 27}
    kimi = fixture("kimi-linear-48b-a3b")
    del kimi["linear_attn_config"]["kda_layers"]  # every layer not listed as full attention is KDA
    assert from_hf_config(kimi).layers == {"full_attention": 7, "kda": 20}
    gemma = fixture("gemma-3-4b")
    text = gemma["text_config"]
    del text["sliding_window_pattern"]
    text["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(34)]
    assert from_hf_config(gemma).layers == {"full_attention": 5, "sliding_attention": 29}
    # Gemma-2 configs without layer_types alternate local (even) and global (odd) layers
    gemma2 = dict(model_type="gemma2", num_hidden_layers=42, num_key_value_heads=8, head_dim=256)
    gemma2 |= {"sliding_window": 4096, "torch_dtype": "bfloat16"}
    assert from_hf_config(gemma2).layers == {"full_attention": 21, "sliding_attention": 21}


# --- errors -------------------------------------------------------------------------------------------------


def test_unknown_architectures_and_missing_fields_are_named():
    with pytest.raises(UnknownArchitecture, match="'llama'.*qwen3_next") as e:
        from_hf_config({"model_type": "llama", "num_hidden_layers": 32})
    assert isinstance(e.value, InputError) and isinstance(e.value, AttributionError)
    with pytest.raises(UnknownArchitecture, match="no model_type"):
        from_hf_config({"num_hidden_layers": 32})
    partial = {k: v for k, v in fixture("qwen3-next-80b-a3b").items() if not k.startswith("linear_value")}
    with pytest.raises(ModelConfigError, match="linear_value_head_dim"):
        from_hf_config(partial)
    kimi = fixture("kimi-linear-48b-a3b")
    del kimi["linear_attn_config"]["num_heads"]
    del kimi["kv_lora_rank"]
    with pytest.raises(ModelConfigError, match="kv_lora_rank.*linear_attn_config.num_heads"):
        from_hf_config(kimi)
    bad = fixture("granite-4.0-h-small") | {"layer_types": ["mamba"] * 39}
    with pytest.raises(ModelConfigError, match="layer_types of length num_hidden_layers = 40"):
        from_hf_config(bad)


def test_unusable_tp_and_engine_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="n_groups = 16 does not divide over tensor-parallel size 3"):
        load_profile("qwen3.5-35b-a3b", tp=3)
    with pytest.raises(UsageError, match="num_key_value_heads = 4 is not divisible by tensor-parallel"):
        load_profile("gemma-3-4b", tp=3)
    with pytest.raises(UsageError, match="unknown engine"):
        load_profile("qwen3.5-35b-a3b", engine="trtllm")
    with pytest.raises(UsageError, match="vLLM's"):
        hybrid_blocks(load_profile("qwen3.5-35b-a3b", engine="sglang"))
    broken = tmp_path / "config.json"
    broken.write_text("{not json")
    with pytest.raises(ModelConfigError, match="not a readable JSON config"):
        from_hf_config(broken)


def test_describe_states_the_numbers():
    text = load_profile("qwen3-next-80b-a3b").describe()
    assert "77.27 MB" in text and "73.7 MiB" in text and "24.0 KiB" in text and "3,144 KV tokens" in text
    assert "36 gdn" in text and "float32" in text
