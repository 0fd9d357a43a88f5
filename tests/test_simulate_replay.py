"""`attribution simulate --replay` and `memsplit --replay`: the simulator serves a trace's real arrival sequence
(Mooncake-style JSONL, BurstGPT and Azure CSV, this tool's exports), under what-if changes to the deployment."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import run_cli

from attribution.replay import read_trace
from attribution.simulate.replay import WhatIf, simulate_replay

SCENARIO = "vllm-chat-small"
# BurstGPT_1.csv's header and first rows, and the Azure 2023 code trace's (../shared/traces/README.md, both
# quoted there from the released files).
BURSTGPT = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,230,1317,Conversation log\n"
            "118,GPT-4,417,276,693,Conversation log\n")
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n"
         "2023-11-16 18:17:04.0319600,3180,8")


def _mooncake(tmp_path, n: int = 60, gap_ms: int = 150):
    """A Mooncake-format trace (the released files' keys and units) with a burst every 10 requests."""
    rows = [{"timestamp": (i // 10) * 10 * gap_ms, "input_length": 600 + 97 * (i % 13),
             "output_length": 40 + 11 * (i % 7), "hash_ids": list(range(i * 3, i * 3 + 3))} for i in range(n)]
    for r in rows:
        r["hash_ids"] = r["hash_ids"][: -(-r["input_length"] // 512)]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_replayed_arrivals_and_lengths_are_the_traces(tmp_path):
    path, rows = _mooncake(tmp_path)
    res, summary, _ = simulate_replay(path, SCENARIO)
    sim = res.requests.sort("arrival", maintain_order=True)
    assert sim.height == len(rows)
    offsets = ((sim["arrival"] - sim["arrival"].min()).dt.total_microseconds() / 1e6).to_list()
    assert offsets == pytest.approx(sorted(r["timestamp"] / 1000 for r in rows))
    assert sorted(sim["prompt_tokens"].to_list()) == sorted(r["input_length"] for r in rows)
    assert sorted(sim["output_tokens"].to_list()) == sorted(r["output_length"] for r in rows)
    assert summary.filter(pl.col("workload") == "replay")["requests"].item() == len(rows)


def test_what_if_changes_act_on_the_same_arrivals(tmp_path):
    path, _ = _mooncake(tmp_path)
    _, base, _ = simulate_replay(path, SCENARIO)
    _, capped, _ = simulate_replay(path, SCENARIO, WhatIf(max_num_seqs=1))
    _, fast, _ = simulate_replay(path, SCENARIO, WhatIf(prefill_speedup=8))
    assert capped["peak_running"].item() == 1 < base["peak_running"].item()
    assert capped["queue_p99"].item() > base["queue_p99"].item()
    assert fast["ttft_p50"].item() < base["ttft_p50"].item()
    _, two, _ = simulate_replay(path, SCENARIO, WhatIf(pods=2))
    assert two["requests"].item() == base["requests"].item()


def test_public_trace_formats_read_through_the_ingest(tmp_path):
    b = tmp_path / "BurstGPT_1.csv"
    b.write_text(BURSTGPT)
    df, notes = read_trace(b)
    assert df["prompt_tokens"].to_list() == [472, 1087, 417] and "burstgpt_trace" in notes[0]
    offs = (df["arrival"] - df["arrival"].min()).dt.total_seconds().to_list()
    assert offs == [0, 40, 113]
    a = tmp_path / "AzureLLMInferenceTrace_code.csv"
    a.write_text(AZURE)
    df, _ = read_trace(a)
    assert df["prompt_tokens"].to_list() == [4808, 3180] and df["workload"].to_list() == ["code", "code"]
    res, _, _ = simulate_replay(b, SCENARIO)
    assert res.requests.height == 3


def test_cli_replay_prints_the_latency_table_and_rejects_misplaced_options(tmp_path, capsys):
    path, rows = _mooncake(tmp_path, n=20)
    code, out, err = run_cli(capsys, "simulate", "--scenario", SCENARIO, "--replay", str(path),
                             "--max-num-seqs", "2")
    assert code == 0, err
    assert "queue_p99" in out and "20" in out and "trace.jsonl: Mooncake-style JSONL, 20 requests" in err
    code, _, err = run_cli(capsys, "simulate", "--scenario", SCENARIO, "--out", str(tmp_path / "o"),
                           "--max-num-seqs", "2")
    assert code == 2 and "--replay" in err
    code, _, err = run_cli(capsys, "simulate", "--scenario", SCENARIO)
    assert code == 2 and "--out" in err
    code, _, err = run_cli(capsys, "simulate", "--scenario", SCENARIO, "--replay", str(tmp_path / "missing.jsonl"))
    assert code == 3


def test_cli_replay_with_out_writes_logs_the_ingest_reads(tmp_path, capsys):
    path, rows = _mooncake(tmp_path, n=20)
    code, _, err = run_cli(capsys, "simulate", "--scenario", SCENARIO, "--replay", str(path), "--out",
                           str(tmp_path / "logs"), "--no-gzip")
    assert code == 0, err
    truth = json.loads((tmp_path / "logs" / "ground_truth.json").read_text())
    assert truth["totals"]["requests"] == 20 and truth["replay"] == str(path)


def test_memsplit_whatif_replays_the_trace(sample_store, tmp_path, capsys):
    path, rows = _mooncake(tmp_path, n=40)
    code, out, err = run_cli(capsys, "memsplit", "--store", str(sample_store), "--deployment", "qwen35-vllm-0",
                             "--since", "2026-05-07", "--replay", str(path), "--format", "json")
    assert code == 0, err
    what = json.loads(out)["tables"]["whatif"]
    assert what and all(r["requests"] == 40 and r["source"] == "simulated" for r in what)
    assert any("of " + str(path) + " (not this start's own)" in n for n in json.loads(out)["notes"])
