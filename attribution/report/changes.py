"""What changed: this window against the one before it (length distributions per group, latency ratios with
bootstrap intervals overall and per workload) and inside this window (engine starts that brought a new
deployment or version; a before/after comparison when the window holds two versions of one engine or two
labels). One library function, `changes`, returning an Analysis like every other analysis.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb
import polars as pl

from attribution.analyses import Analysis, GroupBy, Selection, Window, lengths, select
from attribution.analyses.summary import cohort_of
from attribution.compare import compare
from attribution.compare.attribution import material
from attribution.errors import UsageError
from attribution.thresholds import Catalogue, engine_starts

DRIFT_METRICS = ("prompt_tokens", "output_tokens")
MIN_REQUESTS = 50  # fewer requests on a side than this: too few to call a distribution changed
DEFINITIONS = {
    "previous window": "the window of the same length that ends where this one starts",
    "distance": "largest difference between the two cumulative distributions (share of requests up to a "
    "length) over the log-spaced length bins: a binned Kolmogorov-Smirnov distance, 0 = the same, 1 = disjoint",
    "drift": f"distance >= the drift threshold, with at least {MIN_REQUESTS} requests on each side; new / gone: "
    "the group has requests on one side only",
    "ratio": "this window / the previous one (or after / before) of a re-weighted percentile, with its 95% "
    "bootstrap interval (see `attribution compare`)",
    "regression": "a latency percentile that rose materially: its interval excludes 1 and it rose by more than "
    "the tolerance; improvement: the same, falling",
    "change": "an engine start in the window: new deployment (no start or request of it before, while the store "
    "has earlier data), new version (its previous start ran another version), restart (same version), first "
    "seen (the store has nothing earlier)",
}


def window_end(window: Window) -> datetime | None:
    """Where the window ends: its upper bound, else the newest request it was counted back from."""
    return window.until or window.newest


def previous_window(window: Window) -> Window | None:
    """The window of the same length ending where `window` starts; None when the window has no start."""
    end = window_end(window)
    if window.since is None or end is None:
        return None
    return Window(window.since - (end - window.since), window.since, window.newest)


def iso_week(window: Window) -> str:
    """The ISO week holding the middle of the window (`2026-W19`): what a weekly report is named after."""
    end = window_end(window)
    mid = end if window.since is None else window.since + ((end or window.since) - window.since) / 2
    if mid is None:
        raise UsageError("the window has neither a start nor an end: give --since or --week")
    year, week, _ = mid.isocalendar()
    return f"{year}-W{week:02d}"


def drift(now: Analysis, before: Analysis, threshold: float) -> pl.DataFrame:
    """Per group and length metric: requests, mean and percentiles on both sides, their ratios, and the
    binned distance between the two distributions (from two `lengths` analyses with the same grouping)."""
    gcol = next(c for c in now.tables["stats"].columns if c != "metric")
    cols = ["requests", "mean", "p50", "p90", "p99"]

    def stats(a: Analysis, side: str) -> pl.DataFrame:
        return a.tables["stats"].filter(pl.col("metric").is_in(DRIFT_METRICS)).select(
            gcol, "metric", *[pl.col(c).alias(f"{c}_{side}") for c in cols])

    def cum(a: Analysis, side: str) -> pl.DataFrame:
        return a.tables["histogram"].filter(pl.col("metric").is_in(DRIFT_METRICS)).select(
            gcol, "metric", "bin", pl.col("cum_request_share").alias(side))

    keys = [gcol, "metric"]
    bins = (cum(before, "b").join(cum(now, "a"), on=[*keys, "bin"], how="full", coalesce=True)
            .sort(*keys, "bin")
            # a bin one side lacks holds none of its requests: its cumulative share is the one before it
            .with_columns(pl.col("b", "a").forward_fill().over(keys).fill_null(0.0)))
    dist = bins.group_by(keys).agg((pl.col("a") - pl.col("b")).abs().max().alias("distance"))
    df = stats(before, "before").join(stats(now, "now"), on=keys, how="full", coalesce=True)
    df = df.join(dist, on=keys, how="left").with_columns(
        (pl.col("mean_now") / pl.col("mean_before")).alias("mean_ratio"),
        (pl.col("p50_now") / pl.col("p50_before")).alias("p50_ratio"),
        (pl.col("p90_now") / pl.col("p90_before")).alias("p90_ratio"),
    )
    enough = (pl.col("requests_before") >= MIN_REQUESTS) & (pl.col("requests_now") >= MIN_REQUESTS)
    status = (pl.when(pl.col("requests_before").fill_null(0) == 0).then(pl.lit("new"))
              .when(pl.col("requests_now").fill_null(0) == 0).then(pl.lit("gone"))
              .when(enough & (pl.col("distance") >= threshold)).then(pl.lit("drift"))
              .when(enough).then(pl.lit("stable"))
              .otherwise(pl.lit("too few")))
    return df.with_columns(status.alias("status")).select(
        gcol, "metric", "status", "distance", "requests_before", "requests_now", "mean_before", "mean_now",
        "mean_ratio", "p50_before", "p50_now", "p50_ratio", "p90_before", "p90_now", "p90_ratio", "p99_before",
        "p99_now").sort(gcol, "metric")


def versions(con: duckdb.DuckDBPyConnection, window: Window, has_earlier: bool) -> pl.DataFrame:
    """Engine starts inside the window and what each changed (see DEFINITIONS["change"])."""
    starts = engine_starts(con).select("deployment", "engine", "version", "model", "ts").sort("deployment", "ts")
    starts = starts.with_columns(
        pl.col("version").shift(1).over("deployment", "engine").alias("previous_version"),
        pl.col("ts").shift(1).over("deployment", "engine").alias("previous_start"))
    inside = pl.lit(True)
    if window.since is not None:
        inside = inside & (pl.col("ts") >= window.since)
    if window.until is not None:
        inside = inside & (pl.col("ts") < window.until)
    first = "new deployment" if has_earlier else "first seen"
    change = (pl.when(pl.col("previous_start").is_null()).then(pl.lit(first))
              .when(pl.col("previous_version").eq_missing(pl.col("version"))).then(pl.lit("restart"))
              .otherwise(pl.lit("new version")))
    return starts.filter(inside).with_columns(change.alias("change")).select(
        "deployment", "engine", pl.col("ts").alias("started"), "change", "previous_version", "version", "model")


def _regressions(df: pl.DataFrame, tolerance: float, key: str | None = None) -> pl.DataFrame:
    """Rows whose change is material, with `direction` = regression (slower) or improvement."""
    if df.is_empty():
        return pl.DataFrame()
    keep = [material(r, lo, hi, tolerance) if r is not None and lo is not None and hi is not None else False
            for r, lo, hi in zip(df["ratio"], df["ratio_lo"], df["ratio_hi"], strict=True)]
    out = df.filter(pl.Series(keep, dtype=pl.Boolean)).with_columns(
        pl.when(pl.col("ratio") > 1).then(pl.lit("regression")).otherwise(pl.lit("improvement")).alias("direction"))
    cols = ([key] if key else []) + ["metric", "percentile", "direction", "before", "after", "ratio", "ratio_lo",
                                      "ratio_hi", "n_before", "n_after"]
    return out.select(cols)


def regressions(cmp: Analysis, tolerance: float) -> pl.DataFrame:
    """The material changes of a compare: overall (workload `all`) and per workload."""
    overall = _regressions(cmp.tables["summary"], tolerance)
    parts = [overall.with_columns(pl.lit("all").alias("workload"))] if overall.height else []
    per = _regressions(cmp.tables.get("by_workload", pl.DataFrame()), tolerance, "workload")
    parts += [per] if per.height else []
    return pl.concat(parts, how="diagonal_relaxed").select("workload", pl.exclude("workload")) if parts else \
        pl.DataFrame()


def _span(w: Window, end: datetime) -> str:
    return f"{w.since.isoformat()}..{end.isoformat()}"


def changes(con: duckdb.DuckDBPyConnection, window: Window, *, sel: Selection | None = None,
            now_lengths: Analysis | None = None, by: GroupBy | str = GroupBy.workload,
            catalogue: Catalogue | None = None, resamples: int = 200, tolerance: float = 0.05,
            drift_threshold: float = 0.1, seed: int = 0) -> Analysis:
    """Everything that changed, for the report's `what changed` section. `sel` may be the current selection of
    this window grouped by all on `con` (it is reused); the function then runs its own selections on `con`, so
    earlier Selections on it are replaced. `now_lengths` reuses a lengths analysis of this window grouped by
    `by`."""
    by = GroupBy(by)
    prev = previous_window(window)
    tables: dict[str, pl.DataFrame] = {}
    notes: list[str] = []
    params: dict[str, Any] = {**window.to_dict(), "previous": prev.to_dict() if prev else None, "by": by.value,
                              "resamples": resamples, "tolerance": tolerance, "drift_threshold": drift_threshold}

    if sel is None or sel.by != GroupBy.all:
        sel = select(con, since=window, by=GroupBy.all)
    cohort = cohort_of(sel)
    if cohort is not None:
        try:
            up = compare(sel, by=cohort.value, catalogue=catalogue, resamples=resamples, tolerance=tolerance,
                         seed=seed, capacity=False)
            params["cohorts"] = {"by": cohort.value, "before": up.params["before"], "after": up.params["after"]}
            tables["upgrade_cohorts"] = up.tables["cohorts"]
            tables["upgrade_summary"] = up.tables["summary"].filter(pl.col("ratio").is_not_null())
            tables["upgrade_by_workload"] = up.tables["by_workload"]
            tables["upgrade_regressions"] = regressions(up, tolerance)
            tables["upgrade_attribution"] = up.tables["attribution"]
            notes += [f"{up.params['after']} vs {up.params['before']}: {n}" for n in up.notes]
        except UsageError as exc:
            notes.append(f"the window holds several {cohort.value}s but no single before/after pair: {exc}")

    prev_n = 0
    end = window_end(window)
    if prev is not None and end is not None:
        psel = select(con, since=prev, by=by)
        prev_n = psel.requests
        params["previous_requests"] = prev_n
        if prev_n:
            before = lengths(psel)
            if now_lengths is None:
                now_lengths = lengths(select(con, since=window, by=by))
            tables["drift"] = drift(now_lengths, before, drift_threshold)
            wsel = select(con, since=prev.since, until=window.until, by=GroupBy.all)
            # an open window ends after its newest request (the window is half-open)
            after_end = window.until or end + timedelta(seconds=1)
            try:
                wk = compare(wsel, by="window", before=_span(prev, prev.until), after=_span(window, after_end),
                             catalogue=catalogue, resamples=resamples, tolerance=tolerance, seed=seed, capacity=False)
                tables["week_summary"] = wk.tables["summary"].filter(pl.col("ratio").is_not_null())
                tables["week_regressions"] = regressions(wk, tolerance)
                tables["week_attribution"] = wk.tables["attribution"]
                notes += [f"vs the previous window: {n}" for n in wk.notes]
            except UsageError as exc:
                notes.append(f"no latency comparison with the previous window: {exc}")
        else:
            notes.append("the previous window holds no requests: nothing to compare this window with")
    tables["versions"] = versions(con, window, has_earlier=prev_n > 0)
    titles = {
        "drift": "length distributions: this window vs the previous one",
        "week_summary": "latency: this window vs the previous one (re-weighted percentiles)",
        "week_regressions": "material latency changes vs the previous window",
        "week_attribution": "which features can explain the change vs the previous window",
        "versions": "engine starts in this window",
        "upgrade_cohorts": "the two cohorts inside this window",
        "upgrade_summary": "latency after vs before, inside this window (re-weighted percentiles)",
        "upgrade_by_workload": "per workload",
        "upgrade_regressions": "material latency changes inside this window, overall and per workload",
        "upgrade_attribution": "which features can explain the change inside this window",
    }
    return Analysis("changes", params, tables, {k: v for k, v in titles.items() if k in tables}, DEFINITIONS,
                    notes)
