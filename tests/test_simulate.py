"""The pod simulator: hand-worked schedules, queueing theory (Little's law, Erlang C), pool limits, the
hybrid state-pool symptom, determinism. Expected values are computed here from the inputs, not read back
from the simulator."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from attribution.errors import InputError, UsageError
from attribution.simulate import load_scenario, simulate
from attribution.simulate.model import Memory, Phase, Profile, Scenario


def tiny(
    batching: str = "mixed",
    *,
    pool: int = 1_000_000,
    cap: int = 2,
    budget: int = 1000,
    max_model_len: int = 10_000,
) -> Scenario:
    """A pod whose step costs 10 ms + 0.1 ms per prefill token, nothing else: schedules can be worked by hand."""
    prof = Profile("tiny", "vllm", "0.20.0", batching, base_s=0.01, prefill_per_token_s=1e-4, prefill_attn_s=0.0,
                   decode_per_seq_s=0.0, decode_per_kv_token_s=0.0)  # fmt: skip
    base = load_scenario("mmc")
    return replace(base, name="tiny", phases=(Phase("t", prof, 1.0),), workloads=(), memory=Memory(pool),
                   max_running_requests=cap, max_num_batched_tokens=budget, max_model_len=max_model_len)  # fmt: skip


def replay(scn: Scenario, rows: list[tuple[float, int, int]]):
    df = pl.DataFrame(rows, schema=["arrival", "prompt_tokens", "output_tokens"], orient="row")
    return simulate(scn, arrivals=df, steps=True, workers=1)


def times(res) -> dict[int, tuple[float, float, float]]:
    r = res.requests.sort("arrival")
    start = r["arrival"][0]
    sec = [
        ((r[c] - start).dt.total_microseconds() / 1e6).to_list()
        for c in ("admitted", "first_token", "finished")
    ]
    return {i: (round(a, 6), round(f, 6), round(e, 6)) for i, (a, f, e) in enumerate(zip(*sec, strict=True))}


def test_mixed_schedule_by_hand():
    # A (1500 prompt, 3 out) at 0; B (200, 2) at 5 ms; C (100, 1) at 6 ms; budget 1000 tokens; 2 slots.
    # step 1 [0, 0.11]: A chunk 1000 -> 10 ms + 100 ms.  step 2 [0.11, 0.19]: A 500 + B 200 (C: no slot),
    # both first tokens.  step 3 [0.19, 0.20]: decode A, B; B done.  step 4 [0.20, 0.22]: decode A (done)
    # + C's 100-token prefill, whose single output token is its first and last.
    res = replay(tiny(), [(0.0, 1500, 3), (0.005, 200, 2), (0.006, 100, 1)])
    assert times(res) == {0: (0.0, 0.19, 0.22), 1: (0.11, 0.19, 0.2), 2: (0.2, 0.22, 0.22)}
    s = res.steps
    assert s["prefill_tokens"].to_list() == [1000, 700, 0, 100]
    assert s["decode_reqs"].to_list() == [0, 0, 2, 1]
    assert s["waiting"].to_list() == [0, 1, 1, 0]


def test_prefill_first_schedule_by_hand():
    # Same arrivals, SGLang-style: a prefill step pauses decoding. C's prefill at [0.20, 0.22] stalls A,
    # which decodes its last token in a step of its own [0.22, 0.23].
    res = replay(tiny("prefill_first"), [(0.0, 1500, 3), (0.005, 200, 2), (0.006, 100, 1)])
    assert times(res) == {0: (0.0, 0.19, 0.23), 1: (0.11, 0.19, 0.2), 2: (0.2, 0.22, 0.22)}
    assert res.steps["decode_reqs"].to_list() == [0, 0, 2, 0, 1]


def test_kv_exhaustion_preempts_newest_by_hand():
    # Pool of 100 tokens; A and B (40 prompt, 30 out) admitted together (40+40+1 <= 100): one step of
    # 10 ms + 80 * 0.1 ms gives both first tokens at 0.018 (KV 82). 9 decode steps of 10 ms fill the pool
    # (0.108, 10 tokens out each); the next step needs 2 more tokens: B, the newest, is preempted (releasing
    # 50). A decodes its last 20 tokens alone until 0.308; B recomputes its 50 tokens (10 + 5 ms: 0.323,
    # 11th token) and decodes 19 more: 0.513.
    res = replay(tiny(pool=100, budget=1000, max_model_len=100), [(0.0, 40, 30), (0.0, 40, 30)])
    assert times(res) == {0: (0.0, 0.018, 0.308), 1: (0.0, 0.018, 0.513)}
    r = res.requests.sort("finished")
    assert r["preemptions"].to_list() == [0, 1]
    assert res.stats["preemptions"].sum() == 1
    assert res.steps["kv_tokens"].max() <= 100
    # One row per step: 1 prefill step, 9 decode steps of both (KV 82, 84, ... 98 at their start), 20 of A,
    # B's recompute step, 19 of B.
    rows = res.step_rows()
    assert rows.height == 50
    assert [round(x, 6) for x in rows["t_s"][1:10]] == [round(0.018 + 0.01 * j, 6) for j in range(9)]
    assert rows["kv_tokens"][1:10].to_list() == [82 + 2 * j for j in range(9)]


def test_chunked_prefill_budget_respected():
    scn = load_scenario("vllm-chat-small")
    res = simulate(scn, requests=1500, steps=True, workers=1)
    s = res.steps
    assert s["batch_tokens"].max() <= scn.max_num_batched_tokens
    assert (s["prefill_tokens"] + s["decode_reqs"] == s["batch_tokens"]).all()
    # Independently of the step rows: a prefill of N uncached tokens takes at least ceil(N / budget) steps,
    # each costing at least base + prefill_per_token * its chunk.
    prof = scn.phases[0].profile
    r = res.requests.with_columns((pl.col("prompt_tokens") - pl.col("cached_tokens")).alias("new"))
    floor = (r["new"] / scn.max_num_batched_tokens).ceil() * prof.base_s + r["new"] * prof.prefill_per_token_s
    assert ((r["prefill_s"] - floor) > -1e-9).all()
    assert (r["new"] > scn.max_num_batched_tokens).sum() > 0  # the bound was exercised


def test_littles_law_exact_and_sampled():
    res = simulate("vllm-chat-small", requests=3000, steps=True, workers=1)
    r, s = res.requests, res.steps
    span = (r["finished"].max() - r["arrival"].min()).total_seconds()
    lam = r.height / span
    w = r["e2e_s"].mean()
    # L from the step series: time-integral of (running + waiting). The run starts and ends empty, so
    # L * T = sum of time in system, exactly (tolerance: float rounding, 1e-9 relative).
    area = (s["running"] * s["duration_s"] + s["wait_area_s"]).sum()
    assert area / span == pytest.approx(lam * w, rel=1e-9)
    # The 10 s stats rows sample running + waiting at each boundary (idle boundaries have no row: zeros).
    # Like vLLM they report the scheduler's state of the step in progress, which misses requests that
    # arrived since it began, so the sample runs a few % low; tolerance 10% (~360 correlated samples).
    n_b = int(span // res.scenario.stats_interval_s)
    sampled = (res.stats["running"] + res.stats["waiting"]).sum() / n_b
    assert sampled == pytest.approx(lam * w, rel=0.10)


def erlang_c(c: int, a: float) -> float:
    top = a**c / math.factorial(c) / (1 - a / c)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def test_mmc_matches_erlang_c():
    scn = load_scenario("mmc")
    lam = scn.requests_per_day / 86400
    mean_service = scn.phases[0].profile.base_s * scn.workloads[0].output.mean  # geometric steps of base_s
    c = scn.max_running_requests
    pw = erlang_c(c, lam * mean_service)
    res = simulate(scn, requests=60_000, workers=1)
    q = res.requests["queue_s"]
    # Admission happens at step boundaries, so a request that found a free slot waits up to one step.
    waited = q > 1.5 * scn.phases[0].profile.base_s
    # Tolerances are ~3 standard deviations measured over 10 seeds at this size: P(wait) 2%, mean wait 5%.
    assert waited.mean() == pytest.approx(pw, rel=0.07)
    assert q.mean() == pytest.approx(pw / (c / mean_service - lam), rel=0.15)
    # Given a wait, it is exponential with rate c*mu - lambda.
    assert q.filter(waited).mean() == pytest.approx(1 / (c / mean_service - lam), rel=0.15)
    service = res.requests["e2e_s"] - q
    assert service.mean() == pytest.approx(mean_service, rel=0.03)


def test_same_seed_same_output_any_workers():
    a = simulate("hybrid-before-after", requests=3000, seed=5, steps=True, workers=1)
    b = simulate("hybrid-before-after", requests=3000, seed=5, steps=True, workers=2)
    assert a.requests.equals(b.requests)
    assert a.steps.equals(b.steps)
    assert a.stats.equals(b.stats)
    c = simulate("hybrid-before-after", requests=3000, seed=6, steps=True, workers=1)
    assert not a.requests.equals(c.requests)
    assert a.requests["request_id"].n_unique() == a.requests.height


def test_hybrid_state_pool_binds_before_kv():
    scn = load_scenario("hybrid-before-after")
    # The pools from the A1.2 formula, worked here: 60 GiB after weights, r = 0.9, 64.39 MB per slot,
    # 10 KiB per KV token, 3 slots per running request.
    rest = 60 * 2**30
    slots = int(rest * 0.9 / 1.9 // 64_389_120)
    assert (slots, scn.memory.kv_pool_tokens) == (473, int((rest - slots * 64_389_120) // 10240))
    cap = slots // 3
    # One of the four pods (its share of the traffic) for one day on each engine.
    pod = {p.label: replace(scn, pods=1, requests_per_day=scn.requests_per_day / scn.pods,
                            phases=(replace(p, days=1.0),)) for p in scn.phases}  # fmt: skip
    before = simulate(pod["before"], steps=False, workers=1).stats
    after = simulate(pod["after"], steps=False, workers=1).stats
    assert before["running"].max() == cap and after["running"].max() < cap
    pinned = before.filter(pl.col("running") == cap)
    assert pinned.height >= 30  # at least five minutes of 10 s rows at the daily peak
    assert (pinned["waiting"] > 0).mean() > 0.8  # requests queue ...
    assert pinned["kv_usage"].max() < 0.75  # ... while the KV pool has room
    assert pinned["state_usage"].min() == pytest.approx(cap * 3 / slots)


def test_pools_never_exceeded_and_preemption_counted():
    scn = load_scenario("vllm-chat-small")
    tight = replace(scn, memory=Memory(40_000), max_model_len=16_000)
    res = simulate(tight, requests=2500, steps=True, workers=1)
    s, r = res.steps, res.requests
    end_kv = s["kv_tokens"] + s["n_steps"] * s["decode_reqs"]  # KV grows by one token per decoder per step
    assert s["kv_tokens"].max() <= 40_000 and end_kv.max() <= 40_000
    assert s["running"].max() <= scn.max_running_requests
    assert r["preemptions"].sum() > 0 and r["preemptions"].sum() == res.stats["preemptions"].sum()
    # The state-slot cap, checked from request intervals alone (no preemption in this scenario).
    small = simulate("sglang-hybrid-small", requests=4000, workers=1)
    rq = small.requests
    assert rq["preemptions"].sum() == 0
    ev = pl.concat([rq.select(pl.col("admitted").alias("t"), pl.lit(1).alias("d")),
                    rq.select(pl.col("finished").alias("t"), pl.lit(-1).alias("d"))]).sort("t", "d")  # fmt: skip
    m = small.scenario.memory
    assert ev["d"].cum_sum().max() <= m.state_slots // m.slots_per_request


def test_stats_throughput_adds_up_to_requests():
    res = simulate("sglang-hybrid-small", requests=3000, workers=1)
    r, st, dt = res.requests, res.stats, res.scenario.stats_interval_s
    # vLLM 0.20+ counts computed prompt tokens only (cached excluded); no preemption here.
    assert (st["prompt_tput"] * dt).sum() == pytest.approx((r["prompt_tokens"] - r["cached_tokens"]).sum())
    assert (st["gen_tput"] * dt).sum() == pytest.approx(r["output_tokens"].sum())


def test_sessions_grow_and_hit_the_prefix_cache():
    res = simulate("vllm-chat-small", requests=3000, workers=1)
    block = res.scenario.block_size
    chat = res.requests.filter(pl.col("workload") == "chat").sort("session", "turn")
    prev = chat.with_columns(
        (pl.col("prompt_tokens") + pl.col("output_tokens")).shift(1).over("session").alias("prev_ctx"),
        pl.col("turn").shift(1).over("session").alias("prev_turn"),
    ).filter(pl.col("turn") > 0, pl.col("prev_turn") == pl.col("turn") - 1)
    assert prev.height > 300
    assert (prev["prompt_tokens"] >= prev["prev_ctx"] + 8).all()  # new message of at least `min` tokens
    assert (prev["cached_tokens"] <= prev["prev_ctx"]).all()
    assert (prev["cached_tokens"] % block == 0).all()
    assert (prev["cached_tokens"] > 0).mean() > 0.9  # later turns hit the previous turn's blocks
    assert res.requests.filter(pl.col("turn") == 0)["cached_tokens"].max() == 0


def test_lengths_diurnal_cycle_and_bursts():
    scn = load_scenario("hybrid-before-after")
    rng = np.random.default_rng(0)
    for w, target in zip(scn.workloads, (10_159, 8_714, 14_272), strict=True):
        x = w.prompt.sample(rng, 200_000)
        assert x.mean() == pytest.approx(target, rel=0.01)
        assert not ((x > 90_000) & (x < 95_000)).any()
    docs = scn.workloads[2].prompt.sample(rng, 1_000_000)
    assert 60 <= (docs > 95_000).sum() <= 140  # p = 1e-4: 100 expected
    # Daily cycle: amplitude 0.5, peak at 15:00, so 15:00-16:00 carries ~(1.5/0.5) = 3x the load of 03:00.
    one = replace(scn, pods=1, requests_per_day=scn.requests_per_day / scn.pods,
                  phases=(replace(scn.phases[1], days=1.0),))  # fmt: skip
    hours = (
        simulate(one, steps=False, workers=1)
        .requests["arrival"]
        .dt.hour()
        .alias("hour")
        .value_counts()
        .sort("hour")["count"]
    )
    assert hours[15] / hours[3] == pytest.approx(3.0, rel=0.15)


def test_bursty_gamma_arrivals_have_the_stated_cv():
    scn = load_scenario("vllm-chat-small")
    batch = replace(scn.workloads[1], share=1.0)
    res = simulate(replace(scn, workloads=(batch,), diurnal_amplitude=0.0), requests=6000, workers=1)
    gaps = res.requests["arrival"].sort().diff().dt.total_microseconds().drop_nulls() / 1e6
    assert gaps.std() / gaps.mean() == pytest.approx(batch.cv, rel=0.15)


def test_scenario_errors_are_actionable():
    with pytest.raises(InputError, match="known: .*mmc"):
        load_scenario("no-such-scenario")
    with pytest.raises(UsageError, match="smaller than max_model_len"):
        simulate(replace(load_scenario("mmc"), memory=Memory(1000)))


def test_replay_with_block_hashes_and_given_cached_tokens():
    scn = replace(tiny(), prefix_cache=True, block_size=512)
    # A (3 blocks of 512) finishes long before B arrives; B shares A's first two blocks, so 1024 tokens hit
    # (at most (1500 - 1) // 512 whole blocks may hit). C shares nothing.
    df = pl.DataFrame({
        "arrival": [0.0, 10.0, 20.0], "prompt_tokens": [1500, 1500, 1500], "output_tokens": [2, 2, 2],
        "block_hashes": [[11, 12, 13], [11, 12, 99], [7, 8, 9]], "workload": ["a", "b", "a"],
    })  # fmt: skip
    res = simulate(scn, arrivals=df, workers=1)
    r = res.requests.sort("arrival")
    assert r["cached_tokens"].to_list() == [0, 1024, 0]
    assert r["workload"].to_list() == ["a", "b", "a"]
    # Given cached counts are used as they are (capped at prompt - 1: the last token is always computed).
    given = df.drop("block_hashes").with_columns(pl.Series("cached_tokens", [100, 1500, None]))
    r = simulate(scn, arrivals=given, workers=1).requests.sort("arrival")
    assert r["cached_tokens"].to_list() == [100, 1499, 0]
    # Replay keeps the arrivals: datetimes become the scenario's clock.
    t0 = pl.datetime(2025, 7, 1, 9, time_zone="UTC")
    when = df.with_columns(
        (t0 + pl.duration(milliseconds=(pl.col("arrival") * 1000).cast(pl.Int64))).alias("arrival")
    )
    r = simulate(scn, arrivals=when, workers=1).requests
    assert r["arrival"].sort().to_list() == when["arrival"].sort().to_list()
