"""`memsplit` on the SGLang pod of sample_logs/ (issue: "detects that the state pool binds under the old split,
recommends a split, and its what-if shows the queueing gone at equal memory"). The pools are worked out here
from scenarios/sample-sglang.toml by SGLang's formula (memory-and-thresholds.md A1.2, A1.3); the queueing and
concurrency figures are compared with ground_truth.json, which the simulator wrote from its own requests."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

from attribution.memsplit import memsplit
from attribution.store import Store

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs"
SCENARIO = tomllib.loads((REPO / "attribution/simulate/scenarios/sample-sglang.toml").read_text())
GIB = 1 << 30

pytestmark = pytest.mark.skipif(
    not (SAMPLE / "ground_truth.json").exists(), reason="sample_logs/ not generated"
)


def _pools() -> tuple[int, int, int, int, int]:
    """(B, S, state slots, KV tokens, running cap) as SGLang 0.5.9 splits the scenario's bytes (A1.2):
    slots = int(R x r / (1 + r) // S), tokens = (R - slots x S) // B, cap = slots // 3 (radix cache)."""
    m = SCENARIO["memory"]
    rest, b, s, r = m["bytes_after_weights"], m["kv_bytes_per_token"], m["state_bytes_per_slot"], 0.9
    assert m["mamba_full_memory_ratio"] == r  # the default split
    slots = int(rest * r / (1 + r) // s)
    return b, s, slots, int((rest - slots * s) // b), slots // 3


B, S, SLOTS, KV_TOKENS, CAP = _pools()


@pytest.fixture(scope="module")
def truth() -> tuple[dict, dict, dict]:
    doc = json.loads((SAMPLE / "ground_truth.json").read_text())
    (pod,) = [d for d in doc["deployments"] if d["engine"] == "sglang"]
    (cohort,) = [c for c in doc["cohorts"] if c["engine"] == "sglang"]
    return doc, pod, cohort


@pytest.fixture(scope="module")
def answer_and_tables(sample_store):
    """memsplit of the SGLang pod, and the int_memsplit temporary tables of its connection when it called
    exact_in_system (test_memsplit_drops_its_step_tables_before_the_exact_sweep): one computation for both."""
    from attribution.memsplit import assemble

    con = Store.open(sample_store).connect()
    seen: list[set[str]] = []

    def temp_tables() -> set[str]:
        return {n for (n,) in con.execute("select table_name from duckdb_tables() where temporary").fetchall()
                if n.startswith("int_memsplit")}

    exact = assemble.exact_in_system
    with pytest.MonkeyPatch.context() as m:
        m.setattr(assemble, "exact_in_system", lambda c, s: (seen.append(temp_tables()), exact(c, s))[1])
        # the whole sample store: the SGLang pod is told apart from the vLLM pods by engine="sglang"
        res = memsplit(con, engine="sglang")  # the model the log names
    return res, seen


@pytest.fixture(scope="module")
def answer(answer_and_tables):
    return answer_and_tables[0]


def test_pools_are_sglang_default_split_of_the_scenario(answer, truth):
    _, pod, _ = truth
    # 2.5e9 B: int(2.5e9 x 0.9 / 1.9 // 64,389,120) = 18 slots, (2.5e9 - 18 S) // 20,480 = 65,478 tokens
    assert (SLOTS, KV_TOKENS, CAP) == (18, 65_478, 6)
    assert (pod["state_pool_slots"], pod["kv_pool_tokens"], pod["max_running_requests"]) == (
        SLOTS,
        KV_TOKENS,
        CAP,
    )
    cur = answer.tables["current"].row(0, named=True)
    assert (cur["deployment"], cur["engine"], cur["profile"]) == (
        pod["deployment"],
        "sglang",
        "Qwen3.5-35B-A3B",
    )
    assert (cur["state_slots"], cur["kv_pool_tokens"], cur["cap"], cur["slots_per_request"]) == (
        SLOTS, KV_TOKENS, CAP, 3)  # fmt: skip
    assert (cur["kv_bytes_per_token"], cur["state_bytes_per_slot"]) == (B, S)
    # R from the allocation lines, each in GB to 2 decimals: (18 + 1) S = 1.139 GiB -> conv 0.03 + ssm 1.11;
    # 65,478 B = 1.249 GiB -> K 0.62 + V 0.62: 2.38 GiB
    assert cur["cache_bytes"] == round(2.38 * GIB) and cur["cache_source"] == "log"
    assert answer.notes and not any("check --" in n for n in answer.notes)  # the log agrees with the preset


def test_diagnosis_state_pool_binds_while_kv_has_room(answer, truth):
    _, pod, _ = truth
    d = answer.tables["diagnosis"].row(0, named=True)
    assert d["limit"] == "state_pool"
    assert d["episodes"] > 10 and d["binding_lines"] > 100 and d["kv_bound_lines"] == 0
    # most of the queueing (request-seconds waiting) happened at the cap with the KV pool below 0.8
    assert d["binding_waiting_request_s"] > 0.8 * d["waiting_request_s"]
    # at the cap every state slot is taken (6 x 3 / 18: `mamba usage: 1.00`) while the KV pool is about a
    # fifth full, as the simulator's ten-second samples say (the log prints usage to 0.01)
    assert d["state_usage_median_at_cap"] == pod["peak_state_usage"] == 1.0
    assert pod["stats"]["kv_usage_median_at_cap"] < 0.5
    assert d["kv_usage_median_at_cap"] == pytest.approx(pod["stats"]["kv_usage_median_at_cap"], abs=0.02)
    assert d["kv_usage_median_binding"] < 0.5
    # the log's queue times are the simulator's (to the microsecond the log's timestamps keep)
    assert d["queue_p99"] == pytest.approx(truth[2]["queue_s"]["p99"], abs=1e-6)
    dem = answer.tables["demand"].row(0, named=True)
    assert dem["running_peak"] == pod["peak_running"] == CAP
    assert dem["in_system_peak_exact"] == pod["peak_in_flight"] > CAP


def test_recommended_split_fits_the_same_memory(answer):
    cur = answer.tables["current"].row(0, named=True)
    rec = answer.tables["recommendation"].row(0, named=True)
    dem = answer.tables["demand"].row(0, named=True)
    # C* = ceil(p99 demand x 1.1) requests, each with 3 slots; the KV pool takes the rest of the same R
    assert rec["status"] == "resize" and rec["feasible"]
    assert rec["concurrency"] == rec["max_running"] == math.ceil(dem["demand_q"] * 1.1) > CAP
    assert rec["state_slots"] == 3 * rec["max_running"]
    assert rec["state_bytes"] == (rec["state_slots"] + 1) * S  # SGLang's padding slot
    assert rec["kv_tokens"] == (cur["cache_bytes"] - rec["state_bytes"]) // B
    assert cur["cache_bytes"] - B < rec["state_bytes"] + rec["kv_bytes"] <= cur["cache_bytes"]
    assert rec["need_bytes"] <= cur["cache_bytes"]
    flags = {r["flag"]: r["value"] for r in answer.tables["flags"].to_dicts()}
    assert flags["--max-mamba-cache-size"] == str(rec["state_slots"])
    assert flags["--max-running-requests"] == str(rec["max_running"])
    assert float(flags["--mamba-full-memory-ratio"]) > 0.9  # more of R to the state pool than the default


def test_whatif_queueing_gone_at_equal_memory(answer, truth):
    _, _, cohort = truth
    what = {(r["split"], r["source"]): r for r in answer.tables["whatif"].to_dicts()}
    measured, now = what[("current", "measured")], what[("current", "simulated")]
    after = what[("recommended", "simulated")]
    p99 = cohort["queue_s"]["p99"]  # 11.6 s: what the day's requests queued
    assert measured["queue_p99"] == pytest.approx(p99, abs=1e-6) and p99 > 5
    assert measured["requests"] == now["requests"] == after["requests"] == cohort["requests"]
    assert now["queue_p99"] == pytest.approx(p99, rel=0.05)  # the replay reproduces the log
    assert now["waited_share"] > 0.05  # more than one request in 20 queued for a second or more
    # the recommended split, same memory: the p99 queue at least ten times shorter and under a second;
    # fewer than one request in 50 waits a second
    assert after["queue_p99"] < min(1.0, p99 / 10)
    assert after["waited_share"] < 0.02 and after["queue_mean"] < now["queue_mean"] / 5
    assert after["peak_running"] <= after["cap"] and after["capacity_per_day"] > now["capacity_per_day"]
    s = answer.tables["summary"].row(0, named=True)
    assert (s["limit"], s["status"]) == ("state_pool", "resize")
    assert s["queue_p99_now"] == now["queue_p99"] and s["queue_p99_after"] == after["queue_p99"]


def test_exact_in_system_equals_the_concurrency_analysis_of_each_period(sample_store):
    # exact_in_system reads every period's requests once and sweeps each period's deployments; the numbers
    # must be those of the concurrency analysis run on each start's period (its exact in_system row).
    import polars as pl

    from attribution import analyses
    from attribution.memsplit.current import Overrides, current_split
    from attribution.memsplit.diagnosis import exact_in_system, load_starts

    con = Store.open(sample_store).connect()
    starts = load_starts(con, engine=None, deployments=None, since=None, until=None)
    splits = [current_split(row, row["model"], Overrides()) for row in starts.to_dicts()]
    assert len({(c.period_since, c.period_until) for c in splits}) > 2
    got, notes = exact_in_system(con, splits)
    assert not notes
    want, of_period = [], {}
    for c in splits:
        period = (c.period_since, c.period_until)  # (the pods of a period share its one analysis, every pod's)
        if period not in of_period:
            sel = analyses.select(con, since=c.period_since, until=c.period_until, by="all")
            of_period[period] = analyses.concurrency(sel, per_group=False, estimate=False).tables["pods"]
        r = of_period[period].filter((pl.col("metric") == "in_system") & (pl.col("source") == "exact")
                        & (pl.col("deployment") == c.deployment))
        if r.height:
            want.append({"start_id": c.start_id, "in_system_peak_exact": r["peak"][0],
                         "in_system_p99_exact": r["p99"][0]})
    assert got.height == len(want) > 0
    assert got.sort("start_id").to_dicts() == sorted(want, key=lambda r: r["start_id"])


def test_memsplit_drops_its_step_tables_before_the_exact_sweep(answer_and_tables):
    # the step tables (int_memsplit_step_lines, _lines, _episodes, _starts: ~600 MB at 1M requests) are read by
    # the step frames only: dropped before exact_in_system reads the window's requests beside them; the what-if's
    # arrivals still read int_memsplit_periods after it (the temporary tables as exact_in_system was called, in
    # the module's one memsplit of the SGLang pod: answer_and_tables)
    res, seen = answer_and_tables
    assert seen == [{"int_memsplit_periods"}]
    assert res.tables["whatif"].height and res.tables["demand"]["in_system_p99_exact"].is_not_null().any()
