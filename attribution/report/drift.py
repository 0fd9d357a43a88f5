"""Drift between this window and the one before it, on per-request frames (group, arrival, lengths): the
traffic of each group (new or gone above a share, a share change, the arrival rate) and the distance
between length distributions per group, each with an interval. The report's `what changed` runs it on the
store; bench/calibration runs it on simulated requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from attribution.compare.judge import ALPHA, BLOCKS, design_effect

LENGTHS = ("prompt_tokens", "output_tokens")
MIN_REQUESTS = 50  # fewer requests on a side than this: too few to call a length distribution changed
ALARMS = ("new", "gone", "share change", "rate change", "drift")  # statuses that are a drift alarm
# The report's alpha is split between its three families (Bonferroni), so that all its alarms together
# false-alarm at most alpha: latency (Holm inside), traffic and lengths (Bonferroni inside).
LATENCY_SHARE, TRAFFIC_SHARE, LENGTHS_SHARE = 0.5, 0.25, 0.25


@dataclass(frozen=True)
class DriftSettings:
    distance: float = 0.1       # KS distance between length distributions that is drift (drift_threshold)
    share: float = 0.05         # a new or vanished group carrying at least this share of its window's requests
    share_change: float = 0.05  # a change of a group's share of requests by at least this much (absolute)
    rate: float = 0.5           # an arrival-rate change by at least this factor (0.5: x1.5 or /1.5)
    alpha: float = ALPHA        # the report's false-alarm rate; traffic and lengths get their shares of it


DEFINITIONS = {
    "traffic status": "new / gone: the group has requests in one window only and carries at least the "
    "`drift_share` of that window's requests (`new (small)` / `gone (small)` below it: no alarm); share change: "
    "its share of the requests of the groups on both sides moved by at least `drift_share_change` (share_change)"
    " and its interval (a quarter of alpha, Bonferroni over the groups and the rate; the binomial variance times the design effect of "
    f"the share over {BLOCKS} consecutive blocks of arrivals, as requests come in sessions and bursts) excludes 0; rate change (row `all`): requests per hour of data changed by "
    "at least the factor 1 + `drift_rate` and its quasi-Poisson interval (the dispersion of the counts in "
    f"{BLOCKS} stretches of time) excludes no change",
    "distance": "Kolmogorov-Smirnov distance between the two length distributions (the largest difference of "
    "their cumulative shares; 0 = the same, 1 = disjoint); distance_lo / distance_hi: its interval from the "
    "Dvoretzky-Kiefer-Wolfowitz bound on each side (a quarter of alpha, Bonferroni over the rows)",
    "drift": f"distance >= the drift threshold and distance_lo > 0, with at least {MIN_REQUESTS} requests on "
    "each side",
}


def hours(frame: pl.DataFrame, since: datetime | None, until: datetime | None) -> float:
    """Hours of data in [since, until): the window clipped to where the store's data begins."""
    if frame.height == 0 or since is None or until is None:
        return float("nan")
    first = frame["first_store_arrival"][0] if "first_store_arrival" in frame.columns else None
    start = max(since, first) if first is not None else since
    return max((until - start).total_seconds() / 3600.0, 0.0)


def traffic(before: pl.DataFrame, now: pl.DataFrame, hours_before: float, hours_now: float,
            s: DriftSettings = DriftSettings()) -> pl.DataFrame:
    """One row per group and one for `all`: requests and shares on both sides, the share change and the
    arrival-rate ratio with their intervals, and a status (see DEFINITIONS)."""
    nb, na = max(before.height, 0), max(now.height, 0)
    counts = (before.group_by("grp").len("requests_before")
              .join(now.group_by("grp").len("requests_now"), on="grp", how="full", coalesce=True)
              .with_columns(pl.col("requests_before", "requests_now").fill_null(0)).sort("grp"))
    k = max(counts.height, 1)
    z = _z(s.alpha * TRAFFIC_SHARE / k)
    # a share change is measured among the groups on both sides: a new group alone moves no one else
    both = (pl.col("requests_before") > 0) & (pl.col("requests_now") > 0)
    mb = max(int(counts.filter(both)["requests_before"].sum()), 1)
    ma = max(int(counts.filter(both)["requests_now"].sum()), 1)
    cb, ca = pl.col("requests_before") / mb, pl.col("requests_now") / ma
    # requests come in sessions and bursts: a share varies between windows more than binomially
    deff = pl.DataFrame({"grp": counts["grp"], "_db": _share_effects(before, counts["grp"]),
                         "_da": _share_effects(now, counts["grp"])})
    counts = counts.join(deff, on="grp", how="left")
    se = ((cb * (1 - cb) / mb * pl.col("_db")) + (ca * (1 - ca) / ma * pl.col("_da"))).sqrt()
    df = counts.with_columns((pl.col("requests_before") / max(nb, 1)).alias("share_before"),
                             (pl.col("requests_now") / max(na, 1)).alias("share_now"),
                             pl.when(both).then(ca - cb).alias("share_change"), se.alias("_se"))
    z_se = z * pl.col("_se")
    df = df.with_columns((pl.col("share_change") - z_se).alias("share_change_lo"),
                         (pl.col("share_change") + z_se).alias("share_change_hi"))
    significant = (pl.col("share_change_lo") > 0) | (pl.col("share_change_hi") < 0)
    status = (pl.when(pl.col("requests_before") == 0).then(
        pl.when(pl.col("share_now") >= s.share).then(pl.lit("new")).otherwise(pl.lit("new (small)")))
        .when(pl.col("requests_now") == 0).then(
        pl.when(pl.col("share_before") >= s.share).then(pl.lit("gone")).otherwise(pl.lit("gone (small)")))
        .when((pl.col("share_change").abs() >= s.share_change) & significant).then(pl.lit("share change"))
        .otherwise(pl.lit("stable")))
    df = df.with_columns(status.alias("status"))
    ratio, lo, hi = _rate_ratio(nb, na, hours_before, hours_now, _z(s.alpha * TRAFFIC_SHARE / k),
                                _dispersion(before), _dispersion(now))
    rate_changed = all(np.isfinite([ratio, lo, hi])) and abs(math.log(ratio)) >= math.log1p(s.rate) \
        and (lo > 1 or hi < 1)
    total = pl.DataFrame({
        "grp": ["all"], "requests_before": [nb], "requests_now": [na], "share_before": [1.0], "share_now": [1.0],
        "share_change": [0.0], "share_change_lo": [0.0], "share_change_hi": [0.0],
        "status": ["rate change" if rate_changed else "stable"]})
    rates = pl.DataFrame({"grp": ["all"], "per_hour_before": [nb / hours_before if hours_before else None],
                          "per_hour_now": [na / hours_now if hours_now else None], "rate_ratio": [ratio],
                          "rate_ratio_lo": [lo], "rate_ratio_hi": [hi]}, strict=False)
    out = pl.concat([total, df.select(total.columns)], how="vertical_relaxed")
    return out.join(rates, on="grp", how="left").with_columns(pl.col(pl.Float64).fill_nan(None))


def _z(alpha: float) -> float:
    """The normal quantile of 1 - alpha / 2."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - alpha / 2)


def _blocks(frame: pl.DataFrame) -> np.ndarray:
    """BLOCKS consecutive equal-count blocks of the frame's arrivals."""
    n = frame.height
    rank = frame["arrival"].rank("ordinal").to_numpy() - 1 if "arrival" in frame.columns else np.arange(n)
    return (rank * BLOCKS // max(n, 1)).astype(np.int64)


def _share_effects(frame: pl.DataFrame, groups: pl.Series) -> list[float]:
    """Per group, the design effect of its share of the frame's requests (see judge.design_effect)."""
    if frame.height == 0:
        return [1.0] * groups.len()
    blocks, grp = _blocks(frame), frame["grp"].to_numpy()
    return [design_effect((grp != g).astype(float), blocks, 0.0, float((grp == g).mean())) for g in groups]


def _dispersion(frame: pl.DataFrame) -> float:
    """Variance over mean of the request counts in BLOCKS equal stretches of time (at least 1): how much
    burstier than Poisson the arrivals are."""
    if frame.height < 2 * BLOCKS or "arrival" not in frame.columns:
        return 1.0
    t = frame["arrival"].dt.epoch("us").to_numpy().astype(float)
    span = t.max() - t.min()
    if span <= 0:
        return 1.0
    c = np.bincount(np.minimum(((t - t.min()) / span * BLOCKS).astype(np.int64), BLOCKS - 1), minlength=BLOCKS)
    return max(1.0, float(c.var(ddof=1) / c.mean()))


def _rate_ratio(nb: int, na: int, hb: float, ha: float, z: float, phi_b: float = 1.0,
                phi_a: float = 1.0) -> tuple[float, float, float]:
    """Rate now / rate before with its quasi-Poisson (log-normal) interval, `phi_*` the dispersion of each
    side's arrivals; NaN without data on a side."""
    if not (nb and na and hb and ha and np.isfinite(hb) and np.isfinite(ha)):
        return float("nan"), float("nan"), float("nan")
    r = (na / ha) / (nb / hb)
    se = math.sqrt(phi_a / na + phi_b / nb)
    return r, r * math.exp(-z * se), r * math.exp(z * se)


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov distance."""
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    return float(np.abs(np.searchsorted(a, x, "right") / a.size - np.searchsorted(b, x, "right") / b.size).max())


def lengths(before: pl.DataFrame, now: pl.DataFrame, s: DriftSettings = DriftSettings()) -> pl.DataFrame:
    """Per group and length metric: requests on both sides, the KS distance with its DKW interval, status."""
    rows = []
    groups = sorted(set(before["grp"].to_list()) | set(now["grp"].to_list()), key=str)
    tests = max(len(groups) * len(LENGTHS), 1)
    for metric in LENGTHS:
        b_all = before.select("grp", metric).drop_nulls().partition_by("grp", as_dict=True)
        a_all = now.select("grp", metric).drop_nulls().partition_by("grp", as_dict=True)
        for g in groups:
            b = b_all.get((g,), pl.DataFrame({metric: []}))[metric].to_numpy()
            a = a_all.get((g,), pl.DataFrame({metric: []}))[metric].to_numpy()
            d = ks(b, a) if b.size and a.size else float("nan")
            eps = sum(math.sqrt(math.log(2 * tests / (s.alpha * LENGTHS_SHARE)) / (2 * n)) for n in (b.size, a.size)) \
                if b.size and a.size else float("nan")
            rows.append({"grp": g, "metric": metric, "requests_before": b.size, "requests_now": a.size,
                         "distance": d, "distance_lo": max(d - eps, 0.0) if b.size and a.size else None,
                         "distance_hi": min(d + eps, 1.0) if b.size and a.size else None})
    df = pl.DataFrame(rows, schema_overrides={"grp": pl.Utf8}) if rows else pl.DataFrame(
        schema={"grp": pl.Utf8, "metric": pl.Utf8})
    if not df.height:
        return df
    enough = (pl.col("requests_before") >= MIN_REQUESTS) & (pl.col("requests_now") >= MIN_REQUESTS)
    status = (pl.when(pl.col("requests_before") == 0).then(pl.lit("new"))
              .when(pl.col("requests_now") == 0).then(pl.lit("gone"))
              .when(enough & (pl.col("distance") >= s.distance) & (pl.col("distance_lo") > 0)).then(pl.lit("drift"))
              .when(enough).then(pl.lit("stable"))
              .otherwise(pl.lit("too few")))
    return df.with_columns(status.alias("status"), pl.col(pl.Float64).fill_nan(None))
