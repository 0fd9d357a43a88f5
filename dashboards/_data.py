"""What every page shares: the store ($ATTRIBUTION_STORE, set by `attribution dashboard --store`), the
sidebar's filters, the library calls of attribution.dashboard behind Streamlit's caches (keyed by the store
commit the session reads, so a page is computed once per commit and filter set), and how a result is shown:
its empty state, tables, notes and definitions. No numbers are computed here."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from attribution import dashboard, dashboard_launch
from attribution.analyses import Analysis
from attribution.analyses.common import Empty
from attribution.columns import is_share
from attribution.config import Settings, load_settings
from attribution.dashboard import Choices, Filters
from attribution.db import as_float
from attribution.errors import AttributionError
from attribution.store import Snapshot, Store, default_store_path

REFRESH_S = 15  # how often a page looks for the commits of a running ingest (offered, not applied)
GROUPS = ["workload", "deployment", "model", "label", "version", "day", "all"]


def store() -> str:
    path = default_store_path()
    return path if isinstance(path, str) else str(path.resolve())  # (a URL as given)


@st.cache_resource(ttl=REFRESH_S, show_spinner=False)
def settings() -> Settings:
    """The settings every page uses (SLO, percentiles, GPU-hour cost, workloads, model, thresholds): the CLI's
    config.load_settings, from $ATTRIBUTION_CONFIG (set by `attribution dashboard --config`), else the
    nearest attribution.toml, else the defaults."""
    return load_settings()


def engine_note() -> str | None:
    """The dashboard runs on DuckDB: under `engine = spark` it says so (attribution.spark.duckdb_only_note)."""
    from attribution.spark import duckdb_only_note

    try:
        return duckdb_only_note(settings(), "the dashboard")
    except AttributionError:  # a bad config: the page shows the error where it asks for the data
        return None


def group_index() -> int:
    """Where the pages' `Group by` box starts: the `by` setting (workload unless the config says otherwise)."""
    try:
        by = settings().by
    except AttributionError:  # a bad config: the page shows the error where it asks for the data
        return 0
    return GROUPS.index(by) if by in GROUPS else 0


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def version(path: str) -> int | None:
    """The store's newest commit (None: no store there)."""
    return dashboard_launch.store_version(path)


def pinned() -> int | None:
    """The commit this session reads. It is pinned at the session's first page so that an ingest landing
    data does not recompute every page under the reader; the sidebar offers the newer data (`refresh`)."""
    latest = version(store())
    if latest is None:
        return None
    commit = st.session_state.setdefault("commit", latest)
    if commit > latest:  # the store was rebuilt from scratch
        commit = st.session_state["commit"] = latest
    return commit


def refresh() -> None:
    st.session_state["commit"] = version(store())


@st.cache_resource(max_entries=16, show_spinner=False)
def _snapshot(path: str, commit: int) -> Snapshot:
    """The store's state when this commit was first read: every page reading the commit sees these files."""
    return Store.open(path).snapshot()


def snapshot() -> Snapshot | None:
    commit = pinned()
    return None if commit is None else _snapshot(store(), commit)


def settings_ok() -> bool:
    try:
        settings()
    except AttributionError:
        return False
    return True


@st.cache_resource(max_entries=2, show_spinner="Opening the store ...", show_time=True)
def _view(path: str, commit: int, flt: Filters, settings_key: str) -> dashboard.View:
    return dashboard.View(path, flt, _snapshot(path, commit), settings())


@st.cache_data(max_entries=4, show_spinner="Reading the filter values ...", show_time=True)
def _choices(path: str, commit: int) -> Choices:
    return _view(path, commit, Filters(), repr(settings())).choices()


def choices() -> Choices:
    commit = pinned()
    return Choices() if commit is None else _choices(store(), commit)


def filters() -> Filters:
    return st.session_state.get("filters", Filters())


@st.cache_data(max_entries=64, show_spinner="Running the analysis ...", show_time=True)  # time shown after 0.5 s
def _run(path: str, commit: int, flt: Filters, page: str, kwargs: tuple[tuple[str, Any], ...],
         settings_key: str) -> Analysis | Empty:
    # settings_key: the settings in force (attribution.toml, $ATTRIBUTION_*), so an edited setting (a GPU-hour
    # cost, an SLO) runs the analysis again instead of showing the cached answer of the old one
    return _view(path, commit, flt, settings_key).answer(page, **dict(kwargs))


def _call(page: str, **kwargs: Any) -> Analysis | Empty:
    path = store()
    commit = pinned()
    if commit is None:
        return Empty(f"No store at {path} yet. Ingest logs into it, e.g. `attribution ingest sample_logs/ "
                     f"--store {path} --year 2026 --tz UTC`, or start the dashboard with `--store DIR`.")
    try:
        now = settings()
    except AttributionError as exc:  # a bad attribution.toml or $ATTRIBUTION_<KEY>: say so on the page
        return Empty(f"settings: {exc}")
    return _run(path, commit, filters(), page, tuple(sorted(kwargs.items())), repr(now))


def overview(**kw: Any) -> Analysis | Empty:
    return _call("overview", **kw)


def lengths(**kw: Any) -> Analysis | Empty:
    return _call("lengths", **kw)


def concurrency(**kw: Any) -> Analysis | Empty:
    return _call("concurrency", **kw)


def arrivals(**kw: Any) -> Analysis | Empty:
    return _call("arrivals", **kw)


def latency(**kw: Any) -> Analysis | Empty:
    return _call("latency", **kw)


def capacity(**kw: Any) -> Analysis | Empty:
    return _call("capacity", **kw)


def thresholds(**kw: Any) -> Analysis | Empty:
    return _call("thresholds", **kw)


def memsplit(**kw: Any) -> Analysis | Empty:
    return _call("memsplit", **kw)


def compare(**kw: Any) -> Analysis | Empty:
    return _call("compare", **kw)


def changes(**kw: Any) -> Analysis | Empty:
    return _call("changes", **kw)


def health(**kw: Any) -> Analysis | Empty:
    return _call("health", **kw)


def cache(**kw: Any) -> Analysis | Empty:
    return _call("cache", **kw)


def empty(res: Analysis | Empty) -> bool:
    """The page's guard: show why there is nothing (and say so to the caller)."""
    if isinstance(res, Empty):
        st.info(res.message, icon=":material/info:")
        return True
    return False


def scope(res: Analysis) -> None:
    """One line under the title: how many requests the page counts, and under which filters."""
    n = res.params.get("requests")
    counted = f"{n:,} requests · " if isinstance(n, int) else ""
    st.caption(f"{counted}{filters().describe()}")


def _columns(df: pl.DataFrame) -> dict[str, Any]:
    """Shares as percentages, counts and large values with thousands separators, small fractions as they
    are (a fixed number of decimals would print 0.0004 requests/s as 0); the data keeps full precision."""
    config: dict[str, Any] = {}
    for c, dtype in df.schema.items():
        if dtype.is_float() and is_share(c):
            config[c] = st.column_config.NumberColumn(format="percent")
        elif dtype.is_integer() or (dtype.is_float() and as_float(df[c].abs().max() or 0) >= 1000):
            config[c] = st.column_config.NumberColumn(format="localized", width=dashboard.localized_width(df[c]))
    return config


def table(res: Analysis, name: str) -> None:
    df = res.tables.get(name)
    if df is None:
        return
    title = res.titles.get(name, name)
    st.subheader(title[:1].upper() + title[1:], divider="gray")
    if df.is_empty():
        st.caption("No rows.")
        return
    df = dashboard.shown(df)
    st.dataframe(df, hide_index=True, column_config=_columns(df), key=f"table-{res.name}-{name}")


def tables(res: Analysis, main: list[str], more: list[str] | None = None) -> None:
    """The analysis' `main` tables, the `more` ones folded away, then its notes and definitions."""
    for name in main:
        table(res, name)
    extra = [n for n in more or [] if n in res.tables]
    if extra:
        with st.expander("More tables: " + ", ".join(res.titles.get(n, n) for n in extra)):
            for name in extra:
                table(res, name)
    notes(res)


def points(res: Analysis, name: str, column: str, *, title: str) -> None:
    """A table of sentences (the summary's findings) as a bulleted list."""
    df = res.tables.get(name)
    if df is None or df.is_empty():
        return
    st.subheader(title, divider="gray")
    st.markdown("\n".join(f"- {text}" for text in df[column].to_list()))


def cohort_options(cohort_by: str) -> tuple[str, ...]:
    """What a cohort can be named by: the store's engine versions or labels (windows are typed)."""
    ch = choices()
    return {"version": ch.versions, "label": ch.labels}.get(cohort_by, ())


def cohort_input(where: Any, title: str, options: tuple[str, ...], *, key: str) -> str | None:
    """A cohort picker: a version or label from `options` (automatic: the store's only two, oldest first), or
    a window SINCE..UNTIL when there are no options. None means automatic."""
    if not options:
        text = where.text_input(f"{title} (SINCE..UNTIL, UTC)", key=f"{key}_window",
                                placeholder="2026-05-04..2026-05-07")
        return text.strip() or None
    pick = where.selectbox(title, ["(automatic)", *options], key=f"{key}_{len(options)}")
    return None if pick == "(automatic)" else pick


def notes(res: Analysis) -> None:
    for note in res.notes:
        st.warning(note, icon=":material/warning:")
    if res.definitions:
        with st.expander("Definitions"):
            for term, text in res.definitions.items():
                st.markdown(f"**{term}**: {text}")


def chart(fig: Any) -> None:
    st.plotly_chart(fig, width="stretch", config={"displaylogo": False})
