"""Concurrency: a hand-computed sweep, the sweep equal to a brute-force count on random intervals (hypothesis),
live KV tokens, window clipping, the sampled path over engine step lines (including the real vLLM log under
../shared, whose published maxima are Running 1 and Waiting 0) and the labelled simulator estimate."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from conftest import shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution import kept, queries
from attribution.analyses import concurrency, select, sweep
from attribution.analyses.common import frames_connection, spread_percentiles
from attribution.analyses.concurrency import step_line_frames
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.store import Store

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _requests(rows: list[tuple], deployment: str = "pod-a", workload: str = "w") -> pl.DataFrame:
    """rows: (arrival_s, queue_s, ttft_s, e2e_s, prompt, output), seconds after T0."""
    return pl.DataFrame({
        "deployment": [deployment] * len(rows),
        "workload": [workload] * len(rows),
        "arrival": [T0 + timedelta(seconds=r[0]) for r in rows],
        "queue_s": [r[1] for r in rows],
        "ttft_s": [r[2] for r in rows],
        "e2e_s": [r[3] for r in rows],
        "prompt_tokens": [r[4] for r in rows],
        "output_tokens": [r[5] for r in rows],
    }, schema_overrides={"queue_s": pl.Float64, "ttft_s": pl.Float64})


def _stats(res, metric: str, deployment: str = "pod-a") -> dict:
    rows = res.tables["pods"].filter(pl.col("deployment") == deployment, pl.col("metric") == metric).to_dicts()
    assert len(rows) == 1, (metric, rows)
    return rows[0]


def test_hand_computed_sweep():
    # r1 waits [0, 1), runs [1, 4), first token at 2; r2 runs [2, 4), first token at 3;
    # r3 arrives at 4, when r1 and r2 end (half-open: no overlap), waits [4, 4.5), runs [4.5, 5.5)
    con = frames_connection(_requests([(0, 1.0, 2.0, 4.0, 10, 4), (2, 0.0, 1.0, 2.0, 20, 2),
                                       (4, 0.5, 1.0, 1.5, 30, 1)]))
    res = concurrency(select(con))
    run = _stats(res, "running")
    # running: 0 for 1.5 s, 1 for 2 s, 2 for 2 s over a 5.5 s span
    assert run["peak"] == 2 and run["peak_at"] == T0 + timedelta(seconds=2)
    assert run["mean"] == pytest.approx(6 / 5.5)
    assert (run["p50"], run["p90"], run["p99"]) == (1, 2, 2)  # cumulative 27%, 64%, 100%
    wait = _stats(res, "waiting")
    assert (wait["peak"], wait["p50"], wait["p90"]) == (1, 0, 1) and wait["mean"] == pytest.approx(1.5 / 5.5)
    assert _stats(res, "in_system")["mean"] == pytest.approx(7.5 / 5.5)
    seen = _stats(res, "seen_at_arrival")  # r1 saw 0, r2 saw r1, r3 saw nobody
    assert (seen["peak"], seen["p50"]) == (1, 0) and seen["mean"] == pytest.approx(1 / 3)
    # just before t = 4: r1 holds 10 + 4 tokens, r2 20 + 2
    assert _stats(res, "kv_tokens")["peak"] == pytest.approx(36)
    assert res.tables["deployments"]["source"].to_list() == ["exact"]
    assert set(res.tables["pods"]["source"]) == {"exact"}


interval = st.tuples(
    st.integers(0, 2_000),  # arrival, ms
    st.integers(0, 300),  # queue, ms
    st.integers(0, 400),  # ttft after admission, ms
    st.integers(1, 1_500),  # running time, ms
    st.integers(0, 5_000),  # prompt tokens
    st.integers(1, 500),  # output tokens
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(interval, min_size=1, max_size=40), st.booleans())
def test_sweep_equals_brute_force_count(ivs, by_workload):
    a = np.array([r[0] for r in ivs], dtype=np.int64) * 1000  # microseconds
    admit = a + np.array([r[1] for r in ivs]) * 1000
    end = admit + np.array([r[3] for r in ivs]) * 1000
    first = np.minimum(admit + np.array([r[2] for r in ivs]) * 1000, end)
    prompt = np.array([r[4] for r in ivs], dtype=float)
    out = np.array([r[5] for r in ivs], dtype=float)
    rows = [((a[i]) / 1e6, (admit[i] - a[i]) / 1e6, (first[i] - a[i]) / 1e6, (end[i] - a[i]) / 1e6, int(prompt[i]),
             int(out[i])) for i in range(len(ivs))]
    df = _requests(rows).with_columns(workload=pl.Series([f"w{i % 2}" for i in range(len(ivs))]))
    con = frames_connection(df)
    sel = select(con, by="workload" if by_workload else "all")
    seg = sweep.frame(sweep.segments(con, None, None, per_group=False)).sort("t")
    t = seg["t"].to_numpy() - int(T0.timestamp() * 1e6)
    running = ((admit[None, :] <= t[:, None]) & (t[:, None] < end[None, :])).sum(1)
    waiting = ((a[None, :] <= t[:, None]) & (t[:, None] < admit[None, :])).sum(1)
    assert seg["running"].to_list() == running.tolist()
    assert seg["waiting"].to_list() == waiting.tolist()
    # every change of the brute-force count happens at an instant of the sweep (the last end closes it)
    assert set(t) == set(np.concatenate([a, admit, first, end]).tolist()) - {end.max()}
    # live KV: prompt from admission, output growing linearly from the first token to the end
    live = (admit[None, :] <= t[:, None]) & (t[:, None] < end[None, :])
    span = np.maximum(end - first, 1)
    grown = np.where(end > first, out * np.clip((t[:, None] - first) / span, 0, 1), np.where(t[:, None] >= first, out, 0))
    kv = (live * (prompt + grown)).sum(1)
    assert seg["kv_start"].to_numpy() == pytest.approx(kv, abs=1e-2)
    res = concurrency(sel)
    # stats: peak, time-weighted mean and what each arrival saw, against brute force
    in_sys = running + waiting
    dur = np.diff(np.append(t, end.max()))
    assert _stats(res, "in_system")["peak"] == in_sys.max()
    assert _stats(res, "in_system")["mean"] == pytest.approx((in_sys * dur).sum() / (end.max() - a.min()))
    seen = [((a <= x) & (x < end)).sum() - 1 for x in a]
    s = _stats(res, "seen_at_arrival")
    assert s["peak"] == max(seen) and s["p90"] == pytest.approx(np.percentile(seen, 90))


def test_window_clips_the_sweep():
    # one request running [0, 100) s, one [50, 60); window [40, 55)
    con = frames_connection(_requests([(0, 0.0, 1.0, 100.0, 0, 1), (50, 0.0, 1.0, 10.0, 0, 1)]))
    res = concurrency(select(con, since=T0 + timedelta(seconds=40), until=T0 + timedelta(seconds=55)))
    run = _stats(res, "running")
    assert run["mean"] == pytest.approx((1 * 10 + 2 * 5) / 15)  # 1 over [40, 50), 2 over [50, 55)
    seen = _stats(res, "seen_at_arrival")  # only the arrival at 50 lies in the window
    assert seen["peak"] == 1 and seen["mean"] == 1


def test_unknown_queue_counts_in_system_only():
    df = _requests([(0, None, 1.0, 10.0, 5, 5), (5, None, 1.0, 10.0, 5, 5)])
    res = concurrency(select(frames_connection(df)))
    assert res.tables["pods"]["metric"].to_list() == ["in_system", "seen_at_arrival"]
    assert _stats(res, "in_system")["peak"] == 2
    assert any("queue time unknown for all 2" in n for n in res.notes)


def test_groups_are_swept_on_their_own():
    df = pl.concat([_requests([(0, 0.0, 1.0, 10.0, 1, 1)], workload="x"),
                    _requests([(5, 0.0, 1.0, 10.0, 1, 1), (6, 0.0, 1.0, 10.0, 1, 1)], workload="y")])
    res = concurrency(select(frames_connection(df), by="workload"))
    g = res.tables["groups"].filter(pl.col("metric") == "running")
    assert dict(zip(g["workload"], g["peak"], strict=True)) == {"x": 1, "y": 2}
    assert _stats(res, "running")["peak"] == 3


def _steps(deployment: str, rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame({
        "ts": [T0 + timedelta(seconds=r[0]) for r in rows], "deployment": [deployment] * len(rows),
        "kind": ["stats"] * len(rows), "running": [r[1] for r in rows], "waiting": [r[2] for r in rows],
        "kv_usage": [r[3] for r in rows],
    })


def test_engine_steps_only_are_sampled_and_labelled():
    steps = _steps("pod-s", [(0, 2, 0, 0.1), (10, 5, 1, 0.5), (20, 1, 0, 0.2), (500, 3, 0, 0.3)])
    config = pl.DataFrame({"ts": [T0], "deployment": ["pod-s"], "kv_pool_tokens": [1000], "start_line": [1]})
    con = frames_connection(_requests([(0, 0.0, 1.0, 2.0, 1, 1)]), engine_steps=steps, engine_config=config)
    res = concurrency(select(con), max_gap_s=60)
    run = _stats(res, "running", "pod-s")
    assert run["source"] == "sampled"
    # weights: 10 s, 10 s, min(480 s, 60 s) = 60 s, 0 s (the last line)
    assert run["peak"] == 5 and run["mean"] == pytest.approx((2 * 10 + 5 * 10 + 1 * 60) / 80)
    assert (run["p50"], run["p90"]) == (1, 5)  # cumulative by value: 1 -> 60 s (75%), 2 -> 70 s, 5 -> 80 s
    assert _stats(res, "kv_tokens", "pod-s")["peak"] == pytest.approx(500)  # 0.5 x the 1,000-token pool
    assert _stats(res, "running")["source"] == "exact"  # pod-a has per-request intervals
    assert any("sampled" in n and "pod-s" in n for n in res.notes)


def _sampled_matches_lines(con, sel, deployments: list[str]) -> pl.DataFrame:
    """queries/concurrency_sampled.sql (over int_concurrency_step_hist.sql: the time at each value) gives the rows of the line-by-line
    oracle tests/oracle/concurrency_sampled_lines.sql: peaks, peak_at, percentiles, spans and line counts
    exactly, means exactly where the values are whole (running, waiting, in_system), else to 1e-12."""
    import oracle

    sel.materialize("int_concurrency_step_lines", deployments=deployments, max_gap_s=60.0)
    sel.materialize("int_concurrency_step_hist")
    qs = sweep.quantile_fractions([0.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0])
    order = ["deployment", "metric"]
    got = sel.run("concurrency_sampled", quantiles=qs).sort(order)
    want = oracle.run(con, "concurrency_sampled_lines", quantiles=qs).sort(order)
    assert got.schema == want.schema and got.height == want.height
    assert got.drop("mean").equals(want.drop("mean"))
    whole = pl.col("metric") != "kv_tokens"
    assert got.filter(whole)["mean"].equals(want.filter(whole)["mean"])
    assert got.filter(~whole)["mean"].to_list() == pytest.approx(want.filter(~whole)["mean"].to_list(), rel=1e-12)
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_stats_from_the_time_at_each_value_equal_the_lines(seed):
    """Step lines with tied values, tied instants, gaps beyond max_gap_s, missing waiting and KV figures,
    fractional KV usage and a deployment whose lines are all at one instant (no weighted time: the mean is the
    lines' average)."""
    rng = np.random.default_rng(seed)
    frames = []
    for k, n in enumerate((400, 150)):
        t = np.cumsum(rng.choice([0, 1, 2, 5, 90], size=n, p=[0.1, 0.4, 0.3, 0.15, 0.05]))
        rows = [(int(t[i]), int(rng.integers(0, 6)), None if rng.random() < 0.1 else int(rng.integers(0, 3)),
                 None if rng.random() < 0.1 else float(rng.random())) for i in range(n)]
        frames.append(_steps(f"pod-{k}", rows))
    frames.append(_steps("pod-2", [(7, 1, 0, 0.25), (7, 4, 2, 0.5), (7, 2, 1, 0.125)]))
    config = pl.DataFrame({"ts": [T0] * 3, "deployment": ["pod-0", "pod-1", "pod-2"], "kv_pool_tokens": [1000, 777, 50],
                           "start_line": [1, 1, 1]})
    con = frames_connection(_requests([(0, 0.0, 1.0, 2.0, 1, 1)]), engine_steps=pl.concat(frames),
                            engine_config=config)
    got = _sampled_matches_lines(con, select(con), ["pod-0", "pod-1", "pod-2"])
    one_instant = got.filter(pl.col("deployment") == "pod-2")
    assert one_instant["span_s"].to_list() == [0.0] * 4
    assert one_instant["mean"].to_list() == pytest.approx([10 / 3, 43.75 / 3, 7 / 3, 1.0])  # in_system, kv, running, waiting
    _sampled_matches_lines(con, select(con, since=T0 + timedelta(seconds=100), until=T0 + timedelta(seconds=400)),
                           ["pod-0", "pod-1"])


def test_sampled_stats_from_the_time_at_each_value_equal_the_lines_on_the_sample_logs(sample_store):
    con = Store.open(sample_store).connect()
    deps = [d for (d,) in con.execute("select distinct deployment from engine_steps where running is not null"
                                      ).fetchall()]
    assert _sampled_matches_lines(con, select(con), deps)["lines"].sum() > 10_000
    first = fetch(con, "select min(ts) from engine_steps").item()
    _sampled_matches_lines(con, select(con, since=first + timedelta(days=1), until=first + timedelta(days=2)), deps)


def _step_frames(sel, deps: list[str], monkeypatch, keep: bool):
    """step_line_frames of `deps` (stats in a fixed order, series, bucket) and whether they were read from
    every deployment's frames kept for the commit (`keep`; else computed for `deps` alone)."""
    asked: list[str] = []
    real = kept.kept
    with monkeypatch.context() as m:
        # (whole days from the per-day frames: test_step_line_frames_of_whole_days_merged_from_the_day_frames_...)
        m.setattr(importlib.import_module("attribution.analyses.concurrency").DayFrames, "of", lambda *a: None)
        if not keep:
            m.setattr(kept, "keeps", lambda con: False)
        m.setattr(kept, "kept", lambda con, name, *a: asked.append(name) or real(con, name, *a))
        stats, series, bucket_s = step_line_frames(sel, deps, max_gap_s=60.0, timeseries=True, bucket_s=None)
    return stats.sort("deployment", "metric"), series, bucket_s, "concurrency_sampled" in asked


def test_step_line_frames_of_some_deployments_are_those_of_every_deployment_filtered(tmp_path, monkeypatch):
    """The frames kept per commit and window for every deployment's step lines (a workload filter's sampled
    pods read them), filtered to some deployments, equal those computed for them alone: stats, series and
    the series' bucket (the longest span of the deployments asked), ranks named `pod #rank`, and a pod whose
    name is another's rank (`pod-1 #1`) computed for the set asked instead."""
    rng = np.random.default_rng(7)
    frames = []
    for k, (n, scale) in enumerate(((300, 2), (200, 1), (150, 40))):
        t = np.cumsum(rng.choice([0, 1, 2, 5, 90], size=n, p=[0.1, 0.4, 0.3, 0.15, 0.05])) * scale
        frames.append(_steps(f"pod-{k}", [(int(x), int(rng.integers(0, 6)), int(rng.integers(0, 3)),
                                           float(rng.random())) for x in t]))
    steps = pl.concat(frames).with_columns(engine_index=pl.when(pl.int_range(pl.len()) % 3 == 0).then(1).otherwise(0))
    config = pl.DataFrame({"ts": [T0] * 3, "deployment": ["pod-0", "pod-1", "pod-2"], "kv_pool_tokens": [1000, 777, 50],
                           "start_line": [1, 1, 1]})
    con = frames_connection(_requests([(0, 0.0, 1.0, 2.0, 1, 1)]), engine_steps=steps, engine_config=config)
    kept.register(con, tmp_path, 1)
    for window in ({}, {"since": T0 + timedelta(seconds=100), "until": T0 + timedelta(seconds=900)}):
        sel = select(con, **window)
        lines = dict(con.execute("select deployment, count(*) from engine_steps where ts >= $s and ts < $u group by 1",
                                 {"s": window.get("since", T0), "u": window.get("until", T0 + timedelta(days=9))}
                                 ).fetchall())
        for deps in (["pod-1"], ["pod-0", "pod-2"], ["pod-2"], ["pod-0", "pod-1"], ["pod-0", "pod-1", "pod-2"]):
            got, want = _step_frames(sel, deps, monkeypatch, True), _step_frames(sel, deps, monkeypatch, False)
            assert got[0].equals(want[0]) and got[1].equals(want[1]) and got[2] == want[2], (window, deps)
            assert set(got[0]["deployment"]) == {f"{d}{r}" for d in deps for r in ("", " #1")}
            # read from every deployment's frames when the set holds at least half of the window's lines
            assert got[3] == (2 * sum(lines[d] for d in deps) >= sum(lines.values())) and not want[3], deps
        assert {p.name.split("-")[0] for p in (tmp_path / "_cache").iterdir()} == {
            "concurrency_step_pods", "concurrency_sampled", "concurrency_sampled_timeseries"}
    # a pod named as another's rank: their lines would share a name, so the set asked is computed alone
    clash = pl.concat([steps, _steps("pod-1 #1", [(3, 1, 0, 0.5), (9, 2, 0, 0.5)]).with_columns(engine_index=0)])
    con = frames_connection(_requests([(0, 0.0, 1.0, 2.0, 1, 1)]), engine_steps=clash, engine_config=config)
    kept.register(con, tmp_path / "clash", 1)
    sel = select(con)
    got, want = _step_frames(sel, ["pod-1"], monkeypatch, True), _step_frames(sel, ["pod-1"], monkeypatch, False)
    assert got[0].equals(want[0]) and got[1].equals(want[1])
    assert [p.name.split("-")[0] for p in (tmp_path / "clash" / "_cache").iterdir()] == ["concurrency_step_pods"]


def test_real_vllm_log_is_sampled_with_published_maxima(tmp_path):
    ingest([str(shared("traces", "vllm_server_logs", "01_2026_05_09_vllm_log_dump.txt"))], tmp_path / "s",
           year=2026, tz="UTC", deployment="spark")
    res = concurrency(select(Store.open(tmp_path / "s").connect()))
    assert res.tables["deployments"].row(by_predicate=pl.col("deployment") == "spark", named=True)["source"] == "sampled"
    # traces/README.md section 7: max Running = 1 and max Waiting = 0 over the stats lines
    assert _stats(res, "running", "spark")["peak"] == 1 and _stats(res, "waiting", "spark")["peak"] == 0


def test_arrival_only_traces_are_estimated_with_the_simulator_and_say_so():
    n = 300
    rng = np.random.default_rng(3)
    df = pl.DataFrame({
        "deployment": ["trace"] * n, "workload": ["t"] * n, "source_kind": ["trace"] * n,
        "arrival": [T0 + timedelta(seconds=float(x)) for x in np.sort(rng.uniform(0, 120, n))],
        "prompt_tokens": rng.integers(100, 3000, n), "output_tokens": rng.integers(1, 300, n),
    })
    con = frames_connection(df)
    res = concurrency(select(con))
    assert res.tables["deployments"]["source"].to_list() == ["estimate"]
    assert set(res.tables["pods"]["source"]) == {"estimate"}
    assert 1 <= _stats(res, "running", "trace")["peak"] <= 256
    assert any(note.startswith("ESTIMATE for trace (300 arrivals") and "vllm-chat-small" in note
               for note in res.notes)
    off = concurrency(select(con), estimate=False)
    assert off.tables["pods"].is_empty() and any("not estimated" in note for note in off.notes)


def test_timeseries_buckets_cover_the_sweep():
    con = frames_connection(_requests([(0, 1.0, 2.0, 4.0, 10, 4), (2, 0.0, 1.0, 2.0, 20, 2)]))
    ts = concurrency(select(con), timeseries=True, bucket_s=1).tables["timeseries"]
    assert ts["running_max"].to_list() == [0, 1, 2, 2]
    assert ts["waiting_max"].to_list() == [1, 0, 0, 0]
    assert ts["covered_s"].sum() == pytest.approx(4.0)
    assert ts["in_system_mean"].to_list() == pytest.approx([1, 1, 2, 2])


def _sweep_matches_sql(con, sel, per_group: bool, bucket_us: int = 60_000_000) -> None:
    """attribution.analyses.sweep gives the rows of the sweep in SQL (queries/int_concurrency_sweep.sql and
    concurrency_sweep_timeseries.sql, what Spark runs) and of the test oracle tests/oracle/concurrency_stats.sql
    over them: counts, times and percentiles exactly; live KV tokens (running sums of fractional rates,
    rounded to 1e-3, summed in another order by DuckDB's windows) to 1e-3."""
    import oracle

    from attribution.analyses.sweep_sql import sweep_states

    since, until = sel.window.since, sel.window.until
    sweep_states(con, since, until, per_group)
    con.execute("create or replace temp table concurrency_segments as "
                "select * exclude (by_group) from int_concurrency_sweep")
    key = ["deployment", "grp", "t"]
    ref = fetch(con, "select * from concurrency_segments").sort(key, nulls_last=True)
    parts = sweep.segments(con, since, until, per_group)
    got = sweep.frame(parts).sort(key, nulls_last=True)
    assert ref.schema == got.schema and ref.height == got.height
    for c in ref.columns:
        if c.startswith("kv_"):
            assert ((ref[c] - got[c]).abs().max() or 0.0) <= 1.0001e-3  # None: no segment in the window
        else:
            assert ref[c].equals(got[c]), c
    order = ["deployment", "grp", "metric"]
    ps = [50.0, 90.0, 95.0, 99.0, 99.9]
    ref_s = spread_percentiles(oracle.run(con, "concurrency_stats", quantiles=sweep.quantile_fractions(ps)), ps
                               ).sort(order, nulls_last=True)
    got_s = sweep.stats(parts, tuple(ps)).sort(order, nulls_last=True)
    assert ref_s.schema == got_s.schema and ref_s.height == got_s.height
    # swept without the live KV tokens (capacity's sweep): the same counts, and the stats of the metrics asked
    lean = sweep.segments(con, since, until, per_group, kv=False)
    assert all(p.kv_start is None for p in lean) and len(lean) == len(parts)
    for a, b in zip(lean, parts, strict=True):
        for c in ("t", "dur", "arrivals", "running", "waiting", "unknown", "in_system"):
            assert np.array_equal(getattr(a, c), getattr(b, c)), c
    asked = ("running", "in_system")
    assert sweep.stats(lean, tuple(ps), asked).sort(order, nulls_last=True).equals(
        got_s.filter(pl.col("metric").is_in(asked)))
    counts_ref, counts_got = (x.filter(pl.col("metric") != "kv_tokens") for x in (ref_s, got_s))
    assert counts_ref.drop("mean").equals(counts_got.drop("mean"))
    assert counts_ref["mean"].to_list() == pytest.approx(counts_got["mean"].to_list(), rel=1e-12)
    kv_ref, kv_got = ref_s.filter(pl.col("metric") == "kv_tokens"), got_s.filter(pl.col("metric") == "kv_tokens")
    for c in ("peak", "mean", "p50", "p90", "p99", "p99_9"):
        assert kv_ref[c].to_list() == pytest.approx(kv_got[c].to_list(), abs=1.0001e-3, rel=1e-6), c
    _streamed_matches(sel, parts, per_group, ps, bucket_us)
    ts_ref = queries.run(con, "concurrency_sweep_timeseries", bucket_us=bucket_us)
    ts_got = sweep.timeseries(parts, bucket_us)
    assert ts_ref.drop("kv_tokens_max").equals(ts_got.drop("kv_tokens_max"))
    assert ((ts_ref["kv_tokens_max"] - ts_got["kv_tokens_max"]).abs().max() or 0.0) <= 1.0001e-3


def _streamed_matches(sel, parts, per_group: bool, ps: list[float], bucket_us: int) -> None:
    """The sweep reduced one part at a time (exact.exact_frames, exact.Held for capacity) gives what the whole
    list of segments gives: the same stats rows in the same order, the same series, the same span (computed
    without sweeping) and the arrays capacity's estimates read."""
    from attribution.analyses import exact

    df = sweep.interval_requests(sel.con, sel.window.since, sel.window.until)
    b = sweep.bounds(df, sel.window.since, sel.window.until)
    assert sweep.requests_span_s(df, b) == sweep.span_s(parts)
    # what exact_frames reads one deployment at a time: the same bounds, deployments in the same order, their rows
    since, until = sel.window.since, sel.window.until
    assert sweep.request_bounds(sel.con, since, until) == b
    deployments = [d for d, _ in sweep.deployment_parts(df)]
    assert sweep.deployment_span_s(sel.con, since, until, deployments, b) == sweep.span_s(parts)
    assert sweep.request_deployments(sel.con, since, until) == [d for d, _ in sweep.deployment_parts(df)]
    for d, part in sweep.deployment_parts(df):
        assert sweep.deployment_requests(sel.con, since, until, d, df.columns).equals(part)
    stats, ts, _ = exact.exact_frames(sel, per_group=per_group, timeseries=True, bucket_s=bucket_us // 1_000_000,
                                      percentiles=ps)
    assert stats.drop("source").equals(sweep.stats(parts, tuple(ps)))
    assert ts is not None and ts.equals(sweep.timeseries(parts, bucket_us))
    with exact.shared_sweeps(sel):
        exact.exact_frames(sel, per_group=per_group, timeseries=False, bucket_s=None, percentiles=ps)
        kept = exact.selection_held(sel, per_group)
    held = exact.selection_held(sel, per_group)  # (swept anew: outside shared_sweeps nothing is kept)
    assert len(kept) == len(held) == len(parts)
    for k, h, p in zip(kept, held, parts, strict=True):
        for x in (k, h):
            assert (x.deployment, x.grp) == (p.deployment, p.grp)
            assert np.array_equal(x.t, p.t) and np.array_equal(x.dur, p.dur)
            assert np.array_equal(x.held, p.running + p.unknown) and np.array_equal(x.busy, p.in_system > 0)
            assert np.array_equal(x.waiting, p.waiting > 0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(interval, min_size=1, max_size=60), st.booleans(), st.booleans())
def test_numpy_sweep_equals_the_sql(ivs, per_group, windowed):
    rows = [(r[0] / 1e3, r[1] / 1e3, (r[1] + r[2]) / 1e3, (r[1] + r[3]) / 1e3, r[4], r[5]) for r in ivs]
    df = _requests(rows).with_columns(workload=pl.Series([f"w{i % 3}" for i in range(len(ivs))]),
                                      deployment=pl.Series([f"pod-{i % 2}" for i in range(len(ivs))]))
    con = frames_connection(df)
    window = {"since": T0 + timedelta(seconds=0.5), "until": T0 + timedelta(seconds=2)} if windowed else {}
    _sweep_matches_sql(con, select(con, by="workload", **window), per_group)


def test_numpy_sweep_equals_the_sql_on_the_sample_logs(sample_store):
    con = Store.open(sample_store).connect()
    _sweep_matches_sql(con, select(con, by="workload"), per_group=True)
    first = fetch(con, "select min(arrival) from joined_requests").item()
    _sweep_matches_sql(con, select(con, since=first + timedelta(days=1), until=first + timedelta(days=2),
                                   by="deployment"), per_group=False, bucket_us=300_000_000)


def test_timeseries_of_step_lines_where_requests_cannot_split_running_from_waiting():
    # pod-a: queue time unknown, so its sweep knows only in_system; pod-a and pod-s print step lines
    steps = pl.concat([_steps("pod-a", [(0, 2, 1, 0.1), (30, 4, 0, 0.2), (70, 1, 3, 0.3)]),
                       _steps("pod-s", [(5, 7, 2, 0.5), (65, 3, 0, 0.1)])])
    config = pl.DataFrame({"ts": [T0, T0], "deployment": ["pod-a", "pod-s"], "kv_pool_tokens": [1000, 2000],
                           "start_line": [1, 1]})
    df = _requests([(0, None, 1.0, 100.0, 5, 5), (20, None, 1.0, 30.0, 5, 5)])
    res = concurrency(select(frames_connection(df, engine_steps=steps, engine_config=config)), timeseries=True,
                      bucket_s=60, max_gap_s=60)
    ts = res.tables["timeseries"].sort("deployment", "source", "ts")
    exact = ts.filter(pl.col("source") == "exact")
    assert exact["deployment"].unique().to_list() == ["pod-a"]
    assert exact["running_max"].null_count() == exact.height and exact["waiting_max"].null_count() == exact.height
    assert exact["in_system_max"].to_list() == [2, 1]  # 0-60 s: both requests; 60-100 s: the first
    sampled = ts.filter(pl.col("source") == "sampled")
    got = {(r["deployment"], int(r["ts"].timestamp() - T0.timestamp())): r for r in sampled.to_dicts()}
    # 60 s buckets from the epoch; T0 (12:00 UTC) starts one
    assert sorted(got) == [("pod-a", 0), ("pod-a", 60), ("pod-s", 0), ("pod-s", 60)]
    assert (got[("pod-a", 0)]["running_max"], got[("pod-a", 0)]["waiting_max"]) == (4, 1)
    assert (got[("pod-a", 60)]["running_max"], got[("pod-a", 60)]["waiting_max"]) == (1, 3)
    assert got[("pod-s", 0)]["kv_tokens_max"] == pytest.approx(1000)  # 0.5 x 2,000
    # line weights: pod-a 30 s (to the next line) and 40 s in the first bucket, 0 for its last line
    assert got[("pod-a", 0)]["in_system_mean"] == pytest.approx((3 * 30 + 4 * 40) / 70)
    assert got[("pod-a", 0)]["covered_s"] == pytest.approx(70)
    # the pods' step-line figures also head the pods table
    assert _stats(res, "running", "pod-s")["peak"] == 7


def test_a_request_longer_than_any_model_is_not_replayed_and_said():
    # An admissible count (the schema admits up to 2^53) that no engine ran: 600M prompt tokens in a trace made
    # the estimate simulate minutes of chunked prefill (the fuzz bench, issue 16); it is left out and counted.
    from attribution.analyses.estimate import MAX_REPLAY_TOKENS

    n = 50
    df = pl.DataFrame({
        "deployment": ["trace"] * n, "workload": ["t"] * n, "source_kind": ["trace"] * n,
        "arrival": [T0 + timedelta(seconds=i) for i in range(n)],
        "prompt_tokens": [600_000_000] + [1000] * (n - 1), "output_tokens": [10] * n,
    })
    res = concurrency(select(frames_connection(df)))
    assert any(note.startswith("ESTIMATE for trace (49 arrivals") for note in res.notes)
    assert f"1 arrivals longer than {MAX_REPLAY_TOKENS:,} tokens (beyond any model's context) were not replayed" \
        in res.notes
    assert _stats(res, "running", "trace")["peak"] >= 1


@pytest.mark.parametrize("scale", [1, 10**7])  # 10^7: the total time passes 2^63 / 10^6, Python's integers
def test_time_weighted_percentiles_are_exact_in_int64_and_beyond(scale):
    """The smallest value covering q of the time, compared exactly (cum * 10^6 >= q * 10^6 * total), whether
    the products fit in int64 or not; against a plain Fraction loop."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    value = np.round(rng.lognormal(3, 1, 500), 2)
    dur = rng.integers(1, 2_000_000, 500) * scale
    got = sweep._time_weighted(value, dur, (50.0, 90.0, 99.0, 99.9))
    order = np.argsort(value, kind="stable")
    vals, durs = [], []
    for v, d in zip(value[order].tolist(), dur[order].tolist(), strict=True):
        if vals and vals[-1] == v:
            durs[-1] += d
        else:
            vals.append(v)
            durs.append(d)
    total = sum(durs)
    assert (total * 10**6 >= 1 << 63) == (scale > 1)
    for p in (50.0, 90.0, 99.0, 99.9):
        need, cum, i = Fraction(f"{p / 100:.6f}") * total, 0, 0
        while cum + durs[i] < need:
            cum += durs[i]
            i += 1
        assert got[f"p{p:g}".replace(".", "_")] == vals[i]


def test_step_line_frames_of_whole_days_merged_from_the_day_frames_equal_the_lines(tmp_path, monkeypatch):
    """The step-line stats and series of a window of whole UTC days merged from the per-day frames kept for the
    commit (queries/concurrency_step_days.sql, concurrency_step_day_series.sql) equal those of the window's
    lines: lines in the last seconds of a day whose weight reaches over midnight (under max_gap_s) or is capped, a
    pod with a day without lines (its last line of the day before reaches the day after), tied instants at a
    day's end, data-parallel ranks, windows open at either end, sets of pods, series buckets picked and given
    (a bucket not a multiple of five minutes reads the lines). Exact, but the fractional KV means (1e-12)."""
    rng = np.random.default_rng(11)
    frames = []
    for k, with_lines in enumerate(((0, 1, 2, 3), (0, 2, 3), (1,))):
        secs: list[int] = []
        for d in with_lines:
            base = 12 * 3600 + d * 86400  # T0 is noon: day d is [T0 + 12 h + d days, ...)
            secs += [base + int(s) for s in np.sort(rng.integers(0, 900, 30))]
            secs += [base + 86400 - 1 - int(s) for s in np.sort(rng.integers(0, 40, 12))[::-1]]
        rows = [(s, int(rng.integers(0, 6)), None if rng.random() < 0.1 else int(rng.integers(0, 3)),
                 float(rng.random())) for s in secs]
        frames.append(_steps(f"pod-{k}", rows))
    # every line at one instant: no weighted time, the series' mean is the lines' average
    frames.append(_steps("pod-3", [(12 * 3600 + 7, 1, 0, 0.25), (12 * 3600 + 7, 4, 2, 0.5), (12 * 3600 + 7, 2, 1, 0.125)]))
    steps = pl.concat(frames).with_columns(
        engine_index=pl.when(pl.col("deployment") == "pod-0").then(pl.int_range(pl.len()) % 2).otherwise(0),
        file=pl.lit("f"), line=pl.int_range(pl.len()))
    config = pl.DataFrame({"ts": [T0] * 4, "deployment": ["pod-0", "pod-1", "pod-2", "pod-3"],
                           "kv_pool_tokens": [1000, 777, 50, 10], "start_line": [1, 1, 1, 1]})
    con = frames_connection(_requests([(0, 0.0, 1.0, 2.0, 1, 1)]), engine_steps=steps, engine_config=config)
    kept.register(con, tmp_path, 1)
    day = [datetime(2025, 6, 3, tzinfo=UTC) + timedelta(days=d) for d in range(5)]
    asked: list[str] = []
    real = kept.kept
    monkeypatch.setattr(kept, "kept", lambda con, name, *a: asked.append(name) or real(con, name, *a))
    whole = pl.col("metric") != "kv_tokens"
    for since, until in ((None, None), (day[0], day[1]), (day[0], day[2]), (day[1], day[3]), (day[0], day[4]),
                         (day[2], None), (None, day[2]), (None, day[1])):
        sel = select(con, since=since, until=until)
        for deps, bucket_s in ((["pod-0", "pod-1", "pod-2", "pod-3"], None), (["pod-1"], None), (["pod-0", "pod-2"], 3600),
                               (["pod-1", "pod-2"], 60)):
            asked.clear()
            got = step_line_frames(sel, deps, max_gap_s=60.0, timeseries=True, bucket_s=bucket_s)
            assert {"concurrency_step_days", "concurrency_step_day_series"} <= set(asked)
            with monkeypatch.context() as m:
                m.setattr(kept, "keeps", lambda con: False)
                want = step_line_frames(sel, deps, max_gap_s=60.0, timeseries=True, bucket_s=bucket_s)
            where = (since, until, deps, bucket_s)
            assert got[1] is not None and got[1].height > 0 and got[1].equals(want[1]) and got[2] == want[2], where
            stats, want_stats = got[0].sort("deployment", "metric"), want[0].sort("deployment", "metric")
            assert stats.filter(whole).equals(want_stats.filter(whole)) and stats.height == want_stats.height, where
            assert stats.filter(~whole).drop("mean").equals(want_stats.filter(~whole).drop("mean")), where
            assert stats.filter(~whole)["mean"].to_list() == pytest.approx(
                want_stats.filter(~whole)["mean"].to_list(), rel=1e-12)
    # a window not of whole days computes from its lines
    sel = select(con, since=day[0] + timedelta(hours=1), until=day[2])
    asked.clear()
    step_line_frames(sel, ["pod-1"], max_gap_s=60.0, timeseries=True, bucket_s=None)
    assert not {"concurrency_step_days", "concurrency_step_day_series"} & set(asked)


def test_sweep_parts_come_per_deployment_in_order_of_first_appearance_with_their_rows_in_order():
    # (one filter a deployment: a NULL deployment is a part of its own, not dropped)
    from attribution.analyses.sweep import deployment_parts

    df = pl.DataFrame({"deployment": ["b", None, "a", "b", None, "a", "b"], "x": [0, 1, 2, 3, 4, 5, 6]})
    assert [(d, p["x"].to_list()) for d, p in deployment_parts(df)] == [("b", [0, 3, 6]), (None, [1, 4]),
                                                                    ("a", [2, 5])]
