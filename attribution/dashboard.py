"""The dashboard's library side (attribution.dashboard_launch starts the Streamlit app in dashboards/): the
sidebar's filters (time range, deployment, workload, label, engine version) applied to a store connection,
and one method per page that runs the same library analysis as the CLI on it. Nothing here imports
streamlit: the app (dashboards/) wraps these calls in its caches and draws what they return.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from attribution import analyses, joincache, kept, queries, thresholds
from attribution.analyses import Analysis, GroupBy, Selection, Window
from attribution.analyses.common import REQUEST_LINES, Empty, post_calls
from attribution.analyses.concurrency import scrape_intervals
from attribution.columns import is_p_value, p_value_text
from attribution.compare import CohortBy, compare
from attribution.config import Settings, connect_settings, load_settings, workload_map
from attribution.db import as_float, as_time, bound_memory
from attribution.errors import AttributionError, InputError
from attribution.histograms.analysis import histograms_stored, share_samples
from attribution.memsplit import memsplit
from attribution.status import store_counts
from attribution.store import Snapshot, Store
from attribution.summaries import days, pages
from attribution.thresholds.steps import SharedStepRows, share_step_rows
from attribution.views import workloads_file

NONE = "(none)"  # what the analyses call a missing group value; the filters use the same word
MEMORY_SHARE = 0.25  # of the machine's memory, for DuckDB's working memory per view (it spills beyond)

# A request's value of each filter dimension, as `select(by=...)` groups it (queries/int_analysis_requests.sql);
# queries/dashboard_filter_choices.sql offers the values of the same expressions.
_REQUEST_VALUE = {
    "deployment": "coalesce(deployment, '(none)')",
    "workload": "coalesce(workload, '(none)')",
    "label": "coalesce(label, '(none)')",
    "version": "coalesce(version_label(engine, engine_version), '(none)')",
}


@dataclass(frozen=True)
class Filters:
    """What the sidebar narrows every page to. Empty tuples and None mean no restriction; values are those of
    `Choices` (`(none)` for requests whose source does not say)."""

    since: datetime | None = None
    until: datetime | None = None
    deployments: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()

    def values(self) -> dict[str, tuple[str, ...]]:
        """Dimension -> allowed values, for the dimensions that are restricted."""
        dims = {"deployment": self.deployments, "workload": self.workloads, "label": self.labels,
                "version": self.versions}
        return {k: v for k, v in dims.items() if v}

    def describe(self) -> str:
        names = {"version": "engine version"}
        parts = [f"{names.get(dim, dim)} = {', '.join(v)}" for dim, v in self.values().items()]
        if self.since or self.until:
            ends = [f"{t:%Y-%m-%d %H:%M}" if t else "…" for t in (self.since, self.until)]
            parts.insert(0, f"{ends[0]} to {ends[1]} UTC")
        return "; ".join(parts) or "everything in the store"


@dataclass(frozen=True)
class Choices:
    """The values each filter offers, the span of the requests (`first`, `last`) and that of every row the
    pages read (`begins`, `ends`: the requests, engine step lines and starts, access lines, Prometheus samples;
    the time range's ends), unfiltered."""

    requests: int = 0
    first: datetime | None = None
    last: datetime | None = None
    deployments: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    begins: datetime | None = None
    ends: datetime | None = None


# What the pages read beside the requests (queries/dashboard_lines_span.sql: a store connection has them all).
_LINE_TABLES = ("engine_steps", "engine_config", "access_log", "metric_histograms", "metric_counters")


def choices(con: duckdb.DuckDBPyConnection) -> Choices:
    """What the filters offer: every value of each dimension among `con`'s requests and their span (kept
    with the commit's cached join, attribution.joincache, where `con` reads it unnarrowed), and the span of
    every row the pages read (on a connection over frames without the line tables: the requests')."""
    df = joincache.choices(con)
    if df is None:
        df = queries.run(con, "dashboard_filter_choices")
    first, last = (as_time(df["first"].min()), as_time(df["last"].max())) if df.height else (None, None)
    begins, ends = first, last
    if all(queries.has_relation(con, t) for t in _LINE_TABLES):
        lines = queries.run(con, "dashboard_lines_span").row(0)
        begins, ends = (min((t for t in (begins, as_time(lines[0])) if t is not None), default=None),
                        max((t for t in (ends, as_time(lines[1])) if t is not None), default=None))
    if df.is_empty():
        return Choices(begins=begins, ends=ends)

    def values(dim: str) -> tuple[str, ...]:
        return tuple(sorted(df[dim].unique().to_list(), key=lambda v: (v == NONE, v)))

    return Choices(int(df["requests"].sum()), first, last, values("deployment"), values("workload"), values("label"),
                   values("version"), begins, ends)


def filter_schema(flt: Filters) -> str:
    """The schema holding the views narrowed to `flt`'s values (a digest of them: one per filter set)."""
    text = repr(sorted(flt.values().items()))
    return "dashboard_filter_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def narrow(con: duckdb.DuckDBPyConnection, flt: Filters) -> duckdb.DuckDBPyConnection:
    """Restrict the store views every analysis reads (`joined_requests`, `engine_steps`, `engine_config`) to
    the filters' deployments, workloads, labels and engine versions: filtered views of main's, under the
    filter set's own schema (`create_narrowed`), put first on `con`'s search path. Nothing is copied: on a store
    connection joined_requests reads the commit's cached join (attribution.joincache), and each analysis reads
    it through the filter. The time range is not applied here: it is each analysis' window."""
    if not flt.values():
        return con
    con.execute(f"set search_path = '{create_narrowed(con, flt)},main'")
    return con


def create_narrowed(con: duckdb.DuckDBPyConnection, flt: Filters) -> str:
    """The schema of `flt`'s narrowed views on `con`'s database, made (in one transaction) unless it is there:
    every cursor of the database (each dashboard View of a commit) finds it. Engine lines have no workload: a
    workload filter leaves them whole; an engine version filter keeps the lines logged after a start of that
    version (until the pod's next start)."""
    vals, schema = flt.values(), filter_schema(flt)
    if con.execute("select count(*) from duckdb_schemas() where schema_name = $s and database_name = "
                   "current_database()", {"s": schema}).fetchall()[0][0]:
        return schema

    def where(exprs: dict[str, str]) -> str:
        terms = [f"{expr} in (select value from {schema}.filter_values where dim = '{dim}')"
                 for dim, expr in exprs.items() if dim in vals]
        return " and ".join(terms) or "true"

    con.execute("begin transaction")
    try:
        con.execute(f"create schema {schema}")
        con.execute(f"create table {schema}.filter_values (dim varchar, value varchar)")
        con.executemany(f"insert into {schema}.filter_values values (?, ?)",
                        [[dim, v] for dim, vs in vals.items() for v in vs])
        con.execute(f"create view {schema}.joined_requests as select * from main.joined_requests where "
                    + where(_REQUEST_VALUE))
        engine = {d: _REQUEST_VALUE[d] for d in ("deployment", "label")}
        if {"deployment", "label", "version"} & vals.keys():
            con.execute(f"create view {schema}.engine_config as select * from main.engine_config where " + where(
                {**engine, "version": "coalesce(version_label(engine, version), '(none)')"}))
            steps_where = where(engine)
            if "version" in vals:
                # each start of a kept version until the pod's next start, once per filter set (a few rows):
                # a line is kept when it falls in one (the start a line's ASOF join would find); a semi join
                # reads only the columns a query asks for, where the ASOF join read every line whole
                con.execute(
                    f"create table {schema}.version_periods as select deployment, started, ended from (select "
                    "deployment, ts as started, coalesce(lead(ts) over (partition by deployment order by ts), "
                    "'infinity'::timestamptz) as ended, coalesce(version_label(engine, version), '(none)') as "
                    "version from main.engine_config where deployment is not null and ts is not null) where "
                    f"version in (select value from {schema}.filter_values where dim = 'version')")
                con.execute(
                    f"create view {schema}.engine_steps as select * from (select s.* from main.engine_steps s "
                    f"semi join {schema}.version_periods p on s.deployment = p.deployment and s.ts >= p.started "
                    "and s.ts < p.ended) where " + steps_where)
            else:
                con.execute(f"create view {schema}.engine_steps as select * from main.engine_steps where "
                            + steps_where)
        con.execute("commit")
    except duckdb.CatalogException:  # another cursor made it meanwhile (the same views)
        con.execute("rollback")
    except BaseException:
        con.execute("rollback")
        raise
    return schema


def shown(df: pl.DataFrame) -> pl.DataFrame:
    """A result table as the dashboard lists it: p-values as the report writes them (`9.06e-20`, where the
    grid would print a long decimal). A loop over a displayed table's rows, a handful."""
    cols = [c for c, dtype in df.schema.items() if is_p_value(c) and dtype.is_float()]
    return df.with_columns(pl.Series(c, [p_value_text(v) for v in df[c]], dtype=pl.Utf8) for c in cols)


@functools.lru_cache(maxsize=4)
def store_table(root: str, commit: int) -> pl.DataFrame:
    """`attribution status` in two columns: rows per table, files by status, ingest errors, commit. The same
    for every filter set, so computed once per commit (it reads the whole store)."""
    status = store_counts(Store.open(root))
    errors = status["errors"]
    rows = [{"what": f"{t} rows", "value": n} for t, n in status["rows"].items()]
    rows += [{"what": f"files {f['status']}", "value": f["files"]} for f in status["files"].iter_rows(named=True)]
    rows += [{"what": "ingest errors", "value": int(errors["count"].sum()) if errors.height else 0},
             {"what": "store commit", "value": commit}]
    return pl.DataFrame(rows, schema={"what": pl.Utf8, "value": pl.Int64})


def memory_limit_mb(share: float = MEMORY_SHARE) -> int:
    """`share` of the machine's memory, at least 1 GB."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1024, int(total * share / 2**20))


def _discard(con: duckdb.DuckDBPyConnection, scratch: Path) -> None:
    con.close()
    shutil.rmtree(scratch, ignore_errors=True)


class Commit:
    """One connection to a store commit, shared by every View of it: the store's views bound once (every
    partition's files), its cached join attached, the settings' workload names, DuckDB's memory bounded. A
    View is a cursor on it (the same database: its own temporary tables, session settings and search path)
    whose filter set's narrowed views live under their own schema (`create_narrowed`), so a filter change
    costs the page's query, not opening the store again. A date filter reads every partition (each analysis
    bounds its window; attribution.pruning's answers are the same)."""

    def __init__(self, store: Store, snapshot: Snapshot, settings: Settings):
        self.store, self.snapshot = store, snapshot
        con = store.connect(snapshot)
        connect_settings(con, settings)
        # Frames registered on a connection are its own: made tables, every cursor reads them
        for (name,) in con.execute("select view_name from duckdb_views() where temporary and not internal").fetchall():
            con.execute(f'create table main."{name}" as select * from temp."{name}"')
        # Scratch space outside the store (DuckDB's spill files), removed with the connection.
        scratch = Path(tempfile.mkdtemp(prefix="attribution-dashboard-"))
        weakref.finalize(self, _discard, con, scratch)
        # DuckDB would take 80% of the machine (15 GB for the thresholds of 2M requests on a 23 GB box); a
        # dashboard left running shares the machine, so it spills to disk beyond a quarter of it.
        bound_memory(con, memory_limit_mb(), scratch)
        # The engine x gateway join, once per store commit (shared with every view, session and CLI run on it).
        joincache.use(con, fallback_dir=scratch)
        self.con = con
        self.lock = threading.Lock()
        # (a weak reference: the commit's connection closes when the last View of it goes, not at a GC cycle)
        self.step_rows = SharedStepRows(scrapes=functools.partial(_scrapes, weakref.ref(self)))

    def cursor(self, flt: Filters = Filters()) -> duckdb.DuckDBPyConnection:
        """A connection of its own to the commit's database, narrowed to `flt`."""
        cur = self.con.cursor()
        cur.execute("set TimeZone = 'UTC'")  # (session settings: as attribution.views.connect sets them)
        cur.execute("set enable_progress_bar = false")
        joincache.share(self.con, cur)
        kept.share(self.con, cur)
        # every view of the commit reads its Prometheus samples whole: their increases over a window are shared
        share_samples(cur, (str(self.store.root), self.snapshot.version))
        # and its step lines: a window's step rows are cut from every line's, read once per narrowing (a
        # narrowing to deployments alone cut from the commit's every line where those were read)
        engine = {"deployment", "label", "version"} & flt.values().keys()
        if flt.values():
            with self.lock:
                narrow(cur, flt)
        periods = None
        if engine == {"version"}:  # (the kept versions' periods, create_narrowed's: in microseconds)
            periods = [(d, int(a), None if b is None else int(b))
                       for d, a, b in queries.run(cur, "dashboard_version_periods").iter_rows()]
        share_step_rows(cur, self.step_rows, every_line=not engine, deployments=tuple(
            None if d == NONE else d for d in flt.deployments) if engine == {"deployment"} else None,
            periods=periods)
        return cur


def _scrapes(ref: weakref.ref[Commit]) -> bool:
    """Whether the commit's engine_steps hold a Prometheus scrape row (any: the open window's scrape intervals,
    which the first look's thresholds keep for the commit, have a row for each deployment with one, even without
    a time); True (ask each window) once the commit is gone."""
    commit = ref()
    if commit is None:
        return True
    cur = commit.cursor()
    try:
        return scrape_intervals(cur, None, None).height > 0
    finally:
        cur.close()


_COMMITS: OrderedDict[tuple[Any, ...], Commit] = OrderedDict()
COMMITS_KEEP = 2  # the commits whose connection is kept for the next View (a View keeps its own alive)
_COMMITS_LOCK = threading.Lock()


def _workloads_key(store: Store, settings: Settings) -> Any:
    """What a commit's connection depends on besides the commit: the workload names it maps (the settings',
    else the store's or $ATTRIBUTION_WORKLOADS's file, as it stands)."""
    names = workload_map(settings)
    if names is not None:
        return tuple(names.rows())
    path = workloads_file(store)
    if path is None:
        return None
    st = path.stat()
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def commit(store: Store, snapshot: Snapshot, settings: Settings) -> Commit:
    """The shared connection of `snapshot` (with `settings`' workload names), opened on first use."""
    key = (str(store.root), snapshot.version, _workloads_key(store, settings))
    with _COMMITS_LOCK:
        got = _COMMITS.get(key)
        if got is None or not joincache.attached(got.con):  # (one that could not attach the join tries again)
            got = _COMMITS[key] = Commit(store, snapshot, settings)
            while len(_COMMITS) > COMMITS_KEEP:
                _COMMITS.popitem(last=False)
        _COMMITS.move_to_end(key)
        return got


class View:
    """A connection to one snapshot of the store (default: the newest), narrowed to one set of filters, for
    the pages' analyses in turn: a cursor on the commit's shared connection (`Commit`). Each analysis prepares
    temporary tables on the connection, so calls are serialised by a lock (one dashboard session digging at a
    time; a second one waits)."""

    def __init__(self, path: str | os.PathLike[str], flt: Filters, snapshot: Snapshot | None = None,
                 settings: Settings | None = None):
        # SLO, percentiles, GPU-hour cost, workloads, model and thresholds: the same settings as the CLI's
        self.settings = settings if settings is not None else load_settings()
        self.store = Store.open(path)
        self.snapshot = snapshot or self.store.snapshot()
        self.filters = flt
        self.commit = commit(self.store, self.snapshot, self.settings)
        self.con = self.commit.cursor(flt)
        weakref.finalize(self, self.con.close)
        self.lock = threading.Lock()

    def choices(self) -> Choices:
        with self.lock:
            return choices(self.con)

    def answer(self, page: str, **kwargs: Any) -> Analysis | Empty:
        """`page(**kwargs)`, read from the first look an ingest prepared for this commit (unfiltered views,
        the options a page opens with: attribution.summaries.pages) where there is one, else computed."""
        if self.filters == Filters():
            got = pages.load(self.store.root, self.snapshot.version, self.settings, page, kwargs)
            if got is not None:
                return got
        res: Analysis | Empty = getattr(self, page)(**kwargs)
        return res

    def _select(self, by: GroupBy | str, from_histograms: bool = False) -> Selection | Empty:
        """The filtered selection, or why the page is empty; `from_histograms`: the analysis answers from the
        engines' Prometheus histograms too (lengths, thresholds), so a store of those alone is not empty."""
        sel = analyses.select(self.con, since=self.filters.since, until=self.filters.until, by=by)
        return sel if sel.requests or (from_histograms and histograms_stored(self.con)) else Empty(self._nothing())

    def _nothing(self) -> str:
        """Why a page has no requests to show: an empty store, or filters that leave none."""
        if self.filters == Filters():
            return self._no_request_rows()
        return f"No requests match the filters ({self.filters.describe()}): widen them in the sidebar."

    def _no_request_rows(self) -> str:
        """Why a store has no requests: nothing ingested, or engines whose request lines were not logged (their
        step and access lines are stored: a vLLM pod run with its defaults since 0.10)."""
        steps = queries.inline(self.con, "select count(*) as n from engine_steps").item()
        posts = post_calls(queries.run(self.con, "engine_responses", since=None, until=None))
        if not steps and not posts:
            return "The store holds no requests yet: ingest logs with `attribution ingest PATH`."
        return (f"The store holds no request rows: its engines logged {steps:,} step line{'s' * (steps != 1)} and "
                f"their API servers {posts:,} POST response{'s' * (posts != 1)} (access lines), but no request "
                f"lines. {REQUEST_LINES}. The Ingest health page lists the responses per deployment; the pages of "
                "lengths, latency and concurrency need request lines or gateway logs.")

    def _run(self, by: GroupBy | str, fn: Callable[..., Analysis], /, from_histograms: bool = False,
             **kw: Any) -> Analysis | Empty:
        with self.lock:
            try:
                sel = self._select(by, from_histograms)
                if isinstance(sel, Empty):
                    return sel
                return fn(sel, **kw)
            except AttributionError as exc:
                return Empty(str(exc))
            finally:
                analyses.release(self.con)

    def overview(self, *, by: str | None = None) -> Analysis | Empty:
        """The `analyze` summary (findings, lengths, concurrency, latency, goodput, capacity) of the filtered
        requests, and a `store` table of what the store holds (all of it, unfiltered). `by` here and below:
        default the `by` setting."""
        by = by or self.settings.by

        def run(sel: Selection) -> Analysis:
            st = self.settings
            res = analyses.analyze(self.con, since=sel.window, by=by, slo=analyses.parse_slo(list(st.slo) or None,
                                                                                             st.slo_preset),
                                   gpu_hour_cost=st.gpu_hour_cost, gpus_per_pod=st.gpus_per_pod,
                                   ceiling_share=st.ceiling_share, percentiles=st.percentiles)
            res.tables["store"] = store_table(str(self.store.root), self.snapshot.version)
            res.titles["store"] = f"what the store holds ({self.store.root}, unfiltered)"
            return res
        return self._run(by, run)

    def lengths(self, *, by: str | None = None, bins_per_decade: int = 10) -> Analysis | Empty:
        """The per-day length counts answer (attribution.summaries.days: whole UTC days, any deployments,
        workloads, labels, versions), merged from the counts an ingest kept instead of read from every request;
        else, and on a store too small to have them, computed from the rows. Unfiltered (a first look the
        ingest did not prepare) the counts are made then, where every request is read anyway, for the
        filters after it."""
        by = by or self.settings.by
        if days.enabled() and days.answerable(self.filters.since, self.filters.until):
            with self.lock:
                try:
                    got = self._lengths_from_days(by, bins_per_decade)
                except (duckdb.Error, OSError):  # a day file pruned by a newer commit's count: from the rows
                    got = None
                finally:
                    analyses.release(self.con)
            if got is not None:
                return got
        return self._run(by, analyses.lengths, from_histograms=True, bins_per_decade=bins_per_decade,
                         percentiles=self.settings.percentiles)

    def _lengths_from_days(self, by: str, bins_per_decade: int) -> Analysis | Empty | None:
        # (counted where the ingest's preparation kept no listing: on the commit's unnarrowed views)
        whole = self.commit.cursor() if self.filters.values() else self.con
        try:
            counted = days.for_commit(self.store, self.snapshot, self.settings, whole, True)
        finally:
            if whole is not self.con:
                whole.close()
        if not counted.files:
            return None
        window = analyses.resolve_window(self.con, self.filters.since, self.filters.until)
        res = days.lengths(self.con, counted, by=by, bins_per_decade=bins_per_decade, window=window,
                           values=self.filters.values(), percentiles=self.settings.percentiles)
        if res is None and not histograms_stored(self.con):
            return Empty(self._nothing())
        return res  # (None with engine histograms stored: the rows' computation answers from those)

    def concurrency(self, *, by: str | None = None, per_group: bool = True, bucket_s: int | None = None
                    ) -> Analysis | Empty:
        return self._run(by or self.settings.by, analyses.concurrency, per_group=per_group, timeseries=True,
                         bucket_s=bucket_s, percentiles=self.settings.percentiles)

    def arrivals(self, *, by: str | None = None, tz: str | None = None) -> Analysis | Empty:
        return self._run(by or self.settings.by, analyses.arrivals, tz=tz or self.settings.tz, timeseries=True)

    def latency(self, *, by: str | None = None, slo: tuple[str, ...] = (), preset: str | None = None
                ) -> Analysis | Empty:
        """`slo`/`preset` as typed on the page, else the settings' SLO."""
        try:
            if not slo and preset is None:
                slo, preset = self.settings.slo, self.settings.slo_preset
            parsed = analyses.parse_slo(list(slo) or None, preset)
        except AttributionError as exc:
            return Empty(str(exc))
        return self._run(by or self.settings.by, analyses.latency, slo=parsed, scores=analyses.score_presets(),
                         percentiles=self.settings.percentiles)

    def capacity(self, *, by: str | None = None) -> Analysis | Empty:
        """`attribution capacity` of the filtered requests: per pod (`by` all, capacity's default) or per pod and
        group, with the GPU cost per million tokens and the gateway's spend next to it."""
        st = self.settings
        return self._run(by or GroupBy.all.value, analyses.capacity, gpu_hour_cost=st.gpu_hour_cost,
                         gpus_per_pod=st.gpus_per_pod)

    def thresholds(self, *, specs: tuple[str, ...] = ()) -> Analysis | Empty:
        try:
            cat = thresholds.load_catalogue(list(self.settings.catalogue), [*self.settings.thresholds, *specs])
        except AttributionError as exc:
            return Empty(str(exc))
        return self._run("all", thresholds.thresholds, from_histograms=True, catalogue=cat)

    def compare(self, *, cohort_by: str = "version", before: str | None = None, after: str | None = None,
                resamples: int = 1000) -> Analysis | Empty:
        return self._run("all", compare, by=CohortBy(cohort_by), before=before, after=after, resamples=resamples,
                         tolerance=self.settings.tolerance)

    def _locked(self, fn: Callable[[], Analysis], /) -> Analysis | Empty:
        """`fn()` on the view's connection: an analysis of the filters' window that makes its own selections."""
        with self.lock:
            try:
                return fn()
            except AttributionError as exc:
                return Empty(str(exc))
            finally:
                analyses.release(self.con)

    def memsplit(self, *, model: str | None = None, whatif: bool = False) -> Analysis | Empty:
        return self._locked(lambda: memsplit(self.con, model or self.settings.model, since=self.filters.since,
                                             until=self.filters.until, run_whatif=whatif))

    def _window(self) -> Window:
        """The filters' time range, else the report's default window (the `window` setting back from the newest
        request), as `attribution changes` and `attribution health` take it."""
        from attribution.report.build import report_window

        try:
            return report_window(self.con, since=self.filters.since, until=self.filters.until,
                                 default=self.settings.window)
        except InputError:  # no requests at all (under the filters)
            raise InputError(self._nothing()) from None

    def changes(self) -> Analysis | Empty:
        """`attribution changes` on the filtered requests: this window against the one before it, and inside it."""
        from attribution.report.build import window_changes

        return self._locked(lambda: window_changes(self.con, self._window(), self.settings))

    def cache(self, *, capacity_blocks: int | None = None) -> Analysis | Empty:
        """`attribution cache` on the filtered rows of the filters' window, with the settings' economics."""
        from attribution.cache.analysis import Economics, cache

        econ = Economics.from_settings(self.settings)
        return self._locked(lambda: cache(self.con, self._window(), capacity_blocks=capacity_blocks, econ=econ))

    def health(self) -> Analysis | Empty:
        """`attribution health`: files, ingest problems and join coverage (whole store), log gaps in the window."""
        from attribution.report.build import window_health

        return self._locked(lambda: window_health(self.store, self.con, self._window(), self.settings))


def localized_width(col: pl.Series) -> int:
    """Pixels for a number column shown localized in a dashboard table: Streamlit sizes a column by its raw
    values, and the thousands separators (and up to three decimals of a float) then overflow it, cutting the
    number's first digits (a kv_tokens peak of 31,772.767 read `1,772.767`)."""
    finite = col.filter(col.is_finite()) if col.dtype.is_float() else col  # inf and NaN print short
    top = int(as_float(finite.abs().max() or 0))
    chars = len(f"{top:,}") + (4 if col.dtype.is_float() else 0) + int(as_float(finite.min() or 0) < 0)
    return 8 * max(chars, len(col.name)) + 28
