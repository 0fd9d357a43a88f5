"""Per-series arithmetic on Prometheus histograms and counters: `increase` over a window with counter resets,
`bucket_quantile` with PromQL `histogram_quantile` semantics plus the bucket edges around each answer, and
`count_above`: how many observations exceed a threshold, exact on a bucket edge and a bound between edges.
Pure NumPy on one series at a time; the set-shaped work (which samples, which series) is SQL in queries/."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.ArrayLike


def increase(values: Floats) -> float:
    """How much a counter grew over consecutive samples (time order), a drop being a reset as PromQL's
    `increase()` reads it: after a drop the counter restarted from 0, so the value after the drop is all
    growth. No extrapolation to the window's edges (PromQL extrapolates, which makes counts of requests
    fractional): the raw growth between the first and the last sample given."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return 0.0
    d = np.diff(v)
    return float(np.where(d < 0, v[1:], d).sum())


@dataclass(frozen=True)
class Quantile:
    """A bucket-interpolated quantile: `value` as histogram_quantile gives it; the observation of that rank
    lies in the bucket (lo, hi] (hi is inf for the +Inf bucket, lo is 0 for a first bucket above 0).
    `value` is NaN when Prometheus gives no answer (fewer than 2 buckets, no observations, no +Inf bucket);
    `forced` says the cumulative counts were not monotonic and were evened out as Prometheus does."""

    value: float
    lo: float
    hi: float
    forced: bool = False


NO_ANSWER = Quantile(math.nan, math.nan, math.nan)


def prepare_buckets(les: Floats, counts: Floats) -> tuple[np.ndarray, np.ndarray, bool]:
    """Buckets sorted by bound, equal bounds merged (their counts added), counts within 1e-12 of the
    previous one set to it, then made monotonic (a running maximum): Prometheus' coalesceBuckets,
    correctPrecisionErrors and ensureMonotonic. Returns bounds, cumulative counts and whether monotonicity
    had to be forced."""
    le = np.asarray(les, dtype=float)
    c = np.asarray(counts, dtype=float)
    order = np.argsort(le, kind="stable")
    le, c = le[order], c[order]
    uniq, start = np.unique(le, return_index=True)
    c = np.add.reduceat(c, start) if c.size else c
    le = uniq
    for i in range(1, c.size):  # the precision fix depends on the previous kept count: sequential by nature
        prev, curr = float(c[i - 1]), float(c[i])
        if curr != prev and curr > 0 and abs(curr - prev) / curr <= 1e-12:
            c[i] = prev
    fixed = np.maximum.accumulate(c) if c.size else c
    return le, fixed, bool(np.any(fixed != c))


def bucket_quantile(q: float, les: Floats, counts: Floats) -> Quantile:
    """PromQL `histogram_quantile(q, ...)` on classic buckets (`le` bounds, cumulative counts; promql/quantile.go
    `bucketQuantile`): linear interpolation inside the bucket holding rank q * count, 0 as the lower bound
    of a first bucket above 0, the last finite bound when the rank falls in the +Inf bucket."""
    if math.isnan(q):
        return NO_ANSWER
    if q < 0:
        return Quantile(-math.inf, -math.inf, -math.inf)
    if q > 1:
        return Quantile(math.inf, math.inf, math.inf)
    le, c, forced = prepare_buckets(les, counts)
    if le.size < 2 or le[-1] != math.inf or c[-1] == 0:
        return NO_ANSWER
    rank = q * c[-1]
    b = int(np.searchsorted(c[:-1], rank, side="left"))  # first bucket with count >= rank
    if b == le.size - 1:
        return Quantile(float(le[-2]), float(le[-2]), math.inf, forced)
    if b == 0 and le[0] <= 0:
        return Quantile(float(le[0]), -math.inf, float(le[0]), forced)
    start, end, count = (0.0, le[0], c[0]) if b == 0 else (le[b - 1], le[b], c[b] - c[b - 1])
    if b > 0:
        rank -= c[b - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        value = float(start + (end - start) * np.float64(rank) / np.float64(count))
    return Quantile(value, float(start), float(end), forced)


@dataclass(frozen=True)
class CountBound:
    """Observations above `threshold`: exactly `at_least` == `at_most` when the threshold is a bucket edge,
    else between them, from the edges `edge_below` and `edge_above` that enclose the threshold."""

    threshold: float
    total: float
    at_least: float
    at_most: float
    edge_below: float
    edge_above: float

    @property
    def exact(self) -> bool:
        return self.at_least == self.at_most


def count_above(threshold: float, les: Floats, counts: Floats) -> CountBound | None:
    """Observations > `threshold` from cumulative buckets (`le`: observations <= bound). On an edge the count
    is exact; between edges a <= threshold < b it is at least total - cum(b) and at most total - cum(a).
    None without a +Inf bucket or observations."""
    le, c, _ = prepare_buckets(les, counts)
    if le.size == 0 or le[-1] != math.inf or c[-1] == 0:
        return None
    total = float(c[-1])
    i = int(np.searchsorted(le, threshold, side="left"))  # first edge >= threshold
    if le[i] == threshold:
        n = total - float(c[i])
        return CountBound(threshold, total, n, n, float(le[i]), float(le[i]))
    below_cum, below = (0.0, 0.0 if le[0] > 0 else -math.inf) if i == 0 else (float(c[i - 1]), float(le[i - 1]))
    return CountBound(threshold, total, total - float(c[i]), total - below_cum, below, float(le[i]))
