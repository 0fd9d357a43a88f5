"""Calibrated alarms: the minimum sample size per percentile, Holm's correction, one estimator for a ratio
and its interval (a property test over every row of compare's tables), and verdicts that never call a
change on too few requests."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution.compare import judge
from attribution.compare.comparison import METRICS, CompareRows, latency_tables


@pytest.mark.parametrize(("p", "need"), [(0.5, 20), (0.9, 100), (0.95, 200), (0.99, 1000), (0.999, 10000)])
def test_min_requests_follow_the_percentile(p, need):
    n = judge.min_requests(p)
    assert n == need
    # the order-statistic 95% interval for the p-quantile, [X(1), X(n)], exists at n
    assert 1 - p**n - (1 - p) ** n >= 0.95
    # and n leaves at least BEYOND requests beyond the percentile
    assert n * min(p, 1 - p) >= judge.BEYOND - 1e-9


def test_min_requests_grow_with_the_tail():
    ns = [judge.min_requests(p) for p in (0.5, 0.75, 0.9, 0.95, 0.99)]
    assert ns == sorted(ns) and ns[-1] > 10 * ns[0]


def test_holm_by_hand():
    adj = judge.holm(np.array([0.01, 0.04, 0.03, 0.005, np.nan]))
    # sorted 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> running max 0.06
    assert adj[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adj[4])


def test_effective_n_of_a_reweighted_sample():
    codes = np.array([0] * 90 + [1] * 10)
    assert judge.effective_n(codes, np.array([0.9, 0.1])) == pytest.approx(100)  # the sample's own mix
    # a rare stratum weighted up counts for less than its requests
    assert judge.effective_n(codes, np.array([0.5, 0.5])) == pytest.approx(1 / (0.25 / 90 + 0.25 / 10))


def test_p_material_respects_the_tolerance():
    assert judge.p_material(1.04, 0.001, 0.05) == 1.0  # inside the tolerance: never material
    assert judge.p_material(1.5, 0.05, 0.05) < 1e-9
    assert judge.p_material(1 / 1.5, 0.05, 0.05) == pytest.approx(judge.p_material(1.5, 0.05, 0.05))


def _rows(rng: np.random.Generator, n_before: int, n_after: int, workloads: int, scale: float,
          ties: bool) -> pl.DataFrame:
    n = n_before + n_after
    cohort = ["before"] * n_before + ["after"] * n_after
    after = np.array(cohort) == "after"

    def metric(mu: float) -> np.ndarray:
        v = rng.lognormal(mu, 1.0, n) * np.where(after, scale, 1.0)
        return np.round(v, 1) if ties else v

    return pl.DataFrame({
        "cohort": cohort, "workload": rng.choice([f"w{i}" for i in range(workloads)], n),
        "bucket": rng.choice([0, 1, 2], n).astype(np.int64),
        "queue_s": np.where(rng.random(n) < 0.5, 0.0, metric(-2)), "ttft_s": metric(-1), "tpot_s": metric(-4),
        "e2e_s": metric(1),
    })  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_before=st.integers(1, 300), n_after=st.integers(1, 300), workloads=st.integers(1, 3),
       scale=st.sampled_from([1.0, 1.5, 0.3]), ties=st.booleans(), seed=st.integers(0, 2**16))
def test_every_row_holds_its_ratio_inside_its_interval(n_before, n_after, workloads, scale, ties, seed):
    rng = np.random.default_rng(seed)
    tables = latency_tables(CompareRows(_rows(rng, n_before, n_after, workloads, scale, ties), (256, 1024)),
                            resamples=50, seed=seed, percentiles=(0.5, 0.9, 0.95, 0.99))
    for name in ("summary", "by_workload", "by_bucket"):
        t = tables[name]
        if not t.height:
            continue
        finite = t.filter(pl.col("ratio").is_not_null() & pl.col("ratio_lo").is_not_null())
        assert (finite["ratio_lo"] <= finite["ratio"]).all() and (finite["ratio"] <= finite["ratio_hi"]).all()
        # the diff interval too
        d = t.filter(pl.col("diff_lo").is_not_null())
        assert (d["diff_lo"] <= d["diff"] + 1e-12).all() and (d["diff"] <= d["diff_hi"] + 1e-12).all()
        # too few requests is never an alarm, and the rule follows the percentile
        few = t.filter(pl.min_horizontal("n_eff_before", "n_eff_after") < pl.col("min_requests"))
        assert few["verdict"].is_in(["too few requests", "undefined"]).all() and not few["changed"].any()


def test_too_few_requests_is_never_a_regression():
    # the sample's story: 8 requests before, thousands after, e2e 1.5x slower
    rng = np.random.default_rng(5)
    tables = latency_tables(CompareRows(_rows(rng, 8, 3000, 2, 1.5, False), (256, 1024)), resamples=200)
    s = tables["summary"]
    assert set(s["verdict"]) == {"too few requests"}
    assert not s["changed"].any()
    assert "8 requests before" in judge.too_few_text(s, tables["by_workload"])


def test_a_real_change_is_found_and_an_equal_one_is_not():
    rng = np.random.default_rng(6)
    t = latency_tables(CompareRows(_rows(rng, 5000, 5000, 2, 1.5, False), (256, 1024)), resamples=200)["summary"]
    p90 = t.filter(pl.col("percentile") == "p90", pl.col("metric").is_in(METRICS[1:]))
    assert (p90["verdict"] == "regression").all()
    t = latency_tables(CompareRows(_rows(rng, 5000, 5000, 2, 1.0, False), (256, 1024)), resamples=200)["summary"]
    assert not t["changed"].any()
    assert t["p_adjusted"].drop_nulls().min() >= t["p_value"].drop_nulls().min()


def test_p95_is_judged_by_default_with_its_own_minimum():
    # 150 requests a cohort: enough for p50 (20) and p90 (100), not for p95 (200) or p99 (1,000)
    rng = np.random.default_rng(7)
    s = latency_tables(CompareRows(_rows(rng, 150, 150, 1, 1.0, False), (256, 1024)), resamples=50)["summary"]
    e2e = {r["percentile"]: r for r in s.filter(pl.col("metric") == "e2e_s").iter_rows(named=True)}
    assert list(e2e) == ["p50", "p90", "p95", "p99"]
    assert e2e["p95"]["min_requests"] == 200 and e2e["p95"]["verdict"] == "too few requests"
    assert e2e["p90"]["verdict"] != "too few requests"
    # 5,000 a cohort and everything 1.5x slower: p95 is judged, in the same Holm family, and found
    t = latency_tables(CompareRows(_rows(rng, 5000, 5000, 1, 1.5, False), (256, 1024)), resamples=200)
    p95 = t["summary"].filter(pl.col("percentile") == "p95", pl.col("metric") == "e2e_s").row(0, named=True)
    assert p95["enough"] and p95["verdict"] == "regression"
    m = sum(int(f.filter(pl.col("enough"))["p_value"].is_not_null().sum())
            for f in (t["summary"], t["by_workload"], t["by_bucket"]))
    # Holm: the smallest p-value of the family is multiplied by the family's size, p95 rows included
    smallest = t["summary"].sort("p_value").row(0, named=True)
    assert smallest["p_adjusted"] == pytest.approx(min(1.0, smallest["p_value"] * m))
