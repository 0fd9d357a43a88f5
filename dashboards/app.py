"""`attribution dashboard`: the entry script. It sets up the page, draws the sidebar's filters (time range,
deployment, workload, label, engine version; they apply to every page) and runs the page picked in the
navigation. Read-only: it opens the store through attribution.dashboard and never writes to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import _data as data
import streamlit as st

from attribution.dashboard import Filters

st.set_page_config(page_title="attribution", page_icon=":material/query_stats:", layout="wide")

PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),  # served at /
    st.Page("app_pages/lengths.py", title="Workloads and lengths", icon=":material/bar_chart:", url_path="lengths"),
    st.Page("app_pages/concurrency.py", title="Concurrency and live tokens", icon=":material/stacked_line_chart:",
            url_path="concurrency"),
    st.Page("app_pages/arrivals.py", title="Arrivals and burstiness", icon=":material/timeline:",
            url_path="arrivals"),
    st.Page("app_pages/latency.py", title="Latency and goodput", icon=":material/timer:", url_path="latency"),
    st.Page("app_pages/capacity.py", title="Capacity and cost", icon=":material/payments:", url_path="capacity"),
    st.Page("app_pages/thresholds.py", title="Feature thresholds", icon=":material/flag:", url_path="thresholds"),
    st.Page("app_pages/cache.py", title="Prompt cache", icon=":material/cached:", url_path="cache"),
    st.Page("app_pages/memsplit.py", title="Memory split", icon=":material/memory:", url_path="memsplit"),
    st.Page("app_pages/compare.py", title="Compare two cohorts", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("app_pages/changes.py", title="What changed", icon=":material/published_with_changes:",
            url_path="changes"),
    st.Page("app_pages/health.py", title="Ingest health", icon=":material/health_and_safety:", url_path="health"),
]


def _hour(t: datetime, up: bool = False) -> datetime:
    """Naive UTC, on the hour (st.slider takes naive datetimes)."""
    t = t.astimezone(UTC).replace(tzinfo=None)
    floor = t.replace(minute=0, second=0, microsecond=0)
    return floor + timedelta(hours=1) if up and floor < t else floor


def _sidebar() -> Filters:
    ch = data.choices()
    snap, latest = data.snapshot(), data.version(data.store())
    st.sidebar.caption(f"Store: `{data.store()}`" + (f" · commit {snap.version}" if snap else ""))
    if (note := data.engine_note()) is not None:
        st.sidebar.warning(note)
    if snap and latest is not None and latest > snap.version:
        st.sidebar.caption(f"An ingest has added data since (commit {latest}).")
        if st.sidebar.button("Load the newer data", icon=":material/refresh:"):
            data.refresh()
            st.rerun()
    if ch.begins is None or ch.ends is None:
        return Filters()
    since = until = None
    # The range spans every row the pages read (not only the requests): left whole, it is no window at all,
    # and the pages count what it shows.
    lo, hi = _hour(ch.begins), _hour(ch.ends, up=True)
    if hi > lo:
        start, end = st.sidebar.slider("Time range (UTC)", min_value=lo, max_value=hi, value=(lo, hi),
                                       step=timedelta(hours=1), format="ddd D MMM HH:mm", key="time_range")
        since = start.replace(tzinfo=UTC) if start > lo else None
        until = end.replace(tzinfo=UTC) if end < hi else None
    if not ch.requests:  # engine lines or samples alone: only the time range narrows them
        return Filters(since=since, until=until)
    pick = st.sidebar.multiselect
    return Filters(
        since=since,
        until=until,
        deployments=tuple(pick("Deployment", ch.deployments, key="deployments", placeholder="all")),
        workloads=tuple(pick("Workload", ch.workloads, key="workloads", placeholder="all")),
        labels=tuple(pick("Label", ch.labels, key="labels", placeholder="all")),
        versions=tuple(pick("Engine version", ch.versions, key="versions", placeholder="all")),
    )


page = st.navigation(PAGES)
st.session_state["filters"] = _sidebar()
page.run()
