"""Memory split for hybrid models: the current split read from startup facts (the A1.5 worked example on
SGLang, the 5 GiB vLLM pod of sample_logs/), episodes and queueing cost from hand-written step lines, the
recommended split and its flags (A1.5: 473 slots, 157 running, balanced ratio 1.89, about 218 requests),
ground truth of sample_logs/, and end to end on a simulated SGLang pod whose default split lets the state
pool bind."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from attribution.analyses.common import frames_connection
from attribution.cli import app
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.memsplit import Overrides, Settings, current_split, memsplit, recommend
from attribution.memsplit.current import flag_map
from attribution.memsplit.recommend import ratio_flag
from attribution.store import Store

GIB = 1 << 30
B_BF16, S_QWEN35 = 20_480, 64_389_120  # A3.1: 10 x 2 x 2 x 256 x 2 B; 30 GDN layers x 2,146,304 B
T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs"


def _start(**kw) -> dict:
    """A int_memsplit_starts row as the query returns it."""
    row = {
        "start_id": 1,
        "deployment": "pod-a",
        "engine": "sglang",
        "version": "0.5.9",
        "model": "m",
        "started": T0,
        "period_since": T0,
        "period_until": None,
        "kv_pool_tokens": None,
        "kv_pool_bytes": None,
        "state_pool_slots": None,
        "state_pool_bytes": None,
        "available_kv_bytes": None,
        "max_concurrency": None,
        "max_model_len": 262_144,
        "block_size": None,
        "mamba_page_padding": None,
        "chunked_prefill_size": 8192,
        "tp_size": 1,
        "flags": None,
        "cap": None,
        "cap_source": "configured",
        "step_lines": 0,
    }
    row.update(kw)
    return row


# A1.5: R = 60 GiB, r = 0.9 -> int(R * 0.9 / 1.9 // S) = 473 slots; KV gets R - 473 S = 33,968,455,680 B
# -> // 20,480 = 1,658,616 tokens; 473 // 3 = 157 running requests.
R60 = 60 * GIB
A15 = _start(
    kv_pool_tokens=1_658_616,
    kv_pool_bytes=1_658_616 * B_BF16,
    state_pool_slots=473,
    state_pool_bytes=474 * S_QWEN35,
    cap=157,
)


def test_a15_current_split_state_pool_binds_first():
    c = current_split(A15, "qwen3.5-35b-a3b", Overrides(cache_bytes=R60))
    assert (c.kv_bytes_per_token, c.state_bytes_per_slot, c.slots_per_request) == (B_BF16, S_QWEN35, 3)
    assert (c.cache_bytes, c.cache_source, c.state_source) == (R60, "given", "log")
    assert (c.state_slots, c.state_cap, c.cap) == (473, 157, 157)
    # at a mean of 5,000 live tokens the KV pool holds 1,658,616 / 5,000 = 331.7 requests: the state pool
    # binds first
    assert c.kv_cap(5000) == pytest.approx(331.7232)
    assert c.state_cap < c.kv_cap(5000)
    # without --cache-gib, R comes from the two allocation lines: 474 S + 1,658,616 B
    logged = current_split(A15, "qwen3.5-35b-a3b", Overrides())
    assert (logged.cache_bytes, logged.cache_source) == (474 * S_QWEN35 + 1_658_616 * B_BF16, "log")
    # --disable-radix-cache: one slot per running request (A1.3)
    flags = [{"key": "disable_radix_cache", "value": "True"}]
    assert current_split({**A15, "flags": flags}, "qwen3.5-35b-a3b", Overrides()).slots_per_request == 1


def test_a15_recommendation_resize_and_short():
    c = current_split(A15, "qwen3.5-35b-a3b", Overrides(cache_bytes=R60))
    s = Settings(headroom=0.0)
    # 200 requests of 5,000 live tokens: state 3 x S x 200 = 38,633,472,000 B, KV 20,480 x 1,000,000 =
    # 20,480,000,000 B; with SGLang's padding slot 59.11e9 B + one padding slot <= 64,424,509,440 B: a resize
    rec = recommend(c, {"demand_q": 200.0, "mean_live_tokens": 5000.0, "longest_request": 60_000}, s)
    assert rec.status == "resize" and (rec.concurrency, rec.live_tokens) == (200, 1_000_000)
    assert round(rec.balanced_ratio, 2) == 1.89  # A1.5: r* = 3 x 64.4e6 / (20,480 x 5,000)
    assert (rec.state_slots, rec.max_running) == (600, 200)
    assert rec.state_bytes == 601 * S_QWEN35
    assert rec.kv_tokens == (R60 - 601 * S_QWEN35) // B_BF16 == 1_256_184
    assert rec.state_bytes + rec.kv_bytes <= R60
    flags = {f.flag: f.value for f in rec.flags}
    assert flags["--max-mamba-cache-size"] == "600" and flags["--max-running-requests"] == "200"
    # 600 S / (R - 600 S) = 1.4979 -> 1.50, and int(R x 1.5 / 2.5 // S) = 600
    assert flags["--mamba-full-memory-ratio"] == "1.50" and ratio_flag(c, 600) == (1.5, 600)
    # 250 requests need 250 x (3 S + 5,000 B) = 73.9 GB > R: the best split holds (R - S) // (3 S + 5,000 B)
    # = 64,360,120,320 // 295,567,360 = 217 (A1.5: about 218 without the padding slot)
    short = recommend(c, {"demand_q": 250.0, "mean_live_tokens": 5000.0, "longest_request": 60_000}, s)
    assert short.status == "short" and short.max_running == 217 and short.state_slots == 651
    assert short.shortfall_bytes == 250 * 3 * S_QWEN35 + S_QWEN35 + 1_250_000 * B_BF16 - R60
    assert {f.flag for f in short.flags} >= {"--mem-fraction-static", "--mamba-ssm-dtype"}
    # demand the current split already holds: nothing to change
    fits = recommend(c, {"demand_q": 100.0, "mean_live_tokens": 5000.0, "longest_request": 60_000}, s)
    assert fits.status == "fits" and (fits.state_slots, fits.kv_tokens) == (473, 1_658_616)


VLLM_FLAGS = [
    {"key": "max_num_seqs", "value": "13"},
    {"key": "enable_prefix_caching", "value": "true"},
    {"key": "max_model_len", "value": "131072"},
]
VLLM = _start(
    engine="vllm",
    version="0.15.1",
    kv_pool_tokens=279_056,
    max_concurrency=2.13,
    max_model_len=131_072,
    cap=13,
    flags=VLLM_FLAGS,
)


def test_vllm_shared_pool_numbers():
    c = current_split(VLLM, "qwen3.5-35b-a3b", Overrides(cache_bytes=5 * GIB, kv_cache_dtype="fp8"))
    # fp8 KV: 1,024 B per token per layer; block 16 x ceil(2,146,304 / 16,384) = 2,096 tokens, page
    # 2,146,304 B = one GDN layer's slot (no padding); state = page x 10 layers x 3 groups; attention
    # 1,024 x 10 layers
    assert (c.block_size, c.kv_bytes_per_token, c.state_bytes_per_slot) == (2096, 10_240, S_QWEN35)
    assert c.slots_per_request == 2  # prefix caching ("align"): 2 blocks per state group
    # 5 GiB - 279,056 x 10,240 = 2,511,175,680 B = 39 slots exactly: what the KV cache size leaves for state
    assert (c.state_pool_bytes, c.state_slots, c.state_source) == (2_511_175_680, 39, "implied")
    assert c.notes == []
    bf16 = current_split(VLLM, "qwen3.5-35b-a3b", Overrides(cache_bytes=5 * GIB))
    assert any("fp8" in n for n in bf16.notes)  # 279,056 x 20,480 B > 5 GiB
    # no --cache-gib and no `Available KV cache memory`: T B + 2.13 x k x S
    est = current_split(VLLM, "qwen3.5-35b-a3b", Overrides(kv_cache_dtype="fp8"))
    assert est.cache_source == "estimate" and est.cache_bytes == int(279_056 * 10_240 + 2.13 * 2 * S_QWEN35)
    # ceil(16 x 1.1) = 18 requests of 15,000 live tokens (+1,048 for block rounding) need 18 x 2 S +
    # 18 x 16,048 x 10,240 = 2,318,008,320 + 2,957,967,360 = 5,275,975,680 B <= 5 GiB: --max-num-seqs 18
    rec = recommend(
        c,
        {"demand_q": 16.0, "mean_live_tokens": 15_000.0, "longest_request": 100_000},
        Settings(headroom=0.1),
    )
    assert rec.status == "resize" and rec.max_running == 18 and rec.mean_live_tokens == 16_048
    assert rec.live_tokens == 288_864 and rec.need_bytes == 5_275_975_680
    assert {f.flag: f.value for f in rec.flags}["--max-num-seqs"] == "18"
    # a demand the cap and the pool already hold
    assert (
        recommend(
            c, {"demand_q": 4.0, "mean_live_tokens": 15_000.0, "longest_request": 100_000}, Settings()
        ).status
        == "fits"
    )


def _con(steps: list[tuple], requests: list[tuple]) -> duckdb.DuckDBPyConnection:
    """steps: (seconds, running, waiting, kv_usage); requests: (arrival s, queue_s)."""
    config = pl.DataFrame({
        "start_line": [1], "ts": [T0 - timedelta(seconds=30)], "file": ["a.log"], "line": [1],
        "deployment": ["pod-a"], "engine": ["sglang"], "version": ["0.5.9"],
        "model": ["Qwen/Qwen3.5-35B-A3B"],
        "kv_pool_tokens": [10_000], "kv_pool_bytes": [10_000 * B_BF16], "state_pool_slots": [12],
        "state_pool_bytes": [13 * S_QWEN35], "max_running_requests": [4], "max_model_len": [32_768],
    })  # fmt: skip
    st = pl.DataFrame({
        "ts": [T0 + timedelta(seconds=s[0]) for s in steps], "line": list(range(10, 10 + len(steps))),
        "deployment": "pod-a", "kind": "decode", "running": [s[1] for s in steps],
        "waiting": [s[2] for s in steps], "kv_usage": [s[3] for s in steps],
    })  # fmt: skip
    req = pl.DataFrame({
        "deployment": "pod-a", "arrival": [T0 + timedelta(seconds=r[0]) for r in requests],
        "queue_s": [r[1] for r in requests], "e2e_s": [r[1] + 5.0 for r in requests],
        "prompt_tokens": 1000, "output_tokens": 100,
    })  # fmt: skip
    return frames_connection(req, engine_steps=st, engine_config=config)


STEPS = [
    (0, 2, 0, 0.2),
    (10, 4, 1, 0.3),
    (20, 4, 3, 0.4),
    (30, 4, 2, 0.9),
    (40, 4, 1, 0.5),
    (50, 3, 1, 0.3),
    (60, 0, 0, 0.0),
    (200, 4, 2, 0.1),
]
REQUESTS = [(12, 5.0), (35, 1.0), (45, 2.0), (200, 0.5)]


def test_episodes_and_queueing_cost_from_step_lines():
    res = memsplit(
        _con(STEPS, REQUESTS),
        "qwen3.5-35b-a3b",
        run_whatif=False,
        exact=False,
        settings=Settings(percentile=0.9, merge_s=0.0),
    )
    d = res.tables["diagnosis"].row(0, named=True)
    # weights: 10 s to the next line, the 140 s silence capped at 60 s, the last line 0
    assert (d["lines"], d["span_s"], d["observed_s"]) == (8, 200.0, 120.0)
    # binding (at cap 4, waiting, KV < 0.8): 10, 20, 40, 200; 30 is KV-bound (0.9); 50 waits below the cap
    assert (d["binding_lines"], d["kv_bound_lines"], d["at_cap_lines"], d["queued_lines"]) == (4, 1, 5, 6)
    assert (d["binding_s"], d["binding_share"]) == (30.0, 30.0 / 200)
    # unmerged: [10, 30), [40, 50) and the 0-s one at 200 (after a silence longer than 60 s)
    assert (d["episodes"], d["longest_episode_s"]) == (3, 20.0)
    ep = res.tables["episodes"]
    assert ep["duration_s"].to_list() == [20.0, 10.0, 0.0] and ep["peak_waiting"].to_list() == [3, 1, 2]
    # waiting x weight: 1x10 + 3x10 + 2x10 + 1x10 + 1x10 = 80; binding 50, KV-bound 20, below the cap 10
    assert (d["waiting_request_s"], d["binding_waiting_request_s"]) == (80.0, 50.0)
    assert (d["kv_bound_waiting_request_s"], d["below_cap_waiting_request_s"]) == (20.0, 10.0)
    assert d["limit"] == "state_pool"  # 12 slots // 3 = 4 = the cap
    # requests arriving in an episode: 12 s (queue 5) and 45 s (queue 2)
    assert (d["episode_requests"], d["episode_queue_s_sum"], d["episode_queue_p50"]) == (2, 7.0, 3.5)
    assert d["episode_queue_p99"] == pytest.approx(2 + 0.99 * 3)
    # merged (default 30 s): the 10-s break at 30-40 s joins the first two runs into [10, 50)
    merged = memsplit(_con(STEPS, REQUESTS), "qwen3.5-35b-a3b", run_whatif=False, exact=False)
    m = merged.tables["diagnosis"].row(0, named=True)
    assert (m["episodes"], m["longest_episode_s"]) == (2, 30.0)
    assert merged.tables["episodes"].row(0, named=True)["ended"] == T0 + timedelta(seconds=50)
    # now 35 s (queue 1) is inside too: queue times 1, 2, 5 -> p50 2, p99 2 + 0.98 x 3
    assert (m["episode_requests"], m["episode_queue_s_sum"], m["episode_queue_p50"]) == (3, 8.0, 2.0)
    assert m["episode_queue_p99"] == pytest.approx(2 + 0.98 * 3)
    dem = res.tables["demand"].row(0, named=True)
    # demand (running + waiting) 2, 5, 7, 6, 5, 4, 0, 6 weighing 10, 10, 10, 10, 10, 10, 60, 0 (120 s):
    # cumulative 0:60, 2:70, 4:80, 5:100, 6:110, 7:120 -> p90 (108 s) = 6; peak 7
    assert (dem["demand_q"], dem["demand_peak"]) == (6.0, 7.0)
    # live tokens = KV usage x 10,000: sum(live x w) 260,000 / sum(running x w) 210
    assert dem["mean_live_tokens"] == pytest.approx(260_000 / 210)
    rec = res.tables["recommendation"].row(0, named=True)
    assert rec["concurrency"] == math.ceil(6 * 1.1)  # 7 > the cap of 4
    # R = 10,000 x 20,480 + 13 S = 1,041,858,560 B cannot hold 7 x 3 S = 1.35e9 B of state: short; the best
    # split holds (R - S) / (3 S + 20,480 x 1,238.1) = 977,469,440 / 218,523,550 = 4.47 -> 4 requests
    assert (rec["status"], rec["max_running"], rec["cache_bytes"]) == ("short", 4, 1_041_858_560)
    assert merged.tables["demand"]["demand_q"].to_list() == [7.0]  # p99: 118.8 s of 120 -> 7


def test_starts_of_models_that_are_not_hybrid_presets_are_skipped_with_a_note():
    con = _con(STEPS, REQUESTS)
    con.execute(
        "create or replace view engine_config as select * replace ('meta-llama/Llama-3.1-8B' as model, "
        "'pod-b' as deployment) from _engine_config union all select * from _engine_config"
    )
    res = memsplit(con, run_whatif=False, exact=False)  # the model each start logged
    assert res.tables["current"]["profile"].to_list() == ["Qwen3.5-35B-A3B"]
    assert any("skipped: no model preset 'meta-llama/Llama-3.1-8B'" in n for n in res.notes)
    with pytest.raises(UsageError, match="not an attention"):  # an explicit model must fit every start
        memsplit(con, "gemma-3-4b", run_whatif=False, exact=False)


def test_flags_map_from_either_form():
    assert flag_map([{"key": "a", "value": "1"}, {"key": "b", "value": None}]) == {"a": "1"}
    assert flag_map({"a": 1}) == {"a": "1"} and flag_map(None) == {}


def test_sample_logs_old_vllm_engine_matches_ground_truth(tmp_path):
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    ingest([str(SAMPLE / "vllm" / "before")], tmp_path / "store", year=truth["year"], tz="UTC")
    res = memsplit(
        Store.open(tmp_path / "store").connect(),
        "qwen3.5-35b-a3b",
        run_whatif=False,
        overrides=Overrides(cache_bytes=5 * GIB, kv_cache_dtype="fp8"),
    )
    diag = {r["deployment"]: r for r in res.tables["diagnosis"].to_dicts()}
    for dep in truth["deployments"]:
        if dep["label"] != "before":
            continue
        d, st = diag[dep["deployment"]], dep["stats"]
        assert d["at_cap_lines"] == st["intervals_at_cap"]
        assert d["at_cap_queued_lines"] == st["intervals_at_cap_waiting"]
        assert d["queued_lines"] == st["intervals_waiting"]
        # the log prints KV usage to 0.1 %
        assert d["kv_usage_median_at_cap"] == pytest.approx(st["kv_usage_median_at_cap"], abs=5e-4)
        assert d["kv_usage_mean_queued"] == pytest.approx(st["kv_usage_mean_while_waiting"], abs=5e-4)
        assert d["binding_lines"] > 0 and d["episodes"] > 0
    cur = res.tables["current"].row(0, named=True)
    assert (cur["kv_pool_tokens"], cur["state_slots"], cur["cap"]) == (279_056, 39, 13)


# An SGLang pod with 2,447,000,000 B for its caches, split by the default r = 0.9:
# int(R x 0.9 / 1.9 // S) = 18 slots -> 6 running requests (radix cache: 3 each); KV (R - 18 S) // 20,480 =
# 62,890 tokens. Bursty chat of ~1,500-token prompts and ~700-token answers: the cap binds at 6 while the KV
# pool stays under half full.
SCENARIO = """
name = "memsplit-bind"
description = "SGLang hybrid pod whose default split lets the state pool bind"
model = "Qwen/Qwen3.5-35B-A3B"
start = "2025-06-03T08:00:00Z"
seed = 3
pods = 1
requests_per_day = 34560
[[phases]]
label = "bind"
profile = "hybrid-new"
days = 0.0833333333333
[scheduler]
max_running_requests = 4096
max_num_batched_tokens = 8192
max_model_len = 32768
[memory]
bytes_after_weights = 2447000000
kv_bytes_per_token = 20480
state_bytes_per_slot = 64389120
mamba_full_memory_ratio = 0.9
slots_per_request = 3
[prefix_cache]
enabled = true
block_size = 256
[[workloads]]
name = "chat"
share = 1.0
process = "gamma"
cv = 1.5
prompt = { dist = "lognormal", mean = 1500, sigma = 0.6, min = 16, max = 16000 }
output = { dist = "lognormal", mean = 700, sigma = 0.6, min = 1, max = 4096 }
max_tokens = 4096
"""


@pytest.fixture(scope="module")
def bound_store(tmp_path_factory) -> Path:
    from attribution.simulate.output import simulate_to_dir

    root = tmp_path_factory.mktemp("memsplit")
    (root / "bind.toml").write_text(SCENARIO)
    simulate_to_dir(root / "bind.toml", root / "logs", workers=1)
    ingest([str(root / "logs" / "sglang")], root / "store", tz="UTC")
    return root / "store"


def test_state_pool_binds_recommendation_removes_the_queueing(bound_store):
    res = memsplit(Store.open(bound_store).connect(), "qwen3.5-35b-a3b")
    cur = res.tables["current"].row(0, named=True)
    assert (cur["state_slots"], cur["kv_pool_tokens"], cur["cap"], cur["slots_per_request"]) == (
        18,
        62_890,
        6,
        3,
    )
    # the writer logs (18 + 1) S and 62,890 B tokens in GB with 2 decimals: 0.03 + 1.11 + 0.60 + 0.60 GB
    assert cur["cache_bytes"] == round(2.34 * GIB) and cur["cache_source"] == "log"
    diag = res.tables["diagnosis"].row(0, named=True)
    assert diag["limit"] == "state_pool" and diag["episodes"] > 0 and diag["binding_share"] > 0
    assert diag["kv_usage_median_binding"] < 0.5
    rec = res.tables["recommendation"].row(0, named=True)
    assert rec["status"] in ("resize", "short") and rec["max_running"] > 6
    assert rec["state_slots"] == 3 * rec["max_running"]
    # equal memory: the recommended pools fit the same R, within one KV token
    used = rec["state_bytes"] + rec["kv_bytes"]
    assert cur["cache_bytes"] - B_BF16 < used <= cur["cache_bytes"]
    what = {(r["split"], r["source"]): r for r in res.tables["whatif"].to_dicts()}
    now, after = what[("current", "simulated")], what[("recommended", "simulated")]
    measured = what[("current", "measured")]
    assert now["queue_p99"] == pytest.approx(measured["queue_p99"], rel=0.05)  # the replay reproduces the log
    assert now["queue_p99"] > 5 and now["waited_share"] > 0.1
    assert after["queue_p99"] < 1 and after["waited_share"] < 0.02
    assert after["capacity_per_day"] > now["capacity_per_day"]
    flags = {r["flag"]: r["value"] for r in res.tables["flags"].to_dicts()}
    assert flags["--max-mamba-cache-size"] == str(rec["state_slots"])


def test_cli_json_and_table(bound_store):
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "memsplit",
            "--store",
            str(bound_store),
            "--model",
            "qwen3.5-35b-a3b",
            "--no-whatif",
            "--format",
            "json",
        ],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["analysis"] == "memsplit" and doc["tables"]["summary"][0]["limit"] == "state_pool"
    assert doc["tables"]["whatif"] == []
    table = runner.invoke(app, ["memsplit", "--store", str(bound_store), "--no-whatif", "--engine", "sglang"])
    assert table.exit_code == 0 and "--max-mamba-cache-size" in table.stdout
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from attribution.cli import main; main()",
            "memsplit",
            "--store",
            str(bound_store),
            "--engine",
            "vllm",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stdout == "" and "no engine start" in proc.stderr
