"""The answers a window's histogram and counter increases give, as frames: bucket-interpolated percentiles
with their bucket edges, observations above a threshold (exact on an edge, a bound between edges), goodput
for an SLO (exact or a bound) and the prefix-cache hit rate. Input: the rows of metric_histogram_increase /
metric_counter_increase; one loop over the handful of (deployment, model, metric) histograms."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from attribution.histograms.catalogue import LABEL, PREFIX_CACHE
from attribution.histograms.kernels import bucket_quantile, count_above

KEYS = ("deployment", "model", "engine", "metric")


@dataclass(frozen=True)
class Hist:
    """One histogram's increase over a window: cumulative bucket counts by bound, and its _sum / _count."""

    deployment: str | None
    model: str | None
    engine: str | None
    metric: str
    kind: str  # the phase (ttft, ...) or what a length histogram counts (prompt, output)
    les: np.ndarray
    counts: np.ndarray
    sum: float | None
    count: float | None

    def key(self) -> dict[str, str | None]:
        return {"deployment": self.deployment, "model": self.model, "engine": self.engine}

    @property
    def observations(self) -> float:
        return float(self.counts[-1]) if self.counts.size and self.les[-1] == math.inf else 0.0

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.sum is not None and self.count else None


def histograms(incr: pl.DataFrame, names: Mapping[str, str]) -> list[Hist]:
    """The histograms of `names` (engine metric -> phase or kind) in the increase rows."""
    rows = incr.filter(pl.col("metric").is_in(list(names)))
    out = []
    for key, part in rows.partition_by(list(KEYS), as_dict=True, maintain_order=True).items():
        dep, model, engine, metric = (None if k is None else str(k) for k in key)
        buckets = part.filter(pl.col("part") == "bucket").sort("le")
        scalar = {p: float(part.filter(pl.col("part") == p)["increase"].sum()) for p in ("sum", "count")
                  if part.filter(pl.col("part") == p).height}
        out.append(Hist(dep, model, engine, str(metric), names[str(metric)], buckets["le"].to_numpy(),
                        buckets["increase"].to_numpy(), scalar.get("sum"), scalar.get("count")))
    return out


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


PERCENTILE_SCHEMA = {"deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8, "phase": pl.Utf8,
                     "metric": pl.Utf8, "observations": pl.Float64, "mean": pl.Float64, "percentile": pl.Float64,
                     "value": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "label": pl.Utf8}


def percentile_rows(hists: Iterable[Hist], percentiles: Iterable[float], kind_column: str = "phase"
                    ) -> pl.DataFrame:
    """One row per histogram and percentile: the interpolated value and the bucket edges around it."""
    pcts = list(percentiles)
    rows = []
    for h in hists:
        for p in pcts:
            q = bucket_quantile(p / 100, h.les, h.counts)
            rows.append({**h.key(), "phase": h.kind, "metric": h.metric, "observations": h.observations,
                         "mean": h.mean, "percentile": p, "value": _num(q.value), "lo": _num(q.lo),
                         "hi": _num(q.hi), "label": LABEL})
    return pl.DataFrame(rows, schema=PERCENTILE_SCHEMA, orient="row").rename({"phase": kind_column})


def bucket_rows(hists: Iterable[Hist]) -> pl.DataFrame:
    """One row per histogram bucket: the observations in (lo, hi] (the difference of the cumulative counts)
    and their share of the histogram's observations."""
    frames = []
    for h in hists:
        if not h.counts.size or h.observations == 0:
            continue
        cum = np.maximum.accumulate(h.counts)  # a scrape caught mid-update can dip: as histogram_quantile does
        frames.append(pl.DataFrame({
            "deployment": h.deployment, "model": h.model, "engine": h.engine, "counts": h.kind, "metric": h.metric,
            "lo": np.concatenate([[0.0], h.les[:-1]]), "hi": h.les, "observations": np.diff(cum, prepend=0.0),
        }, schema_overrides={"deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8}))
    if not frames:
        return pl.DataFrame(schema={"deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8, "counts": pl.Utf8,
                                    "metric": pl.Utf8, "lo": pl.Float64, "hi": pl.Float64,
                                    "observations": pl.Float64, "share": pl.Float64})
    out = pl.concat(frames)
    return out.with_columns((pl.col("observations") / pl.col("observations").sum()
                             .over("deployment", "model", "engine", "metric")).alias("share"))


def _bound_text(b_least: float, b_most: float, below: float, above: float, t: float) -> str:
    if b_least == b_most:
        return f"exactly {b_least:g} ({t:g} is a bucket edge)"
    return (f"at least {b_least:g}, at most {b_most:g}: {t:g} is not a bucket edge, the nearest are "
            f"{below:g} and {above:g}")


def threshold_rows(hists: Iterable[Hist], thresholds: Iterable[float]) -> pl.DataFrame:
    """Per length histogram and threshold T: observations > T, exact when T is a bucket edge, else bounds
    named by the enclosing edges."""
    rows = []
    for h in hists:
        for t in thresholds:
            b = count_above(t, h.les, h.counts)
            if b is None:
                continue
            rows.append({**h.key(), "counts": h.kind, "metric": h.metric, "threshold": t, "observations": b.total,
                         "above_at_least": b.at_least, "above_at_most": b.at_most, "exact": b.exact,
                         "edge_below": b.edge_below, "edge_above": b.edge_above,
                         "answer": _bound_text(b.at_least, b.at_most, b.edge_below, b.edge_above, t)})
    return pl.DataFrame(rows, schema={
        "deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8, "counts": pl.Utf8, "metric": pl.Utf8,
        "threshold": pl.Float64, "observations": pl.Float64, "above_at_least": pl.Float64,
        "above_at_most": pl.Float64, "exact": pl.Boolean, "edge_below": pl.Float64, "edge_above": pl.Float64,
        "answer": pl.Utf8}, orient="row")


def goodput_rows(hists: Iterable[Hist], terms: Iterable[tuple[str, float]]) -> pl.DataFrame:
    """Per deployment and model: requests meeting every SLO term (phase <= limit). One term on a bucket edge
    is exact; off an edge it is a bound. Histograms are marginal (no request is seen in two of them), so
    several terms give the Fréchet bounds: at most the fewest good of any term, at least what the terms'
    good counts force together (sum of good - (terms - 1) * requests). A term whose histogram is missing
    leaves the deployment unjudged."""
    terms = list(terms)
    by_dep: dict[tuple[str | None, ...], dict[str, Hist]] = {}
    for h in hists:
        by_dep.setdefault((h.deployment, h.model, h.engine), {}).setdefault(h.kind, h)
    rows = []
    for (dep, model, engine), phases in by_dep.items():
        bounds = [(phases.get(m), lim) for m, lim in terms]
        if any(h is None for h, _ in bounds):
            continue
        cb = [count_above(lim, h.les, h.counts) for h, lim in bounds if h is not None]
        if any(b is None for b in cb):
            continue
        good = [(b.total - b.at_most, b.total - b.at_least, b.total) for b in cb if b is not None]
        n = max(g[2] for g in good)
        most = min(g[1] for g in good)
        least = max(0.0, sum(g[0] for g in good) - (len(good) - 1) * n)
        rows.append({"deployment": dep, "model": model, "engine": engine, "requests": n, "good_at_least": least,
                     "good_at_most": most, "share_at_least": least / n, "share_at_most": most / n,
                     "exact": least == most, "label": LABEL})
    return pl.DataFrame(rows, schema={
        "deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8, "requests": pl.Float64,
        "good_at_least": pl.Float64, "good_at_most": pl.Float64, "share_at_least": pl.Float64,
        "share_at_most": pl.Float64, "exact": pl.Boolean, "label": pl.Utf8}, orient="row")


def prefix_cache_rows(counters: pl.DataFrame) -> pl.DataFrame:
    """Per deployment and model: prefix-cache hit tokens over looked-up tokens in the window, from the
    counters' increases (resets handled there); the engine's preferred counter name wins over an alias."""
    rows = []
    for key, part in counters.partition_by(["deployment", "model", "engine"], as_dict=True,
                                           maintain_order=True).items():
        names = PREFIX_CACHE.get(str(key[2]))
        if names is None:
            continue
        got = dict(zip(part["metric"], part.iter_rows(named=True), strict=True))
        hit, looked = (next((got[n] for n in alias if n in got), None) for alias in names)
        if hit is None or looked is None:
            continue
        rate = hit["increase"] / looked["increase"] if looked["increase"] else None
        rows.append({"deployment": key[0], "model": key[1], "engine": key[2], "hit_tokens": hit["increase"],
                     "queried_tokens": looked["increase"], "hit_rate": rate,
                     "resets": hit["resets"] + looked["resets"], "counters": f"{hit['metric']} / {looked['metric']}"})
    return pl.DataFrame(rows, schema={
        "deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8, "hit_tokens": pl.Float64,
        "queried_tokens": pl.Float64, "hit_rate": pl.Float64, "resets": pl.Int64, "counters": pl.Utf8},
        orient="row")
