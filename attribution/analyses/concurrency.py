"""Concurrency per deployment (and group): the event sweep of DESIGN.md over per-request intervals (exact),
the engine's own step lines where a deployment has nothing else (sampled), or a replay of arrivals through
the simulator's service model where only arrivals are known (estimate). The sweep is computed by
attribution.analyses.sweep (NumPy, seconds on millions of requests); tests/oracle/ holds a SQL statement of it
that the tests compare with."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date
from datetime import time as dtime
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from attribution import kept, queries
from attribution.analyses import limits, sweep
from attribution.analyses.common import (
    PERCENTILE_METHOD,
    Analysis,
    Selection,
    base_params,
    name_groups,
    percentile_column,
    percentile_list,
    spread_percentiles,
)
from attribution.analyses.estimate import estimate_concurrency
from attribution.analyses.exact import exact_frames
from attribution.analyses.sweep import pick_bucket_s
from attribution.choices import GroupBy
from attribution.views import scrapes_stored

if TYPE_CHECKING:
    from collections.abc import Callable

    from attribution.schema import PolarsType

DEFAULT_SERVICE_MODEL = "vllm-chat-small"
METRIC_ORDER = {m: i for i, m in enumerate(("running", "waiting", "in_system", "kv_tokens", "seen_at_arrival"))}
def schema(percentiles: list[float]) -> dict[str, PolarsType]:
    """The columns of the pods and groups tables, with one column per percentile."""
    return {"deployment": pl.Utf8, "grp": pl.Utf8, "metric": pl.Utf8, "source": pl.Utf8, "peak": pl.Float64,
            "mean": pl.Float64, **{percentile_column(p): pl.Float64 for p in percentiles},
            "peak_at": pl.Datetime("us", "UTC")}


DEFINITIONS = {
    "intervals": "waiting = [arrival, arrival + queue_s), running = [arrival + queue_s, arrival + e2e_s); half-open, "
    "so a request ending at t and one starting at t never overlap. Where queue_s is unknown the split is "
    "unknown and the whole interval counts as in_system only",
    "running/waiting/in_system": "time-weighted over the span from the first arrival to the last end (within "
    "the window): mean = time average; pXX = the smallest value v such that the count was <= v for at least "
    "XX% of that time; peak = the maximum, peak_at = its first instant",
    "kv_tokens": "live KV tokens of the running requests: prompt_tokens from admission plus output tokens "
    "growing linearly from 0 at the first token to output_tokens at the end (an approximation: chunked "
    "prefill fills the prompt gradually); percentiles weight each state by its duration at its mean value in "
    "whole tokens",
    "seen_at_arrival": "the other requests in the system (running + waiting) at the instant a request arrived; "
    + PERCENTILE_METHOD,
    "running_limit": "how many requests the engine lets run at once, with limit_source: "
    + "; ".join(f"{k} = {v}" for k, v in limits.LIMIT_SOURCES.items()),
    "kv_concurrency_at_max_len": "vLLM's startup `Maximum concurrency for N tokens per request: Xx`: requests of "
    "max_model_len tokens the KV pool holds at once; a memory figure, not a running limit",
    "at_limit_share_of_busy_steps": "of the engine's step lines printed while a request ran or waited, the "
    "share with running at running_limit",
    "source": "exact = sweep over per-request intervals; sampled = the engine's step lines (running/waiting "
    "as printed; each line weighted by the time to the next, at most max_gap_s; a peak between lines is "
    "missed); estimate = arrivals replayed through the simulator's service model (see notes)",
}


def step_line_frames(sel: Selection, deployments: list[str], *, max_gap_s: float, timeseries: bool,
                     bucket_s: int | None, percentiles: list[float] | None = None
                     ) -> tuple[pl.DataFrame, pl.DataFrame | None, int | None]:
    """Stats and, if asked, a time series of `deployments` from their engine step lines
    (queries/int_concurrency_step_lines.sql, reduced to the time at each value by int_concurrency_step_hist.sql
    for concurrency_sampled.sql, and read by concurrency_sampled_timeseries.sql), and the series' bucket in
    seconds (picked from the lines' span when not given). On a store connection a window of whole UTC days is
    merged from per-day frames (`DayFrames`), else the frames may come from those of every deployment
    (`_kept_frames`)."""
    ps = percentile_list(percentiles)
    quantiles = sweep.quantile_fractions(ps)
    keeps = kept.keeps(sel.con)
    days = DayFrames.of(sel, deployments, max_gap_s) if keeps else None
    ready: list[tuple[Callable[..., pl.DataFrame], Callable[[], float]]] = []

    def frames() -> tuple[Callable[..., pl.DataFrame], Callable[[], float]]:  # from the lines, when needed
        if not ready:
            ready.append((_kept_frames(sel, deployments, max_gap_s) if keeps else None)
                         or _own_frames(sel, deployments, max_gap_s))
        return ready[0]

    if days is not None:
        raw = days.sampled(quantiles)
    else:
        raw = frames()[0]("concurrency_sampled", tuple(quantiles), quantiles=quantiles)
    stats = spread_percentiles(raw, ps).drop("lines").with_columns(source=pl.lit("sampled"))
    series = None
    if timeseries:
        if bucket_s is None:
            bucket_s = pick_bucket_s(days.span() if days is not None else frames()[1]())
        bucket_us = int(bucket_s * 1_000_000)
        if days is not None and bucket_s % DAY_BUCKET_S == 0:
            series = days.series(bucket_s)
        else:
            series = frames()[0]("concurrency_sampled_timeseries", (bucket_us,), bucket_us=bucket_us)
    return stats, series, bucket_s


def _own_frames(sel: Selection, deployments: list[str], max_gap_s: float
                ) -> tuple[Callable[..., pl.DataFrame], Callable[[], float]]:
    """How `step_line_frames` computes its frames from the lines of `deployments` in the window (materialised
    once, when a frame first needs them), and their span."""
    made: list[bool] = []

    def lines() -> None:
        if not made:
            sel.materialize("int_concurrency_step_lines", deployments=deployments, max_gap_s=max_gap_s)
            made.append(True)

    def run(name: str, extra: tuple[object, ...], **params: Any) -> pl.DataFrame:
        lines()
        if name == "concurrency_sampled":
            sel.materialize("int_concurrency_step_hist")
        return sel.run(name, **params)

    def span() -> float:
        lines()
        return float(sel.run("concurrency_steps_span")["span_s"][0])
    return run, span


STEP_VIEWS = ("engine_steps", "engine_config")  # what int_concurrency_step_lines reads


def _kept_frames(sel: Selection, deployments: list[str], max_gap_s: float
                 ) -> tuple[Callable[..., pl.DataFrame], Callable[[], float]] | None:
    """How `step_line_frames` reads its frames from those of every deployment's step lines in the window,
    computed once per store commit, window and narrowed engine views (attribution.kept) and filtered to
    `deployments` (a deployment's stats and series read only its own lines, so they are the same rows), and the
    lines' span. A workload filter leaves the engine lines whole and changes only which deployments are
    sampled, so a second workload (or the first after another reader) reads them. None (computed for the set
    asked, as before) when the set holds less than half of the window's lines (every deployment's would cost
    more than twice its own: a day window's few split pods), or when two deployments' lines share one name
    (`x #1`, a rank or a pod so named)."""
    window = (sel.window.since, sel.window.until)
    pods = kept.kept(sel.con, "concurrency_step_pods", (queries.load("concurrency_step_pods").sql, *window),
                     STEP_VIEWS, lambda: sel.run("concurrency_step_pods"))
    names = pods.filter(pl.col("deployment").is_in(deployments))
    if pods["name"].n_unique() != pods.height or 2 * names["lines"].sum() < pods["lines"].sum():
        return None
    wanted = names["name"].to_list()
    made: list[bool] = []

    def lines() -> None:  # every deployment's lines, materialised once for the frames not kept yet
        if not made:
            sel.materialize("int_concurrency_step_lines", deployments=pods["deployment"].unique().sort().to_list(),
                            max_gap_s=max_gap_s)
            made.append(True)

    def frame(name: str, extra: tuple[object, ...], **params: Any) -> pl.DataFrame:
        def compute() -> pl.DataFrame:
            lines()
            if name == "concurrency_sampled":
                sel.materialize("int_concurrency_step_hist")
            return sel.run(name, **params)
        parts = (queries.load("int_concurrency_step_lines").sql, queries.load(name).sql, *window, max_gap_s, *extra)
        return kept.kept(sel.con, name, parts, STEP_VIEWS, compute).filter(pl.col("deployment").is_in(wanted))

    def span() -> float:  # (concurrency_steps_span: the longest of the names' spans)
        return float(names["span_s"].fill_null(0.0).max() if names.height else 0.0)  # type: ignore[arg-type]

    return frame, span


DAY_BUCKET_S = 300  # the per-day series' bucket (queries/concurrency_step_day_series.sql): a day holds whole ones


def _whole_days(t: Any) -> bool:
    return t is None or t.astimezone(UTC).timetz().replace(tzinfo=None) == dtime(0)


@dataclass
class DayFrames:
    """The step lines of some deployments in a window of whole UTC days, as per-day frames of every
    deployment's lines (queries/concurrency_step_days.sql: the time at each value; concurrency_step_day_series.sql:
    five-minute buckets), kept per store commit, `max_gap_s` and narrowed engine views, and merged into the rows
    the window's own lines give. A line's weight reaches to the next line of its engine, the same day's but for
    the day's last line: that one weighs only when the window holds the next day with lines of its engine (the
    window's last line weighs 0). `next_day` is that day for each (deployment, day), over every day."""

    sel: Selection
    values: pl.DataFrame  # concurrency_step_days' rows of the deployments asked, the window's days
    buckets: pl.DataFrame  # concurrency_step_day_series'
    until: date | None

    @classmethod
    def of(cls, sel: Selection, deployments: list[str], max_gap_s: float) -> DayFrames | None:
        """None (computed from the lines) where the window is not whole days, where two deployments' lines share
        a name, or where the frames are not kept and the window is not the whole store (a window of a few days
        computes its own lines for less; the whole store's are asked for anyway, so they are made then)."""
        since, until = sel.window.since, sel.window.until
        if not (_whole_days(since) and _whole_days(until)):
            return None
        parts = (queries.load("int_concurrency_step_lines").sql, queries.load("int_concurrency_step_day_lines").sql,
                 max_gap_s)
        names = ("concurrency_step_days", "concurrency_step_day_series")
        if (since is not None or until is not None) and not all(
                kept.has(sel.con, n, (*parts, queries.load(n).sql), STEP_VIEWS) for n in names):
            return None
        pods = kept.kept(sel.con, "concurrency_step_pods", (queries.load("concurrency_step_pods").sql, None, None),
                         STEP_VIEWS, lambda: queries.run(sel.con, "concurrency_step_pods", since=None, until=None))
        if pods["name"].n_unique() != pods.height:
            return None
        made: list[bool] = []

        def compute(name: str) -> pl.DataFrame:
            if not made:  # every deployment's lines, no window, once for both frames
                queries.materialize(sel.con, "int_concurrency_step_lines", since=None, until=None, max_gap_s=max_gap_s,
                                    deployments=pods["deployment"].unique().sort().to_list())
                queries.materialize(sel.con, "int_concurrency_step_day_lines")
                made.append(True)
            return queries.run(sel.con, name)
        wanted = pods.filter(pl.col("deployment").is_in(deployments))["name"].to_list()
        got = []
        for n in names:
            rows = kept.kept(sel.con, n, (*parts, queries.load(n).sql), STEP_VIEWS, functools.partial(compute, n))
            # the next day with lines of each engine, over every day (a day's last line reaches its first line)
            later = rows.select("deployment", "day").unique().with_columns(
                next_day=pl.col("day").shift(-1).over("deployment", order_by="day"))
            rows = rows.filter(pl.col("deployment").is_in(wanted)).join(later, on=["deployment", "day"], how="left")
            if since is not None:
                rows = rows.filter(pl.col("day") >= since.astimezone(UTC).date())
            if until is not None:
                rows = rows.filter(pl.col("day") < until.astimezone(UTC).date())
            got.append(rows)
        return cls(sel, got[0], got[1], until.astimezone(UTC).date() if until is not None else None)

    def _tail(self) -> pl.Expr:
        """The weight of a day's last line in the window: its own where the window holds the line after it."""
        counts = pl.col("next_day").is_not_null()
        if self.until is not None:
            counts = counts & (pl.col("next_day") < self.until)
        return pl.when(counts).then(pl.col("tail_dur")).otherwise(0.0).fill_null(0.0)

    def sampled(self, quantiles: list[float]) -> pl.DataFrame:
        """concurrency_sampled's rows, over int_concurrency_step_hist made from the days."""
        tail = self._tail()
        hist = self.values.group_by("deployment", "metric", "value").agg(
            (pl.col("dur") + tail).sum().alias("dur"),
            (pl.col("value_dur") + pl.col("value") * tail).sum().alias("value_dur"),
            pl.col("lines").sum(), pl.col("first_ts").min())
        con = self.sel.con
        con.register("concurrency_step_days_hist", hist.to_arrow())
        try:
            con.execute("create or replace temp table int_concurrency_step_hist as select * from "
                        "concurrency_step_days_hist")
        finally:
            con.unregister("concurrency_step_days_hist")
        return self.sel.run("concurrency_sampled", quantiles=quantiles)

    def span(self) -> float:
        """concurrency_steps_span: seconds from the first to the last line of the longest-running deployment."""
        spans = self.buckets.group_by("deployment").agg(
            (pl.col("last_ts").max() - pl.col("first_ts").min()).dt.total_microseconds() / 1e6)
        return float(spans["last_ts"].max() or 0.0) if spans.height else 0.0  # type: ignore[arg-type]

    def series(self, bucket_s: int) -> pl.DataFrame:
        """concurrency_sampled_timeseries' rows at `bucket_s` (a multiple of DAY_BUCKET_S), from the days' buckets."""
        tail = self._tail()
        dur = (pl.col("dur") + tail).sum()
        in_system_dur = (pl.col("in_system_dur") + pl.col("tail_in_system").fill_null(0.0) * tail).sum()
        out = self.buckets.with_columns(bucket=pl.col("bucket") * DAY_BUCKET_S // bucket_s).group_by(
            "deployment", "bucket").agg(
            pl.col("running_max").max(), pl.col("waiting_max").max(), pl.col("in_system_max").max(),
            pl.when(dur != 0).then(in_system_dur / dur).otherwise(
                pl.col("in_system_sum").sum() / pl.col("lines").sum()).alias("in_system_mean"),
            pl.col("kv_tokens_max").max(), (dur / 1e6).alias("covered_s"))
        return out.select(
            "deployment", pl.from_epoch(pl.col("bucket") * bucket_s, time_unit="s").dt.replace_time_zone("UTC").dt.cast_time_unit("us").alias("ts"),
            "running_max", "waiting_max", "in_system_max", "in_system_mean", "kv_tokens_max", "covered_s",
        ).sort("deployment", "ts")


def scrape_notes(sel: Selection, deployments: list[str]) -> list[str]:
    """What the step figures of `deployments` that come from Prometheus scrapes are: samples at the scrape
    interval, not the engine's own step lines (queries/scrape_intervals_by_deployment.sql)."""
    return [n for _, n in scrape_sampling(sel.con, sel.window.since, sel.window.until, deployments)]


def scrape_intervals(con: duckdb.DuckDBPyConnection, since: Any, until: Any) -> pl.DataFrame:
    """queries/scrape_intervals_by_deployment.sql for [since, until), computed once per store commit, window and
    engine_steps view (attribution.kept): a report's concurrency, thresholds and memory split each read it."""
    name = "scrape_intervals_by_deployment"
    return kept.kept(con, name, (queries.load(name).sql, since, until), ("engine_steps",),
                     lambda: queries.run(con, name, since=since, until=until))


def scrape_sampling(con: duckdb.DuckDBPyConnection, since: Any, until: Any, deployments: list[str]
                    ) -> list[tuple[dict[str, Any], str]]:
    """Per deployment of `deployments` whose step rows in [since, until) include Prometheus scrapes: the
    scrape_intervals_by_deployment row and the note saying so (a peak seen at the scrapes is a lower bound)."""
    if not deployments or not scrapes_stored(con):
        return []
    out = []
    for row in scrape_intervals(con, since, until).filter(pl.col("deployment").is_in(deployments)).iter_rows(
            named=True):
        every = f"{row['interval_s']:g} s" if row["interval_s"] is not None else "a single scrape"
        where = " where its logs have no step lines" if row["log_lines"] else ""
        out.append((row, f"{row['deployment']}: running/waiting/KV sampled at the scrape interval ({every}) from "
                         f"{row['scrapes']:,} Prometheus scrape{'s' if row['scrapes'] != 1 else ''}{where}; a peak "
                         "between scrapes is missed: a peak seen at the scrapes is a lower bound of the true peak"))
    return out


def concurrency(sel: Selection, *, per_group: bool = True, estimate: bool = True,
                service_model: str = DEFAULT_SERVICE_MODEL, timeseries: bool = False,
                bucket_s: int | None = None, max_gap_s: float = 60.0,
                percentiles: tuple[float, ...] | list[float] | None = None,
                exact_metrics: tuple[str, ...] | None = None) -> Analysis:
    """Running, waiting, in-system and live KV tokens per deployment (`pods`) and per deployment and group
    (`groups`, when `per_group` and the grouping is not by deployment): peak, time-weighted mean and
    percentiles (`percentiles`, default the setting's, always with p50/p90/p99), and the concurrency each
    arrival saw. `deployments` says where each figure comes from. `exact_metrics`: only these metrics of the
    exact sweep (sweep.stats; default all), for a caller that reads only those."""
    ps = percentile_list(percentiles)
    per_group = per_group and sel.by not in (GroupBy.all, GroupBy.deployment)
    sources = sel.run("concurrency_sources_by_deployment")
    frames: list[pl.DataFrame] = []
    series: list[pl.DataFrame] = []
    notes: list[str] = []
    by_source = {s: sources.filter(pl.col("source") == s) for s in ("exact", "sampled", "estimate")}
    # pods whose requests do not say when they were admitted: the sweep cannot split running from waiting
    unsplit = by_source["exact"].filter(pl.col("split_known") == 0)

    if by_source["exact"].height:
        # one bucket for every pod's series (the first source to need one picks it)
        stats, ts, bucket_s = exact_frames(sel, per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                                           percentiles=ps, metrics=exact_metrics)
        frames.append(stats)
        if ts is not None:
            # there, running and waiting are unknown, not 0
            known = ~pl.col("deployment").is_in(unsplit["deployment"].to_list())
            ts = ts.with_columns(pl.when(known).then(c).alias(c) for c in ("running_max", "waiting_max"))
            series.append(ts.with_columns(source=pl.lit("exact")))
        for row in by_source["exact"].iter_rows(named=True):
            unknown = row["with_interval"] - row["split_known"]
            if unknown == row["with_interval"]:
                if not row["step_lines"]:  # else the engine's lines count running and waiting (below)
                    notes.append(f"{row['deployment']}: queue time unknown for all {unknown:,} requests: the "
                                 "waiting/running split is unknown, only in_system is reported")
            elif unknown:
                notes.append(f"{row['deployment']}: queue time unknown for {unknown:,} of {row['with_interval']:,} "
                             "requests: running/waiting count only the others, in_system counts them all")
            if row["arrival_only"]:
                notes.append(f"{row['deployment']}: {row['arrival_only']:,} requests without an end time are "
                             "left out of the sweep")

    sampled = by_source["sampled"]["deployment"].to_list()
    # Where the requests do not say when they were admitted, the engine's own lines still count the running
    # and waiting requests: add those (sampled) beside the exact in_system.
    split_deps = unsplit.filter(pl.col("step_lines") > 0)["deployment"].to_list()
    for deps, metrics in ((sampled, None), (split_deps, ["running", "waiting", "kv_tokens"])):
        if not deps:
            continue
        stats, ts, bucket_s = step_line_frames(sel, deps, max_gap_s=max_gap_s, timeseries=timeseries,
                                               bucket_s=bucket_s, percentiles=ps)
        frames.append(stats if metrics is None else stats.filter(pl.col("metric").is_in(metrics)))
        if ts is not None:
            series.append(ts.with_columns(source=pl.lit("sampled")))
    if sampled:
        notes.append(f"sampled (engine step lines only, not per-request intervals): {', '.join(map(str, sampled))}")
    notes.extend(scrape_notes(sel, [*sampled, *split_deps]))
    if split_deps:
        notes.append(f"running, waiting and kv_tokens sampled from the engine's step lines (in_system and "
                     f"seen_at_arrival exact): {', '.join(map(str, split_deps))}")

    arrival_only = by_source["estimate"]["deployment"].to_list()
    if arrival_only and estimate:
        est, ts, est_notes = estimate_concurrency(sel, arrival_only, service_model=service_model,
                                                  per_group=per_group, timeseries=timeseries, bucket_s=bucket_s,
                                                  percentiles=ps)
        frames.append(est)
        if ts is not None:
            series.append(ts.with_columns(source=pl.lit("estimate")))
        notes.extend(est_notes)
    elif arrival_only:
        notes.append(f"arrivals only, not estimated (estimate=False): {', '.join(map(str, arrival_only))}")

    cols = schema(ps)
    allrows = pl.concat([pl.DataFrame(schema=cols),
                         *(f.select(pl.col(c).cast(t) for c, t in cols.items()) for f in frames if f.width)])
    allrows = allrows.sort("deployment", pl.col("grp"), pl.col("metric").replace_strict(METRIC_ORDER, default=9),
                           "source", nulls_last=False, maintain_order=True)
    pods = allrows.filter(pl.col("grp").is_null()).drop("grp")
    tables = {"pods": pods}
    titles = {"pods": "concurrency per deployment"}
    if per_group:
        tables["groups"] = name_groups(allrows.filter(pl.col("grp").is_not_null()), sel.by)
        titles["groups"] = f"concurrency per deployment and {sel.by.value}"
    # the observed peak of running (in_system where nothing counts running) stands in where no limit is known
    peak = pods.filter(pl.col("metric").is_in(["running", "in_system"])).sort(
        pl.col("metric") != "running").group_by("deployment", maintain_order=True).agg(
        pl.col("peak").first().alias("observed_peak"))
    tables["deployments"] = limits.with_step_share(limits.with_limits(sources, peak),
                                                   sel.run("running_by_step_lines"))
    titles["deployments"] = "what each deployment's figures come from"
    if series:
        tables["timeseries"] = pl.concat(series, how="vertical_relaxed")
        titles["timeseries"] = "over time (per deployment)"
    return Analysis(
        name="concurrency",
        params={**base_params(sel), "per_group": per_group, "estimate": estimate, "service_model": service_model,
                "max_gap_s": max_gap_s, "bucket_s": bucket_s, "percentiles": ps},
        tables=tables, titles=titles, definitions=DEFINITIONS, notes=notes,
    )
