"""Did a group's burstiness change between two windows? The inter-arrival CV of each window with a
delete-one-block jackknife interval (blocks of consecutive arrivals, as requests come in sessions and bursts),
and a stated rule: a change is called only with enough requests on both sides, a ratio beyond a factor and an
interval that excludes no change. The report's "at a glance" reads it; bench/calibration/burstiness.py measures
its false-alarm rate on simulated windows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from attribution.analyses.arrival_fits import selection_gaps
from attribution.analyses.common import Window, select
from attribution.choices import GroupBy

BLOCKS = 20  # consecutive blocks of gaps per window for the jackknife


@dataclass(frozen=True)
class ChangeRule:
    min_requests: int = 1000  # fewer requests on a side: too few to judge ("too few")
    factor: float = 2.0       # a CV ratio of at least x2 (or at most /2) is material
    alpha: float = 0.05       # false-alarm rate of all the groups together (Bonferroni over them)

    def text(self) -> str:
        return (f"burstier / smoother: at least {self.min_requests} requests on each side, the inter-arrival CV "
                f"ratio (now / before) at least x{self.factor:g} or at most /{self.factor:g}, and its interval "
                f"(delete-one-block jackknife over {BLOCKS} blocks of consecutive gaps on each side, log scale, "
                f"alpha {self.alpha:g} Bonferroni over the groups) excludes 1")


def cv_and_se(gaps: np.ndarray) -> tuple[float, float]:
    """The CV of `gaps` (population sd / mean, time order kept) and the jackknife standard error of its log
    over BLOCKS consecutive blocks; NaN when there are too few gaps or the CV is 0."""
    x = np.asarray(gaps, dtype=float)
    n = x.size
    if n < 2 * BLOCKS or x.mean() <= 0:
        return float("nan"), float("nan")
    cv = float(x.std() / x.mean())
    if cv <= 0:
        return cv, float("nan")
    block = np.arange(n) * BLOCKS // n
    b1 = np.bincount(block, x, BLOCKS)
    b2 = np.bincount(block, x * x, BLOCKS)
    nb = np.bincount(block, minlength=BLOCKS)
    m = (x.sum() - b1) / (n - nb)
    var = np.maximum((np.square(x).sum() - b2) / (n - nb) - m * m, 0)
    with np.errstate(divide="ignore", invalid="ignore"):  # a block whose removal leaves equal gaps: CV 0
        loo = np.log(np.sqrt(var) / m)  # log CV without block b
    loo = loo[np.isfinite(loo)]
    if loo.size < BLOCKS:
        return cv, float("nan")
    se = math.sqrt((BLOCKS - 1) / BLOCKS * float(np.square(loo - loo.mean()).sum()))
    return cv, se


def judge(before: dict[str, np.ndarray], now: dict[str, np.ndarray], rule: ChangeRule = ChangeRule()
          ) -> pl.DataFrame:
    """One row per group of either side: requests (gaps + 1) and CV on both sides, the ratio with its interval,
    and status: burstier, smoother, stable, too few, new or gone."""
    groups = sorted(set(before) | set(now), key=str)
    z = NormalDist().inv_cdf(1 - rule.alpha / max(len(groups), 1) / 2)
    rows: list[dict[str, Any]] = []
    for g in groups:
        b, a = before.get(g), now.get(g)
        nb, na = (0 if b is None else b.size + 1), (0 if a is None else a.size + 1)
        cb, sb = cv_and_se(b) if b is not None else (float("nan"), float("nan"))
        ca, sa = cv_and_se(a) if a is not None else (float("nan"), float("nan"))
        ratio = lo = hi = None
        status = "new" if b is None else "gone" if a is None else "too few"
        if min(nb, na) >= rule.min_requests and all(map(math.isfinite, (cb, ca, sb, sa))) and cb > 0:
            ratio = ca / cb
            half = z * math.hypot(sb, sa)
            lo, hi = ratio * math.exp(-half), ratio * math.exp(half)
            material = abs(math.log(ratio)) >= math.log(rule.factor)
            status = ("burstier" if ratio > 1 else "smoother") if material and (lo > 1 or hi < 1) else "stable"
        rows.append({"grp": g, "requests_before": nb, "requests_now": na,
                     "cv_before": cb if math.isfinite(cb) else None, "cv_now": ca if math.isfinite(ca) else None,
                     "cv_ratio": ratio, "cv_ratio_lo": lo, "cv_ratio_hi": hi, "status": status})
    schema = {"grp": pl.Utf8, "requests_before": pl.Int64, "requests_now": pl.Int64, "cv_before": pl.Float64,
              "cv_now": pl.Float64, "cv_ratio": pl.Float64, "cv_ratio_lo": pl.Float64, "cv_ratio_hi": pl.Float64,
              "status": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def window_gaps(con: Any, window: Window, by: GroupBy) -> dict[str, np.ndarray]:
    """Each group's gaps (time order) in `window` on `con` (this replaces the connection's selection)."""
    sel = select(con, since=window, by=by)
    sel.materialize("int_arrival_times", overall=False)
    return dict(selection_gaps(sel))


def burstiness_change(con: Any, now: Window, before: Window, by: GroupBy, rule: ChangeRule = ChangeRule()
                      ) -> pl.DataFrame:
    """`judge` over the groups of two windows of the store behind `con` (the connection's selection is
    replaced: call it after the analyses that read the current one). The window `now` first: the report's
    arrivals analysis has just selected it, so its kept selection is read again instead of made twice."""
    gaps_now = window_gaps(con, now, by)
    return judge(window_gaps(con, before, by), gaps_now, rule)
