"""`build_report`: run every library analysis once on one snapshot of the store for the report's window (and
the window before it), then hand the answers to the section builders. The report computes nothing itself:
every number comes from attribution.analyses, thresholds, compare, memsplit, changes or health.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from attribution.analyses import (
    Analysis,
    GroupBy,
    Slo,
    Window,
    arrivals,
    capacity,
    concurrency,
    latency,
    lengths,
    parse_slo,
    resolve_window,
    select,
)
from attribution.analyses.arrival_change import ChangeRule, burstiness_change
from attribution.analyses.common import keep_selections, release, selections_on_disk
from attribution.analyses.exact import shared_sweeps
from attribution.analyses.overview import cohort_latency, cohort_of, findings
from attribution.config import Settings, connect_settings
from attribution.db import bound_memory
from attribution.errors import InputError, UsageError
from attribution.histograms import metric_window
from attribution.histograms import metrics as histogram_metrics
from attribution.histograms.analysis import histograms_stored, shared_increases
from attribution.memsplit import memsplit
from attribution.pruning import anchor_connection, plan
from attribution.report import sections
from attribution.report.actions import MAX_ACTIONS, pick_actions
from attribution.report.cache_section import report_cache
from attribution.report.changes import changes, iso_week, previous_window, window_end
from attribution.report.drift import DriftSettings
from attribution.report.health import health
from attribution.report.model import Report
from attribution.store import Store
from attribution.thresholds import load_catalogue, thresholds
from attribution.thresholds.steps import keep_step_rows

Progress = Callable[[str], None]
# DuckDB's working memory for the report's connection (attribution.db.bound_memory; $ATTRIBUTION_DUCKDB_MEMORY_MB):
# beyond it DuckDB spills instead of growing (its default, 80% of the machine, made a 6M-request report 9.4 GB).
# 1 GB spilled about 20 GB at 6M requests and made the report slower while the selections were temporary tables
# (2 GB then); with them in a database file (selections_on_disk) 1 GB leaves the Python steps room under 2 GB:
# at 6M the thresholds' peak 2,267 -> 1,590 MB, +7 CPU s of spill (bench/scale/README.md, mem36).
MEMORY_MB = 1024


@dataclass
class Inputs:
    """Every analysis a report is made of, for one window."""

    window: Window
    by: GroupBy
    slo: Slo
    settings: Settings
    commit: int = 0  # the store commit every analysis read
    requests: int = 0
    lengths: Analysis | None = None
    concurrency: Analysis | None = None
    latency: Analysis | None = None
    cohort_latency: Analysis | None = None  # grouped by label or version when the window holds a before/after
    capacity: Analysis | None = None
    findings: pl.DataFrame | None = None
    thresholds: Analysis | None = None
    changes: Analysis | None = None
    memsplit: Analysis | None = None
    health: Analysis | None = None
    metrics: Analysis | None = None  # Prometheus histograms and counters (attribution.histograms)
    arrivals: Analysis | None = None
    burstiness: pl.DataFrame | None = None  # inter-arrival CV now against the previous window, per group
    burstiness_rule: str = ""
    cache: Analysis | None = None
    cache_changes: pl.DataFrame | None = None  # workloads whose measured cache reuse moved materially
    skipped: dict[str, str] = field(default_factory=dict)  # analysis -> why it is missing


def parse_week(text: str, newest: datetime | None) -> Window:
    """`2026-W19` (ISO week, Monday 00:00 UTC to the next Monday) or `last`: the last whole ISO week before
    the newest request in the store."""
    if text.strip().lower() == "last":
        if newest is None:
            raise UsageError("--week last needs requests in the store")
        monday = datetime(newest.year, newest.month, newest.day, tzinfo=UTC) - timedelta(days=newest.weekday())
        return Window(monday - timedelta(days=7), monday, newest)
    try:
        start = datetime.strptime(text.strip() + "-1", "%G-W%V-%u").replace(tzinfo=UTC)
    except ValueError:
        raise UsageError(f"--week {text!r}: write an ISO week such as 2026-W19, or `last`") from None
    return Window(start, start + timedelta(days=7), newest)


SPARK_SELECTIONS = 6  # the distinct selections of the report's analyses on Spark (_run_analyses)


def report_window(con: Any, *, since: Any = None, until: Any = None, week: str | None = None,
                  default: str = "7d") -> Window:
    """The report's window: --week, else --since/--until (relative spans count back from the newest request),
    else the default span. Raises InputError when the store holds no requests at all."""
    resolve: Callable[..., Window] = resolve_window
    try:
        newest = resolve_window(con, "0s").newest
    except UsageError:
        try:  # Prometheus samples alone (issue 18): spans count back from the newest sample
            newest, resolve = metric_window(con, "0s").newest, metric_window
        except UsageError:
            raise InputError("the store holds no requests: nothing to report (`attribution status` shows what "
                             "the ingest read)") from None
    if week:
        if since is not None or until is not None:
            raise UsageError("give either --week or --since/--until, not both")
        return parse_week(week, newest)
    if since is None and until is None:
        since = default
    w = resolve(con, since, until)
    return Window(w.since, w.until, newest)


def report_days(store: Store, snapshot: Any, window: Window) -> dict[str, Any] | None:
    """The days the report of `window` reads (attribution.pruning.plan): the window's and the previous
    window's, which the changes compare it with."""
    return plan(store, snapshot, (previous_window(window) or window).since, window.until)


def run_analyses(store: Store, settings: Settings, *, since: Any = None, until: Any = None, week: str | None = None,
                 ingest: dict[str, Any] | None = None, progress: Progress | None = None) -> Inputs:
    """Every analysis of the report on one snapshot of `store` (an ingest committing meanwhile is not seen)."""
    with shared_increases():  # several analyses read the window's Prometheus increases: read once
        return _run_analyses(store, settings, since=since, until=until, week=week, ingest=ingest, progress=progress)


def _run_analyses(store: Store, settings: Settings, *, since: Any, until: Any, week: str | None,
                  ingest: dict[str, Any] | None, progress: Progress | None) -> Inputs:
    say = progress or (lambda _: None)
    snapshot = store.snapshot()
    if settings.engine == "spark":  # Spark's views over the snapshot: the same queries for every analysis below
        from attribution.spark.connection import REPORT_KEEPS
        from attribution.spark.connection import connect_settings as spark_connect

        con: Any = spark_connect(store, snapshot, settings, keep=REPORT_KEEPS)
        window = report_window(con, since=since, until=until, week=week, default=settings.window)
        # the selections kept: the analyses below ask eight or more times for about six (the window by group,
        # by cohort and overall, the previous window by group, both windows overall, the memory split's
        # periods); each is a job over the join, and a replaced one stays in the executors' storage
        # (MEMORY_AND_DISK) until the JVM collects it anyway
        keep_selections(con, SPARK_SELECTIONS)
    else:
        # the window first, from the newest days alone; then a connection reading only its days and the
        # previous window's (the changes compare the two), with the margins attribution.pruning gives each table
        probe = anchor_connection(store, snapshot)
        connect_settings(probe, settings)
        window = report_window(probe, since=since, until=until, week=week, default=settings.window)
        con = store.connect(snapshot, days=report_days(store, snapshot, window))
        connect_settings(con, settings)  # the config's workload names replace the store's own mapping here
        scratch = bound_memory(con, MEMORY_MB, shed=True)  # (cached blocks shed before a sweep: db.shed_cache)
        # the selections in a database file beside the spill (compressed, read back as the cap requires): a
        # temporary table of a 6M window's requests held the whole cap (bench/scale/README.md, mem35)
        selections_on_disk(con, scratch)
        # four selections kept (the window by group, by cohort and overall, the previous window): on disk they
        # hold no working memory (as temporary tables three held ~1 GB beside the changes' compare, mem31),
        # and the arrivals, the burstiness change and the memory split reuse them instead of selecting again
        # (6M: 130.6 against 147.9 CPU s, same bytes: bench/scale/README.md, mem35)
        keep_selections(con, 4)
        # the thresholds read the window's step lines and the changes' compare every day's: kept, they stayed
        # beside the compare's bootstrap. Where the window holds every day's lines (a store of one week) the
        # compare takes the thresholds' rows once instead of reading them again.
        keep_step_rows(con, False, whole=True)
    # each step's temporary tables dropped once it is done (as the dashboard does after a page): they would
    # hold DuckDB's capped memory, or spill, while the next steps run
    done: Callable[..., None] = (lambda keep=(): None) if settings.engine == "spark" else \
        (lambda keep=(): release(con, keep))
    by = GroupBy(settings.by)
    slo = parse_slo(list(settings.slo) or None, settings.slo_preset)
    inp = Inputs(window, by, slo, settings, commit=snapshot.version)
    sel = select(con, since=window, by=by)
    inp.requests = sel.requests
    catalogue = load_catalogue(list(settings.catalogue), list(settings.thresholds))
    if sel.requests:
        say("lengths, concurrency, latency, capacity")
        inp.lengths = lengths(sel, percentiles=settings.percentiles)
        with shared_sweeps(sel):  # capacity's estimates read the concurrency analysis' sweep of the window
            inp.concurrency = concurrency(sel, per_group=False, timeseries=True, percentiles=settings.percentiles)
            inp.capacity = capacity(sel, gpu_hour_cost=settings.gpu_hour_cost, gpus_per_pod=settings.gpus_per_pod,
                                    per_group=False, conc=inp.concurrency)
        inp.latency = latency(sel, slo=slo, percentiles=settings.percentiles)
        cohort, inp.cohort_latency = cohort_latency(sel, slo, settings.percentiles)
        inp.findings = findings(inp.lengths, inp.concurrency, inp.capacity, inp.latency, slo,
                                "group" if by == GroupBy.all else by.value, cohort=cohort,
                                cohort_lat=inp.cohort_latency, ceiling_share=settings.ceiling_share)
        done()
        say("thresholds")
        everything = select(con, since=window, by=GroupBy.all)
        inp.thresholds = thresholds(everything, catalogue)
        # the changes compare the window's cohorts (labels or versions) on this selection: they read the
        # thresholds' int_threshold_requests instead of making it again (~400 MB at 1M requests)
        reused = settings.engine != "spark" and cohort_of(everything) is not None
        done(("int_threshold_requests",) if reused else ())
        say("changes against the previous window")
        inp.changes = window_changes(con, window, settings, sel=everything, now_lengths=inp.lengths,
                                     catalogue=catalogue)
        if settings.engine != "spark":
            keep_step_rows(con, False)  # (rows the compare did not take)
        done()
        say("arrivals")
        run_arrivals(inp, con)
        done()
        say("prompt cache")
        inp.cache, inp.cache_changes = report_cache(con, window, settings)
        done()
    else:
        inp.skipped["requests"] = "no requests in this window"
        if histograms_stored(con):  # the engines' token histograms still count request-scoped thresholds
            say("thresholds")
            inp.thresholds = thresholds(select(con, since=window, by=GroupBy.all), catalogue)
    say("memory split")
    try:
        inp.memsplit = memsplit(con, settings.model, since=window.since, until=window.until,
                                run_whatif=settings.whatif)
    except UsageError as exc:
        inp.skipped["memsplit"] = str(exc)
    done()
    inp.metrics = histogram_metrics(con, since=window.since, until=window.until, percentiles=settings.percentiles,
                                    slo=slo.terms)
    say("ingest health")
    inp.health = window_health(store, con, window, settings, ingest=ingest)
    return inp


def run_arrivals(inp: Inputs, con: Any) -> None:
    """The arrivals analysis of the window and the burstiness change against the previous one (each replaces
    the connection's selection: run after the analyses that read it)."""
    inp.arrivals = arrivals(select(con, since=inp.window, by=inp.by), tz=inp.settings.tz, timeseries=True)
    prev = previous_window(inp.window)
    if prev is not None:
        rule = ChangeRule(alpha=inp.settings.alpha)
        inp.burstiness, inp.burstiness_rule = burstiness_change(con, inp.window, prev, inp.by, rule), rule.text()


def window_changes(con: Any, window: Window, settings: Settings, *, sel: Any = None,
                   now_lengths: Analysis | None = None, catalogue: Any = None) -> Analysis:
    """What changed in `window` (attribution.report.changes.changes) with the settings' grouping, catalogue,
    resampling and drift rules: the same answer for the report, `attribution changes` and the dashboard."""
    if catalogue is None:
        catalogue = load_catalogue(list(settings.catalogue), list(settings.thresholds))
    return changes(con, window, sel=sel, now_lengths=now_lengths, by=GroupBy(settings.by), catalogue=catalogue,
                   resamples=settings.resamples, tolerance=settings.tolerance, alpha=settings.alpha,
                   drift_settings=drift_settings(settings))


def window_health(store: Store, con: Any, window: Window, settings: Settings,
                  ingest: dict[str, Any] | None = None) -> Analysis:
    """Ingest health for `window` (attribution.report.health.health) with the settings' gap length: the same
    answer for the report, `attribution health` and the dashboard."""
    return health(store, con, window, gap_minutes=settings.gap_minutes, ingest=ingest)


def drift_settings(settings: Settings) -> DriftSettings:
    return DriftSettings(distance=settings.drift_threshold, share=settings.drift_share,
                         share_change=settings.drift_share_change, rate=settings.drift_rate, alpha=settings.alpha)


def build_report(store: Store, settings: Settings, *, since: Any = None, until: Any = None, week: str | None = None,
                 ingest: dict[str, Any] | None = None, progress: Progress | None = None) -> Report:
    """The whole report for one window: run the analyses, build the sections, pick the action lines."""
    inp = run_analyses(store, settings, since=since, until=until, week=week, ingest=ingest, progress=progress)
    return assemble(inp, store)


def assemble(inp: Inputs, store: Store) -> Report:
    """The report made of analyses already run: sections and action lines (no computing)."""
    w = inp.window
    prev = previous_window(w)
    window = {
        "since": w.since, "until": w.until, "end": window_end(w), "newest_request": w.newest,
        "requests": inp.requests,
        "previous": {"since": prev.since, "until": prev.until,
                     "requests": (inp.changes.params.get("previous_requests") if inp.changes else None)}
        if prev else None,
    }
    settings = inp.settings
    report = Report(
        week=iso_week(w), window=window,
        source={"store": str(store.root.resolve()), "commit": inp.commit},
        settings={**settings.public(), "slo": inp.slo.to_dict(),
                  "from": {k: v for k, v in settings.sources.items() if v != "default"}},
    )
    report.sections = sections.all_sections(inp)
    found = pick_actions(inp)
    report.actions = found[:MAX_ACTIONS]
    report.found = sorted({a.kind for a in found})
    report.severities = sorted({a.severity for a in found})
    return report
