"""`compare`: two cohorts of requests (by label, engine version or time window) side by side. Queue, TTFT,
TPOT and end-to-end percentiles are re-weighted to a common mix of workload x prompt-length strata, so a
change of traffic mix is not read as an engine change; ratios carry stratified bootstrap intervals; the
attribution table says, per catalogue feature, whether it can explain the change; per-pod capacity before
and after comes from the capacity analysis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from attribution import queries
from attribution.analyses.common import Analysis, Selection
from attribution.choices import CohortBy
from attribution.compare import attribution_table as attr
from attribution.compare import judge, stats
from attribution.compare.cohorts import Cohorts, resolve
from attribution.compare.estimator import Estimator, Question
from attribution.compare.resample import Draws
from attribution.db import as_int
from attribution.errors import UsageError
from attribution.histograms import compare as hist_compare
from attribution.labels import version_label_expr
from attribution.thresholds.catalogue import Catalogue, load_catalogue
from attribution.thresholds.crossings import MAX_GAP_S, mark_requests, prepare_starts

METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")
DEFAULT_EDGES = (256, 1024, 4096, 16384, 65536)
METHOD = (
    "Strata are workload x prompt-length bucket; only strata with requests in both cohorts count, each "
    "weighted by its share of {mix} (the common mix); within a stratum every "
    "request weighs the same. A re-weighted percentile is the inverted-CDF one (the smallest value whose "
    "re-weighted CDF reaches p; raw_* columns: each cohort's own mix, linear interpolation as DuckDB "
    "quantile_cont). 95% intervals: ratio x exp(+-1.96 se) with se the standard deviation of the log ratio "
    "over {B} bootstrap resamples (seed {seed}; blocks of {block}, each from its own random stream, on Spark drawn "
    "on the executors) of the same estimator, resampling each stratum's requests with "
    "replacement in each cohort independently (computed exactly by bisection with conditional binomial "
    "draws)."
)


def bucket_labels(edges: tuple[int, ...]) -> list[str]:
    """Labels of bucket indices 0..len(edges): `<256`, `256-1023`, ..., `>=65536`."""
    out = [f"<{edges[0]}"]
    out += [f"{lo}-{hi - 1}" for lo, hi in zip(edges, edges[1:], strict=False)]
    return out + [f">={edges[-1]}"]


class CompareRows:
    """The compare rows as numpy arrays: cohort mask, stratum codes, metric values."""

    def __init__(self, rows: pl.DataFrame, edges: tuple[int, ...]) -> None:
        self.after = (rows["cohort"] == "after").to_numpy()
        self.workloads = sorted(set(rows["workload"].to_list()))
        w_idx = rows["workload"].replace_strict({w: i for i, w in enumerate(self.workloads)},
                                                return_dtype=pl.Int64).to_numpy()
        self.nb = len(edges) + 2  # bucket 0 = unknown length, then 1 + bucket index
        b_idx = (rows["bucket"].fill_null(-1) + 1).to_numpy()
        self.codes = w_idx * self.nb + b_idx
        self.n_strata = len(self.workloads) * self.nb
        self.labels = ["(unknown)"] + bucket_labels(edges)
        self.values = {m: rows[m].cast(pl.Float64).fill_null(np.nan).to_numpy() for m in METRICS}
        # consecutive blocks of arrivals per cohort (row order where arrivals are not given)
        t = rows["arrival"] if "arrival" in rows.columns else pl.Series(np.arange(rows.height))
        rank = pl.DataFrame({"t": t, "c": self.after}).select(
            pl.col("t").rank("ordinal").over("c") - 1, pl.len().over("c").alias("n"))
        self.blocks = (rank["t"] * judge.BLOCKS // rank["n"].clip(1)).to_numpy().astype(np.int64)

    def stratum_workload(self) -> np.ndarray:
        return np.arange(self.n_strata) // self.nb

    def stratum_bucket(self) -> np.ndarray:
        return np.arange(self.n_strata) % self.nb


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows).with_columns(pl.col(pl.Float64).fill_nan(None)) if rows else pl.DataFrame()


def compare(sel: Selection, *, by: CohortBy | str = CohortBy.label, before: str | None = None,
            after: str | None = None, catalogue: Catalogue | None = None, features: list[str] | None = None,
            metrics: tuple[str, ...] = METRICS, percentiles: tuple[float, ...] = stats.PERCENTILES,
            edges: tuple[int, ...] = DEFAULT_EDGES, mix: str = "pooled", resamples: int = stats.RESAMPLES,
            seed: int = 0, tolerance: float = 0.05, attribution_percentile: float = 0.5,
            capacity: bool = True, gpu_mem_gib: float | None = None, max_gap_s: float = MAX_GAP_S,
            alpha: float = judge.ALPHA) -> Analysis:
    """Compare two cohorts of the selection's window (see the module docstring and `METHOD`)."""
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise UsageError(f"metrics must be among {', '.join(METRICS)} (got {', '.join(metrics) or 'none'})")
    if list(edges) != sorted(set(edges)) or not edges:
        raise UsageError("prompt-length bucket edges must be increasing, e.g. 256,1024,4096,16384,65536")
    if mix not in ("pooled", "before", "after"):
        raise UsageError("--mix must be pooled, before or after")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha:g}: give a false-alarm rate between 0 and 1, e.g. 0.05")
    con = sel.con
    cat = (catalogue or load_catalogue()).select(features)
    # the engine starts read once: the crossing groups below take the same rows (a query less on Spark)
    starts, settings = prepare_starts(con, cat, gpu_mem_gib=gpu_mem_gib)
    mark_requests(con, flags=False)  # the flags come with the comparison's own thresholds (crossing_groups)
    cohorts = resolve(con, by, before, after)
    rows = queries.run(con, "compare_requests", **cohorts.params(), edges=list(edges))
    counts = {c: int((rows["cohort"] == c).sum()) for c in ("before", "after")}
    hist = hist_compare.window_cohorts(con, cohorts.before_window, cohorts.after_window, percentiles)
    if not counts["before"] or not counts["after"]:
        if not hist.is_empty():  # Prometheus histograms answer where a window has no per-request rows
            return hist_compare.histogram_only(sel, cohorts, hist)
        raise UsageError(f"a cohort has no completed requests ({cohorts.describe('before')}: {counts['before']}, "
                         f"{cohorts.describe('after')}: {counts['after']})")
    data = CompareRows(rows, edges)
    groups = attr.crossing_groups(con, starts, settings, rows, max_gap_s)
    # the attribution table's bootstrap joins the latency tables' batch (on Spark: one job a compare)
    tables = latency_tables(data, metrics=metrics, percentiles=percentiles, mix=mix, resamples=resamples,
                            seed=seed, tolerance=tolerance, alpha=alpha, draws=_draws(con),
                            more=_attribution_questions(data, groups, metrics, attribution_percentile))
    est = tables.pop("_estimator")
    overall = {m: _headline(part.to_dicts()) for (m,), part in
               tables["summary"].group_by("metric", maintain_order=True)}
    tables["attribution"] = _attribution(est, data, groups, metrics, overall, attribution_percentile, tolerance)
    tables["cohorts"] = _cohorts(rows, cohorts)
    if capacity:
        tables["capacity"] = _capacity(sel, cohorts)
    tables.update({"histograms": hist} if not hist.is_empty() else {})
    notes = _notes(tables, tolerance) + attr.sharpest(tables["attribution"])
    titles = {
        "summary": f"{cohorts.describe('after')} vs {cohorts.describe('before')}: re-weighted percentiles",
        "by_workload": "per workload (re-weighted over prompt-length buckets)",
        "by_bucket": "per prompt-length bucket (re-weighted over workloads)",
        "mix": "traffic mix per stratum (workload x prompt-length bucket)",
        "attribution": f"attribution: can a feature explain the change? (p{attribution_percentile * 100:g} "
                       "within crossing and other requests)",
        "cohorts": "cohorts", "capacity": "capacity per pod at its running limit",
        "histograms": hist_compare.HISTOGRAM_TITLE,
    }
    definitions = {
        "method": METHOD.format(B=resamples, seed=seed, block=stats.BLOCK, mix={
            "pooled": "both cohorts' requests together", "before": "the before cohort's requests",
            "after": "the after cohort's requests"}[mix]),
        "ratio": "after / before of the re-weighted percentile; ratio_lo/ratio_hi: its 95% bootstrap interval",
        "raw_ratio": "the same without re-weighting (each cohort's own mix): where it differs from ratio, the "
        "traffic mix changed",
        "unmatched": "requests in strata that only one cohort has: left out of the re-weighted percentiles",
        "changed": f"verdict regression or improvement: the change exceeds the tolerance ({tolerance:.0%}) at "
        f"a family-wise error of {alpha:g} (Holm over every row of the summary, per-workload and per-bucket "
        "tables)",
        "verdict": f"regression, improvement, no change, too few requests, undefined (a cohort without values, or "
        "a before percentile of 0): "
        f"{judge.RULE}; {judge.MIN_RULE}",
        "attribution_verdict": attr.VERDICT_RULES,
        "crossed": "a request crossed a feature when its quantity is beyond the threshold in effect after the "
        "change (else before); step-scoped features: the request arrived while its deployment's latest step "
        f"line (at most {max_gap_s:g} s old) was over it",
    }
    params = {**sel.window.to_dict(), **cohorts.params(), "metrics": list(metrics), "percentiles": list(percentiles),
              "edges": list(edges), "mix": mix, "resamples": resamples, "seed": seed, "tolerance": tolerance,
              "alpha": alpha, "attribution_percentile": attribution_percentile}
    definitions.update(hist_compare.HISTOGRAM_DEFINITIONS if "histograms" in tables else {})
    return Analysis("compare", params, tables, titles, definitions, notes)


def latency_tables(data: CompareRows, *, metrics: tuple[str, ...] = METRICS,
                   percentiles: tuple[float, ...] = stats.PERCENTILES, mix: str = "pooled",
                   resamples: int = stats.RESAMPLES, seed: int = 0, tolerance: float = 0.05,
                   alpha: float = judge.ALPHA, draws: Draws | None = None,
                   more: list[Question] | None = None) -> dict[str, Any]:
    """summary, by_workload, by_bucket and mix tables of compare rows (no store needed: bench/calibration
    runs it on simulated requests), judged as one family; `_estimator` holds the estimator for more
    subsets. `draws` draws the bootstrap (in-process unless given; compare's Spark path: on executors);
    `more`: questions asked later of the estimator, drawn in the same batch."""
    est = Estimator(data, ps=tuple(percentiles), mix=mix, resamples=resamples, seed=seed, tolerance=tolerance,
                    draws=draws)
    # every row's bootstrap in one batch (on Spark one job), then read from the estimator's cache; the
    # answers do not depend on the batch (each question has its own random streams)
    est.ratios([(m, subset, None) for subset in [None, *(s for k in ("workload", "bucket")
                                                         for _, s in _groups(data, k))] for m in metrics]
               + list(more or []))
    summary = [{"metric": m, **r} for m in metrics for r in est.ratio(m)]
    tables: dict[str, Any] = judge.judge({
        "summary": _frame(summary), "by_workload": _by_group(est, data, metrics, "workload"),
        "by_bucket": _by_group(est, data, metrics, "bucket")}, alpha)
    tables["mix"] = _mix(data, mix)
    tables["_estimator"] = est
    return tables


def _draws(con: object) -> Draws | None:
    """On Spark the bootstrap is drawn on the executors (attribution.spark.bootstrap); else in-process."""
    if (spark := queries.spark_connection(con)) is None:
        return None
    from attribution.spark.bootstrap import SparkDraws

    return SparkDraws(spark.spark)


def _headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The metric's largest material change over the percentiles (else its largest change): what the
    attribution table asks each feature to explain (missing numbers as NaN)."""
    rows = [{k: np.nan if v is None else v for k, v in r.items()} for r in rows]

    def size(r: dict[str, Any]) -> float:
        return abs(np.log(r["ratio"])) if np.isfinite(r["ratio"]) and r["ratio"] > 0 else -1.0

    changed = [r for r in rows if r["changed"]]
    return max(changed or [r for r in rows if r["enough"]] or rows, key=size)


def _groups(data: CompareRows, kind: str) -> list[tuple[str, np.ndarray]]:
    """Each workload's (or prompt-length bucket's) name and its requests, where it has any."""
    of = data.stratum_workload() if kind == "workload" else data.stratum_bucket()
    names = data.workloads if kind == "workload" else data.labels
    subsets = [(name, of[data.codes] == i) for i, name in enumerate(names)]
    return [(name, subset) for name, subset in subsets if subset.any()]


def _by_group(est: Estimator, data: CompareRows, metrics: tuple[str, ...], kind: str) -> pl.DataFrame:
    rows = []
    for name, subset in _groups(data, kind):
        for m in metrics:
            for r in est.ratio(m, subset):
                if r["n_before"] or r["n_after"]:
                    rows.append({kind: name, "metric": m, **r})
    return _frame(rows)


def _mix(data: CompareRows, mix: str) -> pl.DataFrame:
    nb = np.bincount(data.codes[~data.after], minlength=data.n_strata)
    na = np.bincount(data.codes[data.after], minlength=data.n_strata)
    w = stats.mix_weights(data.codes[~data.after], data.codes[data.after], data.n_strata, mix)
    s = np.nonzero(nb + na)[0]
    return pl.DataFrame({
        "workload": [data.workloads[i // data.nb] for i in s], "bucket": [data.labels[i % data.nb] for i in s],
        "n_before": nb[s], "n_after": na[s], "share_before": nb[s] / max(nb.sum(), 1),
        "share_after": na[s] / max(na.sum(), 1), "weight": w[s],
    })  # fmt: skip


def _crossed(data: CompareRows, groups: list[attr.Group]) -> list[tuple[attr.Group, int, int]]:
    """Each feature group with its crossing requests before and after."""
    return [(g, int((g.crossed & ~data.after).sum()), int((g.crossed & data.after).sum())) for g in groups]


def _attribution_questions(data: CompareRows, groups: list[attr.Group], metrics: tuple[str, ...],
                           p: float) -> list[Question]:
    """The ratios _attribution asks (crossing and other requests of each group), for every metric: a metric
    _attribution skips has a cohort without requests, whose question draws nothing."""
    n_b, n_a = int((~data.after).sum()), int(data.after.sum())
    return [q for g, cb, ca in _crossed(data, groups) for m in metrics for q in
            ([(m, g.crossed, (p,))] if cb and ca else []) + ([(m, ~g.crossed, (p,))] if cb < n_b or ca < n_a
                                                               else [])]


def _attribution(est: Estimator, data: CompareRows, groups: list[attr.Group], metrics: tuple[str, ...],
                 overall: dict[str, dict[str, Any]], p: float, tolerance: float) -> pl.DataFrame:
    rows = []
    n_b, n_a = int((~data.after).sum()), int(data.after.sum())
    judged = [m for m in metrics if np.isfinite(overall[m]["ratio"]) or
              (overall[m]["n_before"] and overall[m]["n_after"])]
    for g, cb, ca in _crossed(data, groups):
        for m in judged:
            o = overall[m]
            cr = est.ratio(m, g.crossed, ps=(p,))[0] if cb and ca else None
            ot = est.ratio(m, ~g.crossed, ps=(p,))[0] if cb < n_b or ca < n_a else None
            if not o["enough"]:
                short, text = "too few requests", (
                    f"{attr.NAMES.get(m, m)} {o['percentile']} is not judged: "
                    f"{o['n_before']:,} requests before and {o['n_after']:,} after, {o['min_requests']:,} needed")
            else:
                short, text = attr.verdict(
                    metric=m, overall=trip(o), at=o["percentile"], share_before=cb / max(n_b, 1),
                    share_after=ca / max(n_a, 1),
                    crossing=trip(cr), other=trip(ot), n_cross=(cb, ca), n_other=(n_b - cb, n_a - ca),
                    tolerance=tolerance)
            rows.append({
                "feature": g.feature, "title": g.title, "scope": g.scope, "quantity": g.quantity, "op": g.op,
                "threshold": g.threshold, "status_before": g.status_before, "status_after": g.status_after,
                "metric": m, "crossed_before": cb, "crossed_after": ca, "share_before": cb / max(n_b, 1),
                "share_after": ca / max(n_a, 1), "overall_percentile": o["percentile"], "overall_ratio": o["ratio"],
                "crossing_ratio": trip(cr)[0], "crossing_lo": trip(cr)[1], "crossing_hi": trip(cr)[2],
                "other_ratio": trip(ot)[0], "other_lo": trip(ot)[1], "other_hi": trip(ot)[2],
                "verdict": short, "explanation": text,
            })  # fmt: skip
    return _frame(rows)


def trip(r: dict[str, Any] | None) -> tuple[float, float, float]:
    return (r["ratio"], r["ratio_lo"], r["ratio_hi"]) if r else (np.nan, np.nan, np.nan)


def _cohorts(rows: pl.DataFrame, cohorts: Cohorts) -> pl.DataFrame:
    return rows.group_by("cohort").agg(
        pl.len().alias("requests"),
        pl.col("deployment").n_unique().alias("deployments"),
        # an unknown part shows as `?` here: a cohort's engines are listed, not grouped
        version_label_expr(pl.col("engine").fill_null("?"), pl.col("engine_version").fill_null("?"))
        .unique().sort().str.join(", ").alias("engines"),
        pl.col("arrival").min().alias("first_arrival"), pl.col("arrival").max().alias("last_arrival"),
    ).with_columns(pl.col("cohort").replace_strict({"before": cohorts.describe("before"),
                                                    "after": cohorts.describe("after")}).alias("definition"),
                   (pl.col("cohort") == "after").alias("_o")).sort("_o").drop("_o")


def _capacity(sel: Selection, cohorts: Cohorts) -> pl.DataFrame:
    """The capacity analysis of each cohort, side by side per pod: its numbers `_before` and `_after`."""
    from attribution.analyses import capacity, select

    parts = []
    if cohorts.by == CohortBy.window:
        for which, (since, until) in cohorts.windows():
            cap = capacity(select(sel.con, since=since, until=until, by="all"), per_group=False)
            parts.append((which, cap.tables["capacity"]))
    else:
        grp = "label" if cohorts.by == CohortBy.label else "version"
        both = capacity(select(sel.con, since=sel.window, by=grp), per_group=True).tables["capacity"]
        for which, value in (("before", cohorts.before), ("after", cohorts.after)):
            parts.append((which, both.filter((pl.col(grp) == value) | pl.col(grp).str.ends_with(f" {value}"))
                          .drop(grp)))
    (_, b), (_, a) = parts
    if b.is_empty() and a.is_empty():
        return pl.DataFrame()
    nums = [c for c in b.columns if c != "deployment" and b.schema[c].is_numeric()]
    wide = b.select("deployment", *[pl.col(c).alias(f"{c}_before") for c in nums]).join(
        a.select("deployment", *[pl.col(c).alias(f"{c}_after") for c in nums]), on="deployment", how="full",
        coalesce=True)
    ratio = (pl.col("capacity_per_day_after") / pl.col("capacity_per_day_before")).alias("capacity_ratio")
    return wide.with_columns(ratio).sort("deployment") if "capacity_per_day" in nums else wide.sort("deployment")


def _notes(tables: dict[str, pl.DataFrame], tolerance: float) -> list[str]:
    notes = []
    s = tables["summary"]
    if s.height:
        outside = (pl.col("raw_ratio") < pl.col("ratio_lo")) | (pl.col("raw_ratio") > pl.col("ratio_hi"))
        shifted = s.filter(outside & ((pl.col("raw_ratio").log() - pl.col("ratio").log()).abs() > np.log1p(tolerance)))
        if shifted.height:
            pairs = ", ".join(f"{r['metric']} {r['percentile']} (raw x{r['raw_ratio']:.3g}, re-weighted "
                              f"x{r['ratio']:.3g})" for r in shifted.iter_rows(named=True))
            notes.append(f"the traffic mix changed: without re-weighting these would read differently: {pairs}")
        unmatched = as_int(s["unmatched"].max() or 0)
        if unmatched:
            notes.append(f"up to {unmatched:,} requests fall in strata only one cohort has and are left out "
                         "(see the mix table)")
        undefined = s.filter(pl.col("ratio").is_null() & pl.col("before").is_not_null())
        if undefined.height:
            notes.append("ratio undefined where the before percentile is 0 (e.g. no queueing): read diff instead")
    missing = [m for m in METRICS if m in set(s["metric"].to_list()) and
               s.filter(pl.col("metric") == m)["before"].is_null().all()] if s.height else []
    if missing:
        notes.append(f"no values for {', '.join(missing)} in one cohort (the logs do not give them)")
    return notes
