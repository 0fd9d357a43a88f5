"""When a percentile change is an alarm: the minimum number of requests a percentile needs, the interval and
p-value of a ratio from its bootstrap draws, Holm's family-wise correction and the verdict of one row.
compare, the report's `what changed` and bench/calibration all judge through these functions.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

ALPHA = 0.05        # family-wise false-alarm rate of the alarms one compare (or one report) raises
CI_LEVEL = 0.95     # level of the intervals shown
BEYOND = 10         # observations a cohort must have beyond the percentile (on its rarer side)
BLOCKS = 20         # consecutive blocks of arrivals per cohort for the design effect of dependent requests
Z = 1.959963984540054  # the normal quantile of (1 + CI_LEVEL) / 2

# undefined: a cohort has no values, or the before percentile is 0 (no ratio)
VERDICTS = ("regression", "improvement", "no change", "too few requests", "undefined")
MIN_RULE = (
    "a percentile p is judged only when each cohort's effective number of requests (Kish: the re-weighted "
    f"sample counts as (sum w)^2 / sum w^2 requests) reaches max(n_ci, {BEYOND} / min(p, 1 - p)): n_ci is the "
    "smallest n whose order-statistic 95% interval for the p-quantile exists (1 - p^n - (1-p)^n >= 0.95) and "
    f"the second term leaves at least {BEYOND} requests beyond the percentile: p50 20, p90 100, p95 200, "
    "p99 1,000, p99.9 10,000. Below it the verdict is `too few requests`, never an alarm"
)
RULE = (
    "the ratio after/before and its 95% interval come from one estimator: the re-weighted inverted-CDF "
    "percentile (the one each bootstrap resample computes); the interval is ratio x exp(+-1.96 se), so it "
    "always holds the ratio: se^2 sums over the cohorts the variance of the log percentile over the bootstrap "
    f"resamples times its design effect (requests close in time are alike: the share of requests below the "
    f"percentile is compared between {BLOCKS} consecutive blocks of arrivals per cohort; where that widens the "
    f"se, intervals and p-values use Student's t with {BLOCKS - 1} degrees of freedom). A row is "
    "a regression (improvement) when it has enough requests and its change exceeds the tolerance: p = "
    "2 Phi(-(|log ratio| - log(1 + tolerance)) / se), Holm-adjusted over every judged row of the family (all "
    "metrics, percentiles, workloads and comparisons a report looks at), is below alpha"
)


def min_requests(p: float, level: float = CI_LEVEL, beyond: int = BEYOND) -> int:
    """The fewest requests a cohort needs for its p-quantile to be judged (see MIN_RULE)."""
    q = min(p, 1.0 - p)
    if q <= 0:
        raise ValueError(f"percentile {p} is not inside (0, 1)")
    n = 1
    while 1.0 - p**n - (1.0 - p) ** n < level:
        n += 1
    return max(n, math.ceil(beyond / q - 1e-9))


def effective_n(codes: np.ndarray, weights: np.ndarray) -> float:
    """Kish's effective sample size of requests in strata `codes` when stratum s weighs weights[s] in all and
    each of its n_s requests weights[s] / n_s: 1 / sum_s (w_s^2 / n_s) with the weights normalised."""
    n_s = np.bincount(codes, minlength=weights.size).astype(float)
    w = np.where(n_s > 0, weights, 0.0)
    if w.sum() <= 0:
        return 0.0
    w = w / w.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(1.0 / np.where(n_s > 0, w * w / n_s, 0.0).sum())


def log_se(draws: np.ndarray) -> np.ndarray:
    """Standard deviation along the last axis of the log of positive finite draws (NaN with fewer than 2)."""
    with np.errstate(all="ignore"):
        x = np.where(np.isfinite(draws) & (draws > 0), np.log(draws), np.nan)
        ok = np.isfinite(x).sum(axis=-1)
        sd = np.nanstd(np.where(ok[..., None] >= 2, x, 0.0), axis=-1, ddof=1)
    return np.where(ok >= 2, sd, np.nan)


def sd(draws: np.ndarray) -> np.ndarray:
    """Standard deviation along the last axis of the finite draws (NaN with fewer than 2)."""
    with np.errstate(all="ignore"):
        x = np.where(np.isfinite(draws), draws, np.nan)
        ok = np.isfinite(x).sum(axis=-1)
        out = np.nanstd(np.where(ok[..., None] >= 2, x, 0.0), axis=-1, ddof=1)
    return np.where(ok >= 2, out, np.nan)


def design_effect(values: np.ndarray, blocks: np.ndarray, point: float, p: float) -> float:
    """How much more a percentile varies than the bootstrap (which treats requests as independent) says:
    requests close in time are alike (a burst queues them all), so the share of requests at or below the
    percentile varies between consecutive blocks of arrivals more than independent draws would. The
    cluster design effect of that share, sum_k (S_k - p n_k)^2 / (n p (1 - p)) x K / (K - 1) over the K
    blocks (S_k: requests of block k at or below the point estimate), at least 1."""
    n = values.size
    if n < 2 * BLOCKS or not np.isfinite(point) or not 0 < p < 1:
        return 1.0
    k = int(blocks.max()) + 1 if blocks.size else 0
    if k < 2:
        return 1.0
    n_k = np.bincount(blocks, minlength=k).astype(float)
    s_k = np.bincount(blocks, weights=(values <= point).astype(float), minlength=k)
    used = np.count_nonzero(n_k)
    if used < 2:
        return 1.0
    d = ((s_k - p * n_k) ** 2).sum() / (n * p * (1 - p)) * used / (used - 1)
    return max(1.0, float(d))


def t_to_z(t: float, df: float) -> float:
    """The normal deviate with the tail of Student's t (Wallace's approximation; df = inf: t itself)."""
    if not math.isfinite(df):
        return t
    return math.copysign((8 * df + 1) / (8 * df + 3) * math.sqrt(df * math.log1p(t * t / df)), t)


def z_to_t(z: float, df: float) -> float:
    """The inverse of t_to_z: Student's t quantile with the tail of normal deviate z."""
    if not math.isfinite(df):
        return z
    return math.copysign(math.sqrt(df * math.expm1((z * (8 * df + 3) / (8 * df + 1)) ** 2 / df)), z)


def ratio_interval(ratio: float, se: float, df: float = math.inf) -> tuple[float, float]:
    """The 95% interval of a ratio from the standard error of its log (`df` degrees of freedom: Student's t,
    where the se holds a design effect estimated from BLOCKS blocks): it always holds the ratio."""
    if not (np.isfinite(ratio) and ratio > 0 and np.isfinite(se)):
        return np.nan, np.nan
    q = z_to_t(Z, df)
    return ratio * math.exp(-q * se), ratio * math.exp(q * se)


def p_material(ratio: float, se: float, tolerance: float, df: float = math.inf) -> float:
    """Two-sided p-value of `the change is within the tolerance` (|log ratio| <= log(1 + tolerance)), from
    Student's t with `df` degrees of freedom (normal when infinite)."""
    if not (np.isfinite(ratio) and ratio > 0 and np.isfinite(se)):
        return np.nan
    excess = abs(math.log(ratio)) - math.log1p(tolerance)
    if se == 0:
        return 0.0 if excess > 0 else 1.0
    return min(1.0, math.erfc(t_to_z(excess / se, df) / math.sqrt(2.0)))  # 2 * P(T > excess / se)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count towards the family)."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = idx.size
    if not m:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out[order] = adj
    return out


def verdict_expr(alpha: float = ALPHA) -> pl.Expr:
    """The verdict of a row with columns ratio, enough, p_adjusted, n_before, n_after."""
    return (pl.when((pl.col("n_before") == 0) | (pl.col("n_after") == 0)).then(pl.lit("undefined"))
            .when(~pl.col("enough")).then(pl.lit("too few requests"))
            .when(pl.col("ratio").is_null() | pl.col("p_adjusted").is_null()).then(pl.lit("undefined"))
            .when((pl.col("p_adjusted") < alpha) & (pl.col("ratio") > 1)).then(pl.lit("regression"))
            .when(pl.col("p_adjusted") < alpha).then(pl.lit("improvement"))
            .otherwise(pl.lit("no change")))


def judge(frames: dict[str, pl.DataFrame], alpha: float = ALPHA) -> dict[str, pl.DataFrame]:
    """Holm-adjust the p-values of every row of `frames` (tables with p_value, enough, ratio) as one family
    and set `p_adjusted`, `verdict` and `changed` (regression or improvement). Rows without enough requests
    do not count towards the family."""
    names = [k for k, f in frames.items() if f.height and "p_value" in f.columns]
    if not names:
        return frames
    p = np.concatenate([
        frames[k].select(pl.when(pl.col("enough")).then(pl.col("p_value")).otherwise(None))
        .to_series().cast(pl.Float64).fill_null(np.nan).to_numpy() for k in names])
    adj = holm(p)
    out = dict(frames)
    at = 0
    for k in names:
        f = frames[k]
        part = pl.Series("p_adjusted", adj[at:at + f.height]).fill_nan(None)
        at += f.height
        f = f.with_columns(part).with_columns(verdict_expr(alpha).alias("verdict"))
        out[k] = f.with_columns(pl.col("verdict").is_in(["regression", "improvement"]).alias("changed"))
    return out


def too_few_text(summary: pl.DataFrame, per: pl.DataFrame | None = None, key: str = "workload") -> str | None:
    """Why rows were not judged: `8 requests before and 30,424 after; p50 needs 20, p99 1,000 per cohort`
    for the overall rows, else the per-group rows (`per`, keyed by `key`) that had too few."""
    def few(df: pl.DataFrame | None) -> pl.DataFrame:
        if df is None or not df.height or "verdict" not in df.columns:
            return pl.DataFrame()
        return df.filter(pl.col("verdict") == "too few requests")

    def needs(df: pl.DataFrame) -> str:
        need = df.group_by("percentile", maintain_order=True).agg(pl.col("min_requests").first())
        return ", ".join(f"{r['percentile']} {r['min_requests']:,}" for r in need.iter_rows(named=True))

    overall, groups = few(summary), few(per)
    if overall.height:
        r = overall.row(0, named=True)
        return f"{r['n_before']:,} requests before and {r['n_after']:,} after; {needs(overall)} needed per cohort"
    if groups.height:
        names = sorted(set(groups[key].cast(pl.Utf8).to_list()))
        return f"{key} {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} ({needs(groups)} needed per cohort)"
    return None
