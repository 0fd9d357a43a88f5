"""The concurrency sweep as window functions (queries/int_concurrency_sweep.sql and the small results read
from it, attribution.analyses.sweep_sql: what `--engine spark` runs) gives the NumPy sweep's tables
(attribution.analyses.sweep): checked here on DuckDB, on adversarial hand-made cases (ties at one instant,
zero-length requests, a deployment with one request, unknown queue times, a window cutting requests) and on
random intervals; tests/test_spark.py runs it on Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution.analyses import select
from attribution.analyses.common import frames_connection
from attribution.analyses.exact import exact_frames
from attribution.analyses.sweep_sql import sweep_frames

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
PERCENTILES = [50.0, 90.0, 95.0, 99.0, 99.9]


def requests(rows: list[tuple]) -> pl.DataFrame:
    """rows: (deployment, workload, arrival_s, queue_s, ttft_s, e2e_s, prompt, output), seconds after T0."""
    return pl.DataFrame({
        "deployment": [r[0] for r in rows], "workload": [r[1] for r in rows],
        "arrival": [T0 + timedelta(seconds=r[2]) for r in rows],
        "queue_s": [r[3] for r in rows], "ttft_s": [r[4] for r in rows], "e2e_s": [r[5] for r in rows],
        "prompt_tokens": [r[6] for r in rows], "output_tokens": [r[7] for r in rows],
    }, schema_overrides={"queue_s": pl.Float64, "ttft_s": pl.Float64, "e2e_s": pl.Float64})  # fmt: skip


# ties everywhere: a arrives when b ends, two arrive at one instant, one is admitted as another ends, a
# first token at the end; zero-length requests (never in the system); a deployment with one request; queue
# time unknown for some
ADVERSARIAL = [
    ("pod-a", "w0", 0, 1.0, 2.0, 4.0, 10, 4), ("pod-a", "w1", 0, 0.0, 1.0, 1.0, 20, 2),
    ("pod-a", "w0", 1, 0.0, 3.0, 3.0, 7, 0), ("pod-a", "w1", 4, 0.5, 1.0, 1.5, 30, 1),
    ("pod-a", "w0", 4, 0.0, 0.0, 0.0, 5, 5), ("pod-a", "w1", 2, None, 1.0, 2.0, 3, 3),
    ("pod-a", "w0", 5.5, 0.0, 0.5, 0.5, 1, 1),
    ("pod-b", "w0", 3, 0.25, 0.5, 2.0, 100, 7),
    ("pod-c", "w1", 1, None, 0.5, 1.0, 4, 4), ("pod-c", "w1", 1, None, 0.5, 1.0, 4, 4),
    ("pod-z", "w0", 2, 0.0, 0.0, 0.0, 9, 9),
]


def both(con, by: str, per_group: bool, timeseries: bool, bucket_s: int | None = None, **window):
    sel = select(con, by=by, **window)
    numpy = exact_frames(sel, per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                         percentiles=PERCENTILES)
    sql = sweep_frames(con, sel.window.since, sel.window.until, per_group=per_group, timeseries=timeseries,
                       bucket_s=bucket_s, percentiles=PERCENTILES)
    return numpy, sql


def assert_same_sweep(numpy, sql, kv_abs: float = 0.0) -> None:
    """Same rows in the same order; counts and times exact; the live KV tokens (running sums of fractional
    rates in another summation order on DuckDB) to `kv_abs`."""
    (s1, t1, b1), (s2, t2, b2) = numpy, sql
    assert b1 == b2
    order = ["deployment", "grp", "metric"]
    s1, s2 = s1.sort(order, nulls_last=True), s2.sort(order, nulls_last=True)
    assert s1.schema == s2.schema and s1.height == s2.height
    kv = pl.col("metric") == "kv_tokens"
    assert s1.filter(~kv).equals(s2.filter(~kv))
    for c in s1.columns:
        if s1[c].dtype == pl.Float64:
            assert s1.filter(kv)[c].to_list() == pytest.approx(s2.filter(kv)[c].to_list(), abs=kv_abs, rel=0), c
        else:
            assert s1.filter(kv)[c].equals(s2.filter(kv)[c]), c
    if t1 is None:
        assert t2 is None
        return
    assert t1.drop("kv_tokens_max").equals(t2.drop("kv_tokens_max"))
    assert t1["kv_tokens_max"].to_list() == pytest.approx(t2["kv_tokens_max"].to_list(), abs=kv_abs, rel=0)


@pytest.mark.parametrize("per_group", [False, True])
def test_the_window_sweep_gives_the_numpy_sweeps_tables_on_ties_and_zero_length_requests(per_group):
    con = frames_connection(requests(ADVERSARIAL))
    numpy, sql = both(con, "workload", per_group, timeseries=True, bucket_s=1)
    stats = sql[0]
    assert set(stats["deployment"]) == {"pod-a", "pod-b", "pod-c"}  # pod-z: only a zero-length request
    # pod-b's single request: running 1 for 1.75 s of 2 s; pod-c: queue unknown, only in_system
    b = stats.filter((pl.col("deployment") == "pod-b") & pl.col("grp").is_null() & (pl.col("metric") == "running"))
    assert (b["peak"].item(), b["p50"].item(), b["mean"].item()) == (1.0, 1.0, 0.875)
    assert set(stats.filter(pl.col("deployment") == "pod-c")["metric"]) == {"in_system", "seen_at_arrival"}
    # the two pod-c requests arriving at one instant each see 0 others (one step), in_system peaks at 2
    c = stats.filter((pl.col("deployment") == "pod-c") & pl.col("grp").is_null()).sort("metric")
    assert c["peak"].to_list() == [2.0, 1.0] and c["arrivals"].to_list() == [None, 2]
    assert_same_sweep(numpy, sql)


def test_the_window_sweep_of_a_window_cutting_requests():
    con = frames_connection(requests(ADVERSARIAL))
    numpy, sql = both(con, "deployment", False, timeseries=True,
                      since=T0 + timedelta(seconds=1), until=T0 + timedelta(seconds=4.5))
    assert sql[0].height > 0
    assert_same_sweep(numpy, sql)


interval = st.tuples(st.integers(0, 40), st.integers(0, 6), st.integers(0, 6), st.integers(0, 12),
                     st.integers(0, 500), st.integers(0, 300), st.booleans())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(interval, min_size=1, max_size=40), st.booleans(), st.booleans(), st.booleans())
def test_the_window_sweep_equals_the_numpy_sweep_on_random_intervals(ivs, per_group, windowed, timeseries):
    # times on a coarse grid (quarter seconds): many ties at one instant
    rows = [(f"pod-{i % 2}", f"w{i % 3}", a / 4, (q / 4 if known else None), (q + f) / 4, (q + f + e) / 4, p, o)
            for i, (a, q, f, e, p, o, known) in enumerate(ivs)]
    con = frames_connection(requests(rows))
    window = {"since": T0 + timedelta(seconds=2), "until": T0 + timedelta(seconds=7)} if windowed else {}
    numpy, sql = both(con, "workload", per_group, timeseries=timeseries, **window)
    assert_same_sweep(numpy, sql, kv_abs=1.0001e-3)
