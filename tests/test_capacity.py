"""Capacity and cost: completed requests per pod per day; the capacity at the running limit, measured at
saturation or extrapolated from service times, checked by hand-worked schedules and against the simulator
(identical pods, a 2x service time, the 88k -> 194k engine switch); the running limit and the KV-derived
concurrency of real logs; the cost per million tokens ($2/h at 100 output tokens/s is $5.556 per million)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from conftest import shared

from attribution import analyses
from attribution.analyses import capacity, select
from attribution.analyses.capacity import EXTRAPOLATED, SATURATED
from attribution.analyses.common import frames_connection
from attribution.ingest import ingest
from attribution.schema import TABLES
from attribution.simulate import load_scenario, simulate
from attribution.store import Store

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _requests(rows: list[tuple], deployment: str = "pod-a", workload: str = "w") -> pl.DataFrame:
    """rows: (arrival_s, queue_s, e2e_s, prompt, output, status)."""
    return pl.DataFrame({
        "deployment": [deployment] * len(rows), "workload": [workload] * len(rows),
        "arrival": [T0 + timedelta(seconds=r[0]) for r in rows], "queue_s": [r[1] for r in rows],
        "ttft_s": [r[1] for r in rows], "e2e_s": [r[2] for r in rows], "prompt_tokens": [r[3] for r in rows],
        "output_tokens": [r[4] for r in rows], "status": [r[5] for r in rows],
    }, schema_overrides={"queue_s": pl.Float64})


def _config(cap: int | None, deployment: str = "pod-a", engine: str = "sglang", tp: int | None = None
            ) -> pl.DataFrame:
    return pl.DataFrame({"ts": [T0], "deployment": [deployment], "engine": [engine], "tp_size": [tp],
                         "max_running_requests": [cap], "start_line": [1]},
                        schema_overrides={"max_running_requests": pl.Int64, "tp_size": pl.Int64})


def test_littles_law_and_cost_per_million_tokens():
    # two requests running [0, 10) s side by side, 500 output tokens each: 100 output tokens/s over 10 s;
    # a request failing at once (at 10 s) is not completed and never in the system
    df = _requests([(0, 0.0, 10.0, 2000, 500, "ok"), (0, 0.0, 10.0, 1600, 500, "ok"),
                    (10, 0.0, 0.0, 100, 0, "error")])
    res = capacity(select(frames_connection(df), by="all"), gpu_hour_cost=2.0)
    cap = res.tables["capacity"].row(0, named=True)
    assert cap["deployment"] == "pod-a" and cap["completed_per_day"] == pytest.approx(2 / 10 * 86400)
    little = res.tables["littles_law"].row(0, named=True)
    assert little["completed"] == 2 and little["completed_per_s"] == pytest.approx(0.2)
    assert little["mean_in_system"] == pytest.approx(2.0) and little["littles_in_system"] == pytest.approx(0.2 * 10)
    assert (cap["observed_peak"], cap["peak_metric"]) == (2, "running")
    # no limit in the logs: the observed peak stands in, labelled
    assert (cap["running_limit"], cap["limit_source"]) == (2, "observed peak")
    assert any("no configured running limit; capacity uses 2 (observed peak)" in n for n in res.notes)
    assert cap["capacity_per_day"] == pytest.approx(2 / 10 * 86400) and cap["utilization"] == pytest.approx(1.0)
    cost = res.tables["cost"].row(0, named=True)
    assert cost["gpus"] == 1 and cost["output_tps"] == pytest.approx(100)
    assert cost["usd_per_m_output"] == pytest.approx(5.556, abs=5e-4)
    assert cost["usd_per_m_input"] == pytest.approx(2 / (360 * 3600) * 1e6)  # 3,600 tokens / 10 s
    assert cost["usd_per_m_output_at_capacity"] == pytest.approx(cost["usd_per_m_output"])


def test_capacity_at_the_configured_limit_and_gpus_from_tensor_parallelism():
    # one request at a time for 4 s each, then two together: the limit of 64, not the peak of 2, sets capacity
    df = _requests([(0, 0.0, 4.0, 10, 40, "ok"), (4, 0.0, 4.0, 10, 40, "ok"), (8, 0.0, 4.0, 10, 40, "ok"),
                    (8, 0.0, 4.0, 10, 40, "ok")])
    config = _config(64, tp=4)
    res = capacity(select(frames_connection(df, engine_config=config), by="all"), gpu_hour_cost=2.0)
    cap = res.tables["capacity"].row(0, named=True)
    assert cap["completed_per_day"] == pytest.approx(4 / 12 * 86400)
    assert cap["observed_peak"] == 2 and (cap["running_limit"], cap["limit_source"]) == (64, "configured")
    # every request holds its slot 4 s, alone or beside another: S(n) = 4 s, 64 at once complete 16 a second
    assert cap["service_s"] == pytest.approx(4.0) and cap["service_s_at_limit"] == pytest.approx(4.0)
    assert cap["capacity_per_day"] == pytest.approx(64 / 4 * 86400)
    assert cap["capacity_method"] == EXTRAPOLATED
    assert cap["capacity_lo"] <= cap["capacity_per_day"] <= cap["capacity_hi"]
    assert cap["utilization"] == pytest.approx((4 / 12) / (64 / 4))
    cost = res.tables["cost"].row(0, named=True)
    assert cost["gpus"] == 4  # tp_size
    assert cost["usd_per_m_output"] == pytest.approx(8 / (160 / 12 * 3600) * 1e6)
    assert cost["usd_per_m_output_at_capacity"] == pytest.approx(cost["usd_per_m_output"] * cap["utilization"])
    one = capacity(select(frames_connection(df, engine_config=config), by="all"), gpu_hour_cost=2.0, gpus_per_pod=1)
    assert one.tables["cost"]["gpus"].to_list() == [1]


def test_per_group_rows_and_arrival_only_deployments():
    df = pl.concat([
        _requests([(0, 0.0, 10.0, 10, 10, "ok")], workload="x"),
        _requests([(0, 0.0, 5.0, 10, 10, "ok"), (1, 0.0, 5.0, 10, 10, "ok")], workload="y"),
        pl.DataFrame({"deployment": ["trace"], "workload": ["t"], "arrival": [T0], "prompt_tokens": [5],
                      "output_tokens": [5]}),
    ], how="diagonal_relaxed")
    res = capacity(select(frames_connection(df), by="workload"))
    little = res.tables["littles_law"]
    assert little.select("deployment", "workload", "completed").rows() == [("pod-a", "x", 1), ("pod-a", "y", 2)]
    assert res.tables["capacity"]["observed_peak"].to_list() == [1, 2]
    # a group's capacity is the pod's with all traffic like the group's: x holds a slot 10 s, y 5 s
    assert res.tables["capacity"]["service_s"].to_list() == pytest.approx([10.0, 5.0])
    assert "cost" not in res.tables
    assert any("no capacity: trace" in n for n in res.notes)


def test_service_time_grows_with_the_running_count_and_is_extrapolated_to_the_limit():
    # alone a request holds its slot 2 s; two at once hold theirs 3 s each (a step serves both, slower):
    # S(n) = 1 + n s, so at the limit of 4 a request takes 5 s and 4 complete every 5 s
    alone = [(i * 10.0, 0.0, 2.0, 10, 10, "ok") for i in range(6)]
    pairs = [(100 + i * 10.0 + d, 0.0, 3.0, 10, 10, "ok") for i in range(6) for d in (0, 0)]
    con = frames_connection(_requests(alone + pairs), engine_config=_config(4))
    cap = capacity(select(con, by="all")).tables["capacity"].row(0, named=True)
    assert cap["service_s_at_limit"] == pytest.approx(5.0)
    assert cap["capacity_per_day"] == pytest.approx(4 / 5 * 86400) and cap["capacity_method"] == EXTRAPOLATED
    assert cap["saturated_per_day"] is None and cap["at_limit_share_of_busy_time"] == 0


def test_measured_at_saturation_where_requests_wait_at_the_limit():
    # limit 2, every request holds its slot 10 s; one arrives every 4 s for 2 h, so a queue builds and the pod
    # runs 2 at once: it delivers 2 every 10 s, 17,280 a day; the queue times are those of a 2-slot FIFO
    free, rows = [0.0, 0.0], []
    for i in range(1800):
        t = i * 4.0
        slot = min(range(2), key=lambda k: free[k])
        start = max(t, free[slot])
        free[slot] = start + 10.0
        rows.append((t, start - t, start + 10.0 - t, 10, 10, "ok"))
    con = frames_connection(_requests(rows), engine_config=_config(2))
    cap = capacity(select(con, by="all")).tables["capacity"].row(0, named=True)
    assert cap["capacity_method"] == SATURATED and cap["saturated_per_day"] == pytest.approx(17_280, rel=1e-3)
    assert cap["extrapolated_per_day"] == pytest.approx(17_280, rel=1e-3)  # the cross-check agrees
    assert cap["capacity_lo"] <= cap["capacity_per_day"] <= cap["capacity_hi"]
    assert cap["at_limit_share_of_busy_time"] > 0.99


def _simulated(scn, by: str = "all") -> pl.DataFrame:
    """The capacity table of a simulated run, read through frames as a store would hold them."""
    res = simulate(scn, workers=1)
    cfg = res.pods.select("deployment", "max_running_requests", "engine", "version", pl.lit(1).alias("start_line"),
                          pl.lit(res.requests["arrival"].min()).alias("ts"))
    req = res.requests.select([c for c in res.requests.columns if c in TABLES["requests"]])
    return capacity(select(frames_connection(req, engine_config=cfg), by=by)).tables["capacity"]


def _per_pod(cap: pl.DataFrame, label: str) -> list[float]:
    return cap.filter(pl.col("label") == label).sort("deployment")["capacity_per_day"].to_list()


def test_simulated_identical_pods_agree_and_a_doubled_service_time_halves_capacity():
    """Two identical pods below saturation agree within 10%; the same pods with every step cost doubled and
    half the traffic (the same utilisation) give half the capacity, within 10%."""
    scn = load_scenario("engine-switch")
    new = scn.phases[1]
    fast = replace(scn, requests_per_day=120_000, phases=(replace(new, label="fast"),))
    cost = {f: getattr(new.profile, f) * 2 for f in ("base_s", "prefill_per_token_s", "prefill_attn_s",
                                                      "decode_per_seq_s", "decode_per_kv_token_s")}
    slow = replace(fast, requests_per_day=60_000, phases=(replace(new, label="slow", days=new.days * 2,
                                                                  profile=replace(new.profile, **cost)),))
    a, b = _per_pod(_simulated(fast, by="label"), "fast"), _per_pod(_simulated(slow, by="label"), "slow")
    assert a[1] / a[0] == pytest.approx(1, abs=0.1) and b[1] / b[0] == pytest.approx(1, abs=0.1)
    assert sum(a) / sum(b) == pytest.approx(2, rel=0.1)


def test_simulated_engine_switch_from_88k_to_194k_requests_a_day():
    """The seed case: before the switch the offered traffic exceeds what a pod completes, so the pod is
    measured at saturation (~88k/day); after it, the same traffic is far below the new capacity, which is
    extrapolated from service times (~194k/day). The truth is what the same pods complete under 3x the
    traffic (saturated throughout)."""
    scn = load_scenario("engine-switch")
    got = _simulated(scn, by="label")
    truth = _simulated(replace(scn, requests_per_day=scn.requests_per_day * 3), by="label")
    assert set(truth["capacity_method"]) == {SATURATED}
    for label, seed, method in (("before", 88_000, SATURATED), ("after", 194_000, EXTRAPOLATED)):
        true = truth.filter(pl.col("label") == label)["completed_per_day"].mean()
        assert true == pytest.approx(seed, rel=0.1), label  # the scenario reproduces the seed's numbers
        rows = got.filter(pl.col("label") == label)
        assert set(rows["capacity_method"]) == {method}, label
        for r in rows.iter_rows(named=True):
            assert r["capacity_per_day"] == pytest.approx(true, rel=0.1), (label, r["deployment"])
            assert r["capacity_lo"] <= r["capacity_per_day"] <= r["capacity_hi"]


def test_sample_logs_identical_vllm_pods_agree(sample_store):
    """sample_logs' two vLLM pods are the same deployment (peak-based capacity gave them 72,543 and 56,497)."""
    cap = capacity(select(Store.open(sample_store).connect(), by="all")).tables["capacity"]
    v = cap.filter(pl.col("deployment").str.starts_with("qwen35-vllm")).sort("deployment").to_dicts()
    assert len(v) == 2 and v[1]["capacity_per_day"] / v[0]["capacity_per_day"] == pytest.approx(1, abs=0.1)
    assert {r["limit_source"] for r in v} == {"configured"} and {r["running_limit"] for r in v} == {13}
    for r in v:
        assert r["capacity_lo"] <= r["capacity_per_day"] <= r["capacity_hi"]
        assert r["capacity_per_day"] >= r["completed_per_day"]


def test_kv_derived_concurrency_is_never_the_running_limit(store_dir):
    """A real vLLM 0.8.5 log: max_num_seqs unset, `Maximum concurrency for 32,768 tokens per request: 1.00x`,
    one request running at most. The limit is vLLM's documented default, labelled; the 1.00x is kept as the
    KV figure it is; no `ceiling` finding (it used to say "ran at the configured limit of 1")."""
    log = shared("traces", "real_logs", "vllm_repo-jayashan10-Deepseek-qwen-deployment.log")
    ingest([str(log)], store_dir, year=2025, tz="UTC")
    con = Store.open(store_dir).connect()
    (dep,) = analyses.concurrency(select(con, by="all")).tables["deployments"].to_dicts()
    assert dep["configured_max_running"] is None and dep["kv_concurrency_at_max_len"] == 1.0
    assert (dep["running_limit"], dep["limit_source"]) == (256, "vllm default")
    assert dep["steps_peak_running"] == 1 and dep["at_limit_share_of_busy_steps"] == 0
    findings = analyses.analyze(con).tables["findings"]
    assert "ceiling" not in findings["kind"].to_list()
    assert not any("limit of 1 " in f for f in findings["finding"])


def test_ceiling_needs_a_material_share_of_busy_time_at_the_limit():
    # limit 2: two requests together for 10 s, then one alone for 90 s: at the limit 10% of the busy time
    df = _requests([(0, 0.0, 10.0, 10, 10, "ok"), (0, 0.0, 10.0, 10, 10, "ok"), (10, 0.0, 90.0, 10, 10, "ok")])
    con = frames_connection(df, engine_config=_config(2))
    kinds = {s: analyses.analyze(con, ceiling_share=s).tables["findings"]["kind"].to_list() for s in (0.05, 0.2)}
    assert "ceiling" in kinds[0.05] and "ceiling" not in kinds[0.2]
