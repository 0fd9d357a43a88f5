"""The histogram kernels against hand-worked cases and against a plain transcription of Prometheus'
`bucketQuantile` (prometheus/prometheus promql/quantile.go, commit 01381a80115bde3f6dbb392123980d0bfadf49af,
Apache-2.0): equal on random histograms (hypothesis), including non-monotonic and duplicate-bound ones."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attribution.histograms.kernels import bucket_quantile, count_above, increase

INF = math.inf


def prom_bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """promql/quantile.go bucketQuantile, line by line (its value only; the two flags are left out)."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -INF
    if q > 1:
        return INF
    buckets = sorted(buckets, key=lambda b: b[0])
    if not math.isinf(buckets[-1][0]) or buckets[-1][0] < 0:
        return math.nan
    merged: list[list[float]] = []  # coalesceBuckets
    for ub, c in buckets:
        if merged and merged[-1][0] == ub:
            merged[-1][1] += c
        else:
            merged.append([ub, c])
    prev = merged[0][1]  # correctPrecisionErrors(buckets, 1e-12)
    for b in merged[1:]:
        curr = b[1]
        delta = abs(curr - prev)
        if delta == 0:
            continue
        if (delta / curr if curr else INF) <= 1e-12:
            b[1] = prev
        else:
            prev = curr
    top = merged[0][1]  # ensureMonotonic
    for b in merged[1:]:
        if b[1] > top:
            top = b[1]
        elif b[1] < top:
            b[1] = top
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)  # sort.Search
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    try:
        return start + (end - start) * (rank / count)
    except ZeroDivisionError:  # Go float division: 0/0 is NaN
        return math.nan


TTFT_EDGES = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, INF]


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b))


def test_interpolates_inside_the_bucket_with_its_edges():
    # 10 observations: 2 <= 0.1, 6 more in (0.1, 0.25], 2 more in (0.25, 0.5]
    q = bucket_quantile(0.5, [0.1, 0.25, 0.5, INF], [2, 8, 10, 10])
    # rank 5: bucket (0.1, 0.25], 3 of its 6 observations -> 0.1 + 0.15 * 3/6
    assert q.value == pytest.approx(0.175) and (q.lo, q.hi) == (0.1, 0.25)


def test_first_bucket_interpolates_from_zero():
    q = bucket_quantile(0.25, [0.1, 0.25, INF], [4, 4, 4])
    assert q.value == pytest.approx(0.025) and (q.lo, q.hi) == (0.0, 0.1)


def test_inf_bucket_returns_the_last_finite_bound():
    q = bucket_quantile(0.99, [1.0, 2.5, INF], [50, 90, 100])
    assert q.value == 2.5 and q.lo == 2.5 and q.hi == INF


def test_q1_and_q0():
    assert bucket_quantile(1.0, [1.0, 2.0, INF], [3, 5, 5]).value == 2.0  # rank 5 reached in (1, 2]
    assert bucket_quantile(0.0, [1.0, 2.0, INF], [3, 5, 5]).value == 0.0
    # Prometheus divides 0 by 0 here (q=0 and an empty first bucket): no answer, as histogram_quantile gives
    assert math.isnan(bucket_quantile(0.0, [1.0, 2.0, INF], [0, 5, 5]).value)


def test_empty_window_and_too_few_buckets_give_no_answer():
    assert math.isnan(bucket_quantile(0.5, [1.0, INF], [0, 0]).value)
    assert math.isnan(bucket_quantile(0.5, [INF], [7]).value)
    assert math.isnan(bucket_quantile(0.5, [1.0, 2.0], [1, 2]).value)  # no +Inf bucket


def test_non_monotonic_counts_are_evened_out():
    q = bucket_quantile(0.5, [1.0, 2.0, 3.0, INF], [4, 2, 8, 8])
    assert q.forced and q.value == pytest.approx(prom_bucket_quantile(0.5, [(1.0, 4), (2.0, 2), (3.0, 8), (INF, 8)]))


def test_increase_treats_a_drop_as_a_reset():
    assert increase([10, 15, 3, 7]) == 5 + 3 + 4  # restart after 15: the 3 counted whole
    assert increase([5]) == 0 and increase([]) == 0
    assert increase([0, 0, 2]) == 2


def test_count_above_exact_on_an_edge_and_bounded_between_edges():
    les, counts = [50000.0, 100000.0, INF], [70, 95, 100]
    on_edge = count_above(100000, les, counts)
    assert on_edge is not None and on_edge.exact and on_edge.at_least == 5
    off = count_above(95000, les, counts)  # 95,000 is never a vLLM edge
    assert off is not None and not off.exact
    assert (off.at_least, off.at_most, off.edge_below, off.edge_above) == (5, 30, 50000, 100000)
    below_first = count_above(10, les, counts)
    assert below_first is not None and (below_first.at_least, below_first.at_most) == (30, 100)
    assert count_above(10, les, [0, 0, 0]) is None


buckets_st = st.lists(
    st.tuples(st.sampled_from(TTFT_EDGES[:-1] + [0.0, -1.0, 3.3]), st.integers(0, 50).map(float)),
    min_size=0, max_size=8,
).map(lambda bs: bs + [(INF, float(sum(c for _, c in bs)) + 0.0)])


@settings(max_examples=400, deadline=None)
@given(q=st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.5, 0.99, 1.0, -0.1, 1.5])), buckets=buckets_st,
       extra=st.integers(0, 3))
def test_equals_prometheus_bucket_quantile(q, buckets, extra):
    buckets = buckets[:-1] + [(INF, buckets[-1][1] + extra)]
    want = prom_bucket_quantile(q, list(buckets))
    got = bucket_quantile(q, [b for b, _ in buckets], [c for _, c in buckets])
    assert same(got.value, want)
    if 0 <= q <= 1 and not math.isnan(got.value):
        assert got.lo <= got.value <= got.hi


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=30))
def test_increase_of_a_monotonic_counter_is_last_minus_first(steps):
    values = [float(sum(steps[: i + 1])) for i in range(len(steps))]
    assert increase(values) == values[-1] - values[0]
