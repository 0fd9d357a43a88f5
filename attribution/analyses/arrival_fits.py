"""Inter-arrival distribution fits: exponential, Gamma and Weibull by maximum likelihood (location fixed at 0),
each with its Kolmogorov-Smirnov distance to the gaps, as the BurstGPT paper reports them. NumPy and SciPy over
one group's gaps; the gaps come from queries/arrival_gaps_by_group.sql (one group's rows at a time but on Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from attribution import queries

MIN_GAPS = 20  # fewer positive gaps than this: no fit (a KS distance on a handful of points says little)
MAX_GAPS = 20_000  # a larger group is fitted on a seeded random sample of this many gaps (fits take ~1 s/100k)
DISTRIBUTIONS = ("exponential", "gamma", "weibull")


def group_gaps(gaps: pl.DataFrame) -> Iterator[tuple[str, np.ndarray]]:
    """Each group's gaps (gap_s, in row order) of arrival_gaps_by_group's rows, which come each group's together
    (the query orders them by group): slices of the frame, where a group_by copied every group's rows at once
    (at 6M requests 12M rows, ~1 GB beside the frame)."""
    grp = gaps["grp"].rle().struct.unnest()
    if grp["value"].n_unique() != grp.height:
        raise ValueError("the gaps of a group must come together (arrival_gaps_by_group orders them by group)")
    start = 0
    for name, n in zip(grp["value"].to_list(), grp["len"].to_list(), strict=True):
        yield name, gaps["gap_s"].slice(start, n).to_numpy()
        start += n


def selection_gaps(sel: Any) -> Iterator[tuple[str, np.ndarray]]:
    """Each group's gaps (time order) of the selection's int_arrival_times, one group's rows of
    arrival_gaps_by_group fetched at a time in its order of groups (arrival_gap_groups): at 6M requests the rows of every group with their names (12M with the
    `(all)` group) and DuckDB's sort of them added ~1.3 GB to the report's peak (bench/scale/README.md, mem36). On
    Spark, one query for every group (each query is a job there)."""
    if queries.spark_connection(sel.con) is not None:
        yield from group_gaps(sel.run("arrival_gaps_by_group"))
        return
    for grp in sel.run("arrival_gap_groups")["grp"].to_list():
        yield grp, queries.run_columns(sel.con, "arrival_gaps_by_group", ["gap_s"],
                                       where=("grp = $grp", {"grp": grp}))["gap_s"].to_numpy()


def sample(gaps: np.ndarray, limit: int = MAX_GAPS, seed: int = 0) -> np.ndarray:
    """`gaps`, or `limit` of them drawn without replacement with a fixed seed (the same answer every run)."""
    if len(gaps) <= limit:
        return gaps
    return np.random.default_rng(seed).choice(gaps, size=limit, replace=False)


def weibull_mle(x: np.ndarray) -> tuple[float, float]:
    """Weibull shape and scale by maximum likelihood with location 0. The shape solves the profile-likelihood
    equation sum(x^c ln x) / sum(x^c) - 1/c = mean(ln x) (one root, found by bracketing); the scale follows in
    closed form. Same answer as scipy.stats.weibull_min.fit(x, floc=0) (checked in the tests), 10-50x faster."""
    from scipy import optimize
    from scipy.special import logsumexp

    lx = np.log(x)
    if np.ptp(lx) == 0:  # all gaps equal: the likelihood grows without bound in the shape
        return float("inf"), float(x[0])
    top = lx.max()

    def score(c: float) -> float:
        w = np.exp(c * (lx - top))  # x^c scaled by the largest term: no overflow at large shapes
        return float((w * lx).sum() / w.sum() - 1 / c - lx.mean())

    lo, hi = 1e-3, 1.0
    while score(hi) < 0 and hi < 1e6:
        hi *= 10
    # nearly equal gaps: the root lies beyond 1e6 (a spike, not a spread); report the bound
    if score(hi) < 0:  # nearly equal gaps: no finite maximum worth reporting
        return float("inf"), float(np.exp(lx.mean()))
    c = optimize.brentq(score, lo, hi, xtol=1e-12, rtol=1e-10)
    lam = np.exp((logsumexp(c * lx) - np.log(len(x))) / c)
    return float(c), float(lam)


def gamma_mle(x: np.ndarray) -> tuple[float, float]:
    """Gamma shape and scale by maximum likelihood with location 0: scipy.stats.gamma.fit(x, floc=0)'s own steps
    (the shape solves log(a) - digamma(a) = log(mean) - mean(log x) by brentq from scipy's start bracket; scale =
    mean / a), without importing scipy.stats (~0.7 CPU s of every report). Raises ValueError where scipy does."""
    from scipy import optimize, special

    if not np.isfinite(x).all():
        raise ValueError("The data contains non-finite values.")
    xbar = x.mean()
    s = np.log(xbar) - np.log(x).mean()
    aest = (3 - s + np.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s)
    a = optimize.brentq(lambda a: np.log(a) - special.digamma(a) - s, aest * (1 - 0.4), aest * (1 + 0.4), disp=0)
    return a, xbar / a


def ks_distance(x: np.ndarray, cdf: np.ndarray) -> float:
    """sup |empirical CDF - fitted CDF| of sorted gaps `x` given the fitted CDF at them (scipy.stats.kstest's
    statistic, the same arithmetic)."""
    n = len(x)
    return float(max((np.arange(1.0, n + 1) / n - cdf).max(), (cdf - np.arange(0.0, n) / n).max()))


def fit_gaps(gaps: np.ndarray) -> list[dict[str, Any]]:
    """One row per distribution: shape (exponential: 1; Gamma k; Weibull kappa), scale (seconds), mean_s (the
    fitted mean), ks (sup |empirical CDF - fitted CDF|) and best (the smallest ks). Empty below MIN_GAPS gaps;
    a distribution without a finite maximum (gaps all equal) has nulls. The CDFs and means are scipy.stats'
    formulas (expon, gamma, weibull_min with location 0) over scipy.special, which loads far faster."""
    from scipy import special

    x = np.asarray(gaps, dtype=float)
    x = x[x > 0]
    if len(x) < MIN_GAPS:
        return []
    xs = np.sort(x)  # the fits sum x in its own order (as scipy's do); the CDFs are taken at the sorted gaps
    # name -> (shape, scale, mean, CDF at x), or None
    fitted: dict[str, tuple[float, float, float, np.ndarray] | None] = {}
    scale = x.mean()
    fitted["exponential"] = (1.0, float(scale), scale, -special.expm1(-(xs / scale)))
    try:
        with np.errstate(all="ignore"):  # nearly equal gaps: scipy's start value divides by ~0 before it fails
            k, theta = gamma_mle(x)
        fitted["gamma"] = (float(k), float(theta), k * theta, special.gammainc(k, xs / theta))
    except (ValueError, RuntimeError, FloatingPointError):  # all gaps equal: the shape has no finite maximum
        fitted["gamma"] = None
    c, lam = weibull_mle(x)
    fitted["weibull"] = (c, lam, special.gamma(1.0 + 1.0 / c) * lam,
                         -special.expm1(-((xs / lam) ** c))) if np.isfinite(c) else None
    rows: list[dict[str, Any]] = []
    for name, fit in fitted.items():
        if fit is None:
            rows.append({"distribution": name, "shape": None, "scale_s": None, "mean_s": None, "ks": None})
            continue
        shape, scale, mean, cdf = fit
        rows.append({"distribution": name, "shape": shape, "scale_s": scale, "mean_s": float(mean),
                     "ks": ks_distance(xs, cdf)})
    best = min((r for r in rows if r["ks"] is not None), key=lambda r: r["ks"])["distribution"]
    for r in rows:
        r["best"] = r["distribution"] == best
    return rows
