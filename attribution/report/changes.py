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
from attribution.analyses.overview import cohort_of
from attribution.compare import compare, judge
from attribution.errors import UsageError
from attribution.report import drift as drifts
from attribution.report.drift import DriftSettings
from attribution.thresholds import Catalogue, engine_starts

DRIFT_METRICS = drifts.LENGTHS
DEFINITIONS = {
    "previous window": "the window of the same length that ends where this one starts",
    **drifts.DEFINITIONS,
    "ratio": "this window / the previous one (or after / before) of a re-weighted percentile, with its 95% "
    "interval (see `attribution compare`)",
    "regression": "a latency percentile that rose materially (improvement: fell): " + judge.RULE
    + "; the family is every row of the overall and per-workload tables against the previous window and "
    "inside this window together, at half of alpha (traffic and length drift a quarter each: all the "
    "report's alarms together false-alarm at most alpha)",
    "too few requests": judge.MIN_RULE,
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


def drift(now: Analysis, before: Analysis, distances: pl.DataFrame) -> pl.DataFrame:
    """Per group and length metric: requests, mean and percentiles on both sides and their ratios (from two
    `lengths` analyses with the same grouping), with the distance, its interval and the status of
    drift.lengths (`distances`, its group column named as the analyses' one)."""
    gcol = next(c for c in now.tables["stats"].columns if c != "metric")
    cols = ["requests", "mean", "p50", "p90", "p99"]

    def stats(a: Analysis, side: str) -> pl.DataFrame:
        return a.tables["stats"].filter(pl.col("metric").is_in(DRIFT_METRICS)).select(
            gcol, "metric", *[pl.col(c).alias(f"{c}_{side}") for c in cols])

    keys = [gcol, "metric"]
    dist = distances.rename({"grp": gcol}).select(*keys, "status", "distance", "distance_lo", "distance_hi")
    df = stats(before, "before").join(stats(now, "now"), on=keys, how="full", coalesce=True)
    df = df.with_columns(pl.col(gcol).cast(pl.Utf8)).join(dist, on=keys, how="left").with_columns(
        (pl.col("mean_now") / pl.col("mean_before")).alias("mean_ratio"),
        (pl.col("p50_now") / pl.col("p50_before")).alias("p50_ratio"),
        (pl.col("p90_now") / pl.col("p90_before")).alias("p90_ratio"),
    )
    return df.select(
        gcol, "metric", "status", "distance", "distance_lo", "distance_hi", "requests_before", "requests_now", "mean_before", "mean_now",
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


def _regressions(df: pl.DataFrame, key: str | None = None) -> pl.DataFrame:
    """Rows judged a regression or an improvement, with `direction` = that verdict."""
    if df.is_empty() or "verdict" not in df.columns:
        return pl.DataFrame()
    out = df.filter(pl.col("changed")).with_columns(pl.col("verdict").alias("direction"))
    cols = ([key] if key else []) + ["metric", "percentile", "direction", "before", "after", "ratio", "ratio_lo",
                                      "ratio_hi", "p_adjusted", "n_before", "n_after"]
    return out.select(cols)


def regressions(summary: pl.DataFrame, by_workload: pl.DataFrame) -> pl.DataFrame:
    """The judged changes of a compare (see judge.judge): overall (workload `all`) and per workload."""
    overall = _regressions(summary)
    parts = [overall.with_columns(pl.lit("all").alias("workload"))] if overall.height else []
    per = _regressions(by_workload, "workload")
    parts += [per] if per.height else []
    return pl.concat(parts, how="diagonal_relaxed").select("workload", pl.exclude("workload")) if parts else \
        pl.DataFrame()


def _span(since: datetime, end: datetime) -> str:
    return f"{since.isoformat()}..{end.isoformat()}"


def _raw(sel: Selection) -> pl.DataFrame:
    """The selection's requests for the drift checks, their group as text."""
    return sel.run("drift_requests").with_columns(pl.col("grp").cast(pl.Utf8).fill_null("(none)"))


def changes(con: duckdb.DuckDBPyConnection, window: Window, *, sel: Selection | None = None,
            now_lengths: Analysis | None = None, by: GroupBy | str = GroupBy.workload,
            catalogue: Catalogue | None = None, resamples: int = 200, tolerance: float = 0.05,
            drift_threshold: float = 0.1, seed: int = 0, alpha: float = judge.ALPHA,
            drift_settings: DriftSettings | None = None) -> Analysis:
    """Everything that changed, for the report's `what changed` section. `sel` may be the current selection of
    this window grouped by all on `con` (it is reused); the function then runs its own selections on `con`, so
    earlier Selections on it are replaced. `now_lengths` reuses a lengths analysis of this window grouped by
    `by`. Every latency row against the previous window and inside this one is judged as one family (Holm at
    `alpha`); `drift_settings` (default: `drift_threshold` and the defaults) sets the drift checks."""
    by = GroupBy(by)
    ds = drift_settings or DriftSettings(distance=drift_threshold, alpha=alpha)
    prev = previous_window(window)
    tables: dict[str, pl.DataFrame] = {}
    notes: list[str] = []
    params: dict[str, Any] = {**window.to_dict(), "previous": prev.to_dict() if prev else None, "by": by.value,
                              "resamples": resamples, "tolerance": tolerance, "alpha": alpha,
                              "drift_threshold": ds.distance, "drift_share": ds.share,
                              "drift_share_change": ds.share_change, "drift_rate": ds.rate}
    family: dict[str, pl.DataFrame] = {}

    if sel is None or sel.by != GroupBy.all:
        sel = select(con, since=window, by=GroupBy.all)
    cohort = cohort_of(sel)
    if cohort is not None:
        try:
            up = compare(sel, by=cohort.value, catalogue=catalogue, resamples=resamples, tolerance=tolerance,
                         seed=seed, capacity=False, alpha=alpha)
            params["cohorts"] = {"by": cohort.value, "before": up.params["before"], "after": up.params["after"]}
            tables["upgrade_cohorts"] = up.tables["cohorts"]
            family["upgrade_summary"], family["upgrade_by_workload"] = up.tables["summary"], up.tables["by_workload"]
            tables["upgrade_attribution"] = up.tables["attribution"]
            notes += [f"{up.params['after']} vs {up.params['before']}: {n}" for n in up.notes]
        except UsageError as exc:
            notes.append(f"the window holds several {cohort.value}s but no single before/after pair: {exc}")

    prev_n = 0
    end = window_end(window)
    if prev is not None and prev.since is not None and prev.until is not None and end is not None:
        psel = select(con, since=prev, by=by)
        prev_n = psel.requests
        params["previous_requests"] = prev_n
        if prev_n:
            raw_prev = _raw(psel)
            before = lengths(psel)
            if now_lengths is None:
                now_lengths = lengths(select(con, since=window, by=by))
            raw_now = _raw(select(con, since=window, by=by))
            # an open window ends after its newest request (the window is half-open)
            after_end = window.until or end + timedelta(seconds=1)
            gcol = next(c for c in now_lengths.tables["stats"].columns if c != "metric")
            tables["traffic"] = drifts.traffic(
                raw_prev, raw_now, drifts.hours(raw_prev, prev.since, prev.until),
                drifts.hours(raw_now, window.since, after_end), ds).rename({"grp": gcol})
            tables["drift"] = drift(now_lengths, before, drifts.lengths(raw_prev, raw_now, ds))
            wsel = select(con, since=prev.since, until=window.until, by=GroupBy.all)
            try:
                # (the previous window ends where this one starts)
                wk = compare(wsel, by="window", before=_span(prev.since, prev.until),
                             after=_span(prev.until, after_end),
                             catalogue=catalogue, resamples=resamples, tolerance=tolerance, seed=seed, capacity=False,
                             alpha=alpha)
                family["week_summary"], family["week_by_workload"] = wk.tables["summary"], wk.tables["by_workload"]
                tables["week_attribution"] = wk.tables["attribution"]
                notes += [f"vs the previous window: {n}" for n in wk.notes]
            except UsageError as exc:
                notes.append(f"no latency comparison with the previous window: {exc}")
        else:
            notes.append("the previous window holds no requests: nothing to compare this window with")
    # one family: every latency alarm this section can raise, at its share of alpha (drift has the rest)
    family = judge.judge(family, alpha * drifts.LATENCY_SHARE)
    for which in ("week", "upgrade"):
        if f"{which}_summary" not in family:
            continue
        summary, per = family[f"{which}_summary"], family[f"{which}_by_workload"]
        tables[f"{which}_summary"] = summary.filter(pl.col("ratio").is_not_null())
        if which == "upgrade":
            tables["upgrade_by_workload"] = per
        tables[f"{which}_regressions"] = regressions(summary, per)
        few = judge.too_few_text(summary, per)
        if few:
            what = "against the previous window" if which == "week" else \
                f"inside this window ({params['cohorts']['after']} vs {params['cohorts']['before']})"
            notes.append(f"not judged {what}, too few requests: {few}")
    tables["versions"] = versions(con, window, has_earlier=prev_n > 0)
    titles = {
        "drift": "length distributions: this window vs the previous one",
        "traffic": "traffic per group: this window vs the previous one",
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
