"""Before/after comparison: re-weighted percentiles (worked out by hand), the stratified bootstrap (against
brute-force resampling), re-weighting that cancels a change of traffic mix, and verdicts that tell a feature
that caused a change (only long prompts got faster) from one that did not (every prompt got faster)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from conftest import REPO
from test_thresholds import SAMPLE
from typer.testing import CliRunner

from attribution.analyses import select
from attribution.cli import app
from attribution.compare import compare
from attribution.compare.attribution_table import verdict
from attribution.compare.comparison import CompareRows, Estimator
from attribution.compare.judge import log_se, ratio_interval
from attribution.compare.stats import bootstrap_percentiles, mix_weights, weighted_percentiles
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.simulate import simulate
from attribution.simulate.writers import write_litellm, write_vllm_logs
from attribution.store import Store
from attribution.thresholds import load_catalogue

KERNEL = "long_kernel: kv_len_at_prefill > 16000"  # the threshold of profiles/causal-long-kernel.toml


def test_weighted_percentile_by_hand():
    # Stratum 0 = {1, 2, 3}, stratum 1 = {10, 20}, weights 1/2 each: unit weights 1/6 x3, 1/4 x2. Positions
    # (C - u) / (1 - u_last) = 0, 2/9, 4/9, 2/3, 1; p50 lies 1/4 of the way from 3 (4/9) to 10 (2/3): 4.75.
    v = np.array([3.0, 10.0, 1.0, 20.0, 2.0])
    c = np.array([0, 1, 0, 1, 0])
    assert weighted_percentiles(v, c, np.array([0.5, 0.5]), (0.5,))[0] == pytest.approx(4.75)
    # One stratum: numpy's (and DuckDB quantile_cont's) linear interpolation.
    x = np.random.default_rng(3).lognormal(size=37)
    got = weighted_percentiles(x, np.zeros(37, int), np.array([1.0]), (0.5, 0.9, 0.99))
    assert got == pytest.approx(np.quantile(x, [0.5, 0.9, 0.99]))
    # Common mix: strata present in both cohorts, by their pooled share; stratum 2 only before: weight 0.
    w = mix_weights(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 1]), 3)
    assert w == pytest.approx([3 / 7, 4 / 7, 0.0])


def test_bootstrap_matches_brute_force_resampling():
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0, 1, 25).round(2), rng.lognormal(1, 0.5, 9).round(2)
    v, c, w = np.concatenate([a, b]), np.array([0] * 25 + [1] * 9), np.array([0.3, 0.7])
    draws = 6000
    brute = np.empty(draws)
    for i in range(draws):  # resample each stratum, then the smallest value whose weighted CDF reaches 1/2
        va, vb = a[rng.integers(0, 25, 25)], b[rng.integers(0, 9, 9)]
        vals = np.concatenate([va, vb])
        u = np.concatenate([np.full(25, 0.3 / 25), np.full(9, 0.7 / 9)])
        o = np.argsort(vals, kind="stable")
        brute[i] = vals[o][np.searchsorted(np.cumsum(u[o]), 0.5 - 1e-12)]
    mine = bootstrap_percentiles(v, c, w, (0.5,), draws, seed=5)[0]
    support = np.unique(v)
    p_brute = np.array([(brute == s).mean() for s in support])
    p_mine = np.array([(mine == s).mean() for s in support])
    assert set(np.unique(mine)) <= set(support)
    assert 0.5 * np.abs(p_brute - p_mine).sum() < 0.04  # total variation distance of the two distributions


def _reference_ratio(est: Estimator, metric: str, subset: np.ndarray | None, ps: tuple[float, ...]) -> tuple:
    """The re-weighted percentiles and bootstrap draws of each cohort straight from the request-order
    functions (each side's requests in request order, sorted by the functions themselves; the draws from
    the random streams the estimator gives the question)."""
    key, _, ok, _ = est._key(metric, subset, ps)
    vals = est.d.values[metric]
    d = est.d
    b, a = ok & ~d.after, ok & d.after
    w = mix_weights(d.codes[b], d.codes[a], d.n_strata, est.mix)
    pb = weighted_percentiles(vals[b], d.codes[b], w, ps, method="inverted_cdf")
    pa = weighted_percentiles(vals[a], d.codes[a], w, ps, method="inverted_cdf")
    db = bootstrap_percentiles(vals[b], d.codes[b], w, ps, est.resamples, est.stream_key(key, 0))
    da = bootstrap_percentiles(vals[a], d.codes[a], w, ps, est.resamples, est.stream_key(key, 1))
    return pb, pa, db, da, np.quantile(vals[b], ps), np.quantile(vals[a], ps)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_estimator_sorted_masks_equal_request_order_functions(seed):
    # The estimator sorts each metric once and selects every subset as a mask over that order; its numbers
    # must be those of the request-order functions to the last bit (ties across strata and cohorts,
    # NaNs, a stratum only one cohort has, subsets).
    rng = np.random.default_rng(seed)
    n = 3000
    rows = pl.DataFrame({
        "cohort": rng.choice(["before", "after"], n), "workload": rng.choice(["a", "b", "c"], n),
        "bucket": rng.choice([0, 1, 2, 3], n),
        "queue_s": np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 40, n) / 8.0),
        "ttft_s": rng.lognormal(0, 1, n), "tpot_s": rng.integers(0, 5, n) * 0.01, "e2e_s": rng.lognormal(1, 1, n),
    }).with_columns(pl.when((pl.col("workload") == "c") & (pl.col("cohort") == "after")).then(None)
                    .otherwise(pl.col("bucket")).alias("bucket"))
    data = CompareRows(rows, (256, 1024, 4096))
    subsets = [None, rng.random(n) < 0.3, data.codes % 2 == 0]
    for metric in ("queue_s", "ttft_s", "tpot_s"):
        for subset in subsets:
            mine = Estimator(data, ps=(0.5, 0.9, 0.99), mix="pooled", resamples=200, seed=seed)
            ref = Estimator(data, ps=(0.5, 0.9, 0.99), mix="pooled", resamples=200, seed=seed)
            got = mine.ratio(metric, subset)
            pb, pa, db, da, raw_b, raw_a = _reference_ratio(ref, metric, subset, (0.5, 0.9, 0.99))
            assert [r["before"] for r in got] == list(pb)
            assert [r["after"] for r in got] == list(pa)
            assert [r["raw_before"] for r in got] == list(raw_b) and [r["raw_after"] for r in got] == list(raw_a)
            # the interval: the bootstrap's se of each side's log percentile, widened by the design effect
            iid = np.sqrt(log_se(db) ** 2 + log_se(da) ** 2)
            for r, s in zip(got, iid, strict=True):
                if np.isfinite(r["ratio"]) and np.isfinite(s):
                    assert r["se_log"] >= s * (1 - 1e-12)
                    if r["design_effect"] == 1.0:  # no widening: the same draws (the question's streams)
                        assert r["se_log"] == pytest.approx(s, rel=1e-12)
                    assert (r["ratio_lo"], r["ratio_hi"]) == ratio_interval(r["ratio"], r["se_log"], r["df"])


def test_verdict_rules():
    common = {"metric": "ttft_s", "overall": (0.1, 0.09, 0.11), "at": "p50", "tolerance": 0.05}
    never = verdict(**common, share_before=0, share_after=0, crossing=(np.nan,) * 3, other=(0.1, 0.09, 0.11),
                    n_cross=(0, 0), n_other=(1000, 1000))
    assert never[0] == "cannot explain" and "never fired" in never[1]
    rare = verdict(**common, share_before=1e-5, share_after=1e-5, crossing=(0.5, 0.1, 2.0),
                   other=(0.1, 0.095, 0.105), n_cross=(3, 4), n_other=(10**5, 10**5))
    assert rare[0] == "cannot explain" and "never crossed it improved just as much" in rare[1]
    assert "fired on 0.001% of requests" in rare[1]
    only = verdict(**common, share_before=0.1, share_after=0.1, crossing=(0.2, 0.18, 0.22),
                   other=(1.0, 0.97, 1.03), n_cross=(500, 500), n_other=(4500, 4500))
    assert only[0] == "explains"
    every = verdict(**common, share_before=1, share_after=1, crossing=(0.1, 0.09, 0.11), other=(np.nan,) * 3,
                    n_cross=(10, 10), n_other=(0, 0))
    assert every[0] == "not separable"
    flat = verdict(**{**common, "overall": (1.01, 0.97, 1.05)}, share_before=0.1, share_after=0.1,
                   crossing=(0.2, 0.18, 0.22), other=(1.0, 0.97, 1.03), n_cross=(500, 500), n_other=(4500, 4500))
    assert flat[0] == "no change"


def _litellm(i: int, alias: str, start: float, ttft: float, prompt: int) -> str:
    return json.dumps({
        "id": f"chatcmpl-{i:016x}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": 1751356800.0 + start, "completionStartTime": 1751356800.0 + start + ttft,
        "endTime": 1751356800.0 + start + ttft + 1.0, "model": "hosted_vllm/m", "model_group": "m",
        "api_base": "http://pod-0:8000/v1", "prompt_tokens": prompt, "completion_tokens": 20,
        "metadata": {"user_api_key_alias": alias},
    })


def test_reweighting_cancels_a_change_of_mix(tmp_path):
    """Per workload nothing changed (fast: TTFT 0.1 s, slow: 1 s), but the mix went from 80% fast to 20%
    fast: the raw p50 moves tenfold, the re-weighted one does not."""
    rng = np.random.default_rng(2)
    for label, n_fast in (("before", 320), ("after", 80)):
        lines = []
        for i in range(400):
            fast = i < n_fast
            lines.append(_litellm(i + (0 if label == "before" else 1000), "fast" if fast else "slow",
                                  i * 2.0 + (0 if label == "before" else 5000),
                                  (0.1 if fast else 1.0) * rng.uniform(0.9, 1.1), 500 if fast else 3000))
        (tmp_path / f"{label}.jsonl").write_text("\n".join(lines) + "\n")
        ingest([str(tmp_path / f"{label}.jsonl")], tmp_path / "store", label=label, tz="UTC")
    res = compare(select(Store.open(tmp_path / "store").connect()), before="before", after="after",
                  metrics=("ttft_s",), resamples=300, capacity=False, features=["writeup."])
    p50 = res.tables["summary"].filter(pl.col("percentile") == "p50").row(0, named=True)
    assert p50["raw_ratio"] > 5
    assert p50["ratio_lo"] < 1 < p50["ratio_hi"] and not p50["changed"]
    assert any("traffic mix changed" in n for n in res.notes)
    mix = res.tables["mix"].sort("workload")
    assert mix["n_before"].to_list() == [320, 80] and mix["n_after"].to_list() == [80, 320]


def _causal_store(tmp_path_factory, scenario: str):
    res = simulate(scenario, workers=1)
    out = tmp_path_factory.mktemp(scenario)
    write_vllm_logs(res, out / "vllm")  # pod-00-before.log, pod-00-after.log: one pod, two engine starts
    write_litellm(res, out / "litellm.jsonl")
    ingest([str(out / "vllm")], out / "store", year=2025, tz="UTC", deployment="pod-00")
    ingest([str(out / "litellm.jsonl")], out / "store", tz="UTC")
    return res, out / "store"


@pytest.fixture(scope="module")
def caused(tmp_path_factory):
    return _causal_store(tmp_path_factory, "causal-long-kernel")


@pytest.fixture(scope="module")
def uniform(tmp_path_factory):
    return _causal_store(tmp_path_factory, "causal-uniform")


def _kernel_rows(store, **kw) -> dict[str, dict]:
    res = compare(select(Store.open(store).connect()), by="version", catalogue=load_catalogue(specs=[KERNEL]),
                  features=["long_kernel"], metrics=("ttft_s",), resamples=300, **kw)
    return res, {r["metric"]: r for r in res.tables["attribution"].to_dicts()}


def test_a_feature_that_caused_the_change_is_told_apart(caused, uniform):
    sim, store = caused
    res, rows = _kernel_rows(store, capacity=True)
    ttft = rows["ttft_s"]
    truth = sim.requests
    crossing = truth.filter(pl.col("kv_len_at_prefill") > 16000)
    assert (ttft["crossed_before"], ttft["crossed_after"]) == (
        crossing.filter(pl.col("label") == "before").height, crossing.filter(pl.col("label") == "after").height)
    assert ttft["verdict"] == "explains", ttft["explanation"]
    assert ttft["crossing_hi"] < 0.5 and ttft["other_lo"] < 1 < ttft["other_hi"]
    cap = res.tables["capacity"].row(0, named=True)  # one pod, before and after
    assert cap["deployment"] == "pod-00" and cap["capacity_per_day_before"] > 0 and cap["capacity_per_day_after"] > 0

    _, rows = _kernel_rows(uniform[1], capacity=False)
    ttft = rows["ttft_s"]
    assert ttft["verdict"] == "cannot explain", ttft["explanation"]
    assert "never crossed it improved" in ttft["explanation"]


def test_cohorts_and_cli(caused):
    _, store = caused
    runner = CliRunner()
    r = runner.invoke(app, ["compare", "--store", str(store), "--cohort-by", "version", "--metric", "ttft_s",
                            "--threshold", KERNEL, "--feature", "long_kernel", "--resamples", "200",
                            "--no-capacity", "--format", "json"])
    assert r.exit_code == 0, (r.output, r.exception)
    doc = json.loads(r.stdout)
    assert doc["params"]["before"] == "vllm 0.30.0" and doc["params"]["after"] == "vllm 0.31.0"  # the two versions
    assert "bootstrap" in doc["definitions"]["method"]
    r = runner.invoke(app, ["compare", "--store", str(store), "--cohort-by", "version", "--metric", "ttft_s",
                            "--threshold", KERNEL, "--feature", "long_kernel", "--resamples", "200", "--no-capacity"])
    assert r.exit_code == 0 and "method:" in r.stdout and "can a feature explain the change" in r.stdout
    r = runner.invoke(app, ["compare", "--store", str(store), "--before", "0.30.0", "--after", "9.9"])
    assert isinstance(r.exception, UsageError) and "0.30.0" in str(r.exception)
    r = runner.invoke(app, ["compare", "--store", str(store), "--cohort-by", "window",
                            "--before", "2025-07-01T08:00..2025-07-01T16:00",
                            "--after", "2025-07-01T12:00..2025-07-02T00:00"])
    assert isinstance(r.exception, UsageError) and "overlap" in str(r.exception)


def golden_compare() -> dict:
    """The answer of `attribution compare --cohort-by version --before 0.15.1 --after 0.20.1 --format json` on
    sample_logs/ as tests/golden/commands/compare.json.out holds it: test_golden_commands pins the command's
    output to that file (to 1e-9 relative), so what holds of the file holds of the command."""
    text = (REPO / "tests" / "golden" / "commands" / "compare.json.out").read_text()
    out = text[text.index("--- stdout\n") + len("--- stdout\n"):text.index("--- stderr\n")]
    doc = json.loads(out)
    assert text.startswith("exit 0\n") and doc["params"]["cohort_by"] == "version"
    return doc


def test_sample_logs_story():
    """sample_logs/: vLLM 0.15.1 -> 0.20.1 on the same pods. TTFT fell ~28x; the 95,000-token sparse-prefill
    kernel fired on 9 requests and cannot explain it; the linear-attention layers sit on every request. Checked
    on the golden compare command's answer (golden_compare): that test computes it, this one checks it tells
    sample_logs' ground truth (so a regenerated golden file that does not is caught here)."""
    truth = {c["engine_version"]: c for c in json.loads((SAMPLE / "ground_truth.json").read_text())["cohorts"]}
    before, after = truth["0.15.1"], truth["0.20.1"]
    res = golden_compare()
    assert (res["params"]["before"], res["params"]["after"]) == ("0.15.1", "0.20.1")
    s = {(r["metric"], r["percentile"]): r for r in res["tables"]["summary"]}
    gateway = 0.006  # LiteLLM's clock adds 4 ms before and 2 ms after the engine (simulate/writers/litellm.py)
    for m in ("ttft_s", "e2e_s"):
        for p in ("p50", "p90", "p99"):
            r = s[(m, p)]
            assert r["raw_before"] == pytest.approx(before[m][p] + gateway, abs=1e-4)
            assert r["raw_after"] == pytest.approx(after[m][p] + gateway, abs=1e-4)
            assert r["changed"] and r["ratio_hi"] < 0.25
            assert r["ratio_lo"] < r["ratio"] < r["ratio_hi"]
    assert (s[("ttft_s", "p50")]["n_before"], s[("ttft_s", "p50")]["n_after"]) == (before["requests"],
                                                                                   after["requests"])
    att = {(r["feature"], r["metric"]): r for r in res["tables"]["attribution"]}
    sparse = att[("writeup.sparse_prefill_95k", "ttft_s")]
    assert (sparse["crossed_before"], sparse["crossed_after"]) == (before["kv_len_over_threshold"],
                                                                   after["kv_len_over_threshold"])
    assert sparse["verdict"] == "cannot explain"
    assert "requests that never crossed it improved just as much" in sparse["explanation"]
    assert att[("hybrid.linear_attention_prefill", "ttft_s")]["verdict"] == "not separable"
    assert att[("vllm.max_num_seqs", "ttft_s")]["verdict"] == "cannot explain"  # at the cap only before
    assert {r["verdict"] for (f, m), r in att.items() if m == "ttft_s"} <= {"cannot explain", "not separable"}
    cap = res["tables"]["capacity"]
    assert [r["deployment"] for r in cap] == ["qwen35-vllm-0", "qwen35-vllm-1"]
    assert all(r["capacity_ratio"] > 1 for r in cap)  # the same pods serve more after the upgrade
