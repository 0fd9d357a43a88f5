"""Analyses of a date window read only the window's day partitions (attribution.pruning) and give exactly the
answers of the whole store: a table of (analysis, window) cases over conftest's days store (the `sample`
scenario small over sample_logs' days: every source kind, ten days of engine lines), windows cut at midnight,
inside a day, relative to the newest request and open at one end; a request running for days
before the window; the plan's days and the anchor of relative windows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from conftest import litellm_line
from polars.testing import assert_frame_equal

from attribution import analyses, joincache, pruning
from attribution.analyses.common import resolve_window
from attribution.config import Settings
from attribution.histograms.analysis import shared_increases
from attribution.ingest import ingest
from attribution.memsplit import memsplit
from attribution.report.build import report_days, report_window, window_changes, window_health
from attribution.store import Store
from attribution.thresholds import load_catalogue, thresholds

# Windows by the kind of boundary they cut at (the days store's requests span 2026-05-04 .. 2026-05-13 UTC, the
# vLLM pods' to 05-09; sample_logs' 05-03 .. 05-09).
MIDNIGHT = ("2026-05-06", "2026-05-07")
INSIDE = ("2026-05-05T13:30", "2026-05-07T02:15")
RELATIVE = ("2d", "1d")
SINCE_ONLY = ("2026-05-08T06:00", None)
UNTIL_ONLY = (None, "2026-05-04T18:00")


def _catalogue():
    return load_catalogue([], [])


ANALYSES = {
    "lengths": lambda con, w: analyses.lengths(analyses.select(con, since=w)),
    "latency": lambda con, w: analyses.latency(analyses.select(con, since=w)),
    "concurrency": lambda con, w: analyses.concurrency(analyses.select(con, since=w), timeseries=True),
    "capacity": lambda con, w: analyses.capacity(analyses.select(con, since=w)),
    "thresholds": lambda con, w: thresholds(analyses.select(con, since=w, by="all"), _catalogue()),
    "compare": lambda con, w: __import__("attribution.compare", fromlist=["compare"]).compare(
        analyses.select(con, since=w, by="all"), by="version", resamples=50, seed=1, capacity=False),
    "memsplit": lambda con, w: memsplit(con, since=w.since, until=w.until),
}
# mode `all`: the requests pruned too (a commit whose join is not cached); `auto`: read through the cached join.
# One case per analysis runs always; the other window kinds are `slow` (the same code path, another cut).
CASES = [
    ("lengths", MIDNIGHT, "all"), ("latency", INSIDE, "all"), ("concurrency", MIDNIGHT, "all"),
    ("capacity", RELATIVE, "all"), ("thresholds", MIDNIGHT, "auto"), ("compare", INSIDE, "all"),
    ("memsplit", INSIDE, "all"),
] + [pytest.param(*c, marks=pytest.mark.slow) for c in (
    ("lengths", RELATIVE, "auto"), ("latency", UNTIL_ONLY, "all"), ("concurrency", INSIDE, "auto"),
    ("concurrency", SINCE_ONLY, "all"), ("capacity", INSIDE, "all"), ("thresholds", SINCE_ONLY, "all"),
)]


def _case_id(c) -> str:
    n, w, m = c.values if hasattr(c, "values") else c
    return f"{n}-{'..'.join(map(str, w))}-{m}"


def assert_same(a, b) -> None:
    """Two Analysis results equal: every table (floats to 1e-9: DuckDB sums in parallel), params and notes."""
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        assert_frame_equal(a.tables[name], b.tables[name], check_exact=False, rel_tol=1e-9, abs_tol=1e-12)
    assert json.dumps(a.params, default=str, sort_keys=True) == json.dumps(b.params, default=str, sort_keys=True)
    assert a.notes == b.notes


@pytest.fixture(scope="module")
def whole(days_store):
    store = Store.open(days_store)
    snap = store.snapshot()
    return store, snap, store.connect(snap)


@pytest.mark.parametrize(("name", "window", "mode"), CASES,
                         ids=[_case_id(c) for c in CASES])
def test_pruned_analysis_equals_whole_store(whole, monkeypatch, name, window, mode):
    store, snap, full = whole
    joincache.use(full)  # (the commit's join cached, as after an ingest)
    if mode == "all":
        monkeypatch.setenv("ATTRIBUTION_PRUNE", "all")
    con, w = pruning.connect(store, *window, snapshot=snap)
    sql = con.execute("select sql from duckdb_views() where view_name = 'raw_requests'").fetchone()[0]
    assert (sql.count(".parquet") < len(snap.live("requests"))) == (mode == "all")
    assert w == resolve_window(full, *window)  # the anchor from the newest days is the whole store's
    assert_same(ANALYSES[name](full, w), ANALYSES[name](con, w))


def test_pruned_connection_reads_fewer_files(whole):
    store, snap, _ = whole
    con, w = pruning.connect(store, *MIDNIGHT, snapshot=snap)
    days = pruning.plan(store, snap, w.since, w.until)
    assert days is not None and days["engine_steps"] == ("2026-05-05", "2026-05-07")  # the margin crosses midnight
    assert days["engine_config"] == (None, "2026-05-07")  # a config holds from its start, however old
    live = snap.live("engine_steps")
    kept = [p for p in live if (d := p.split("day=")[1][:10]) and ("2026-05-05" <= d <= "2026-05-07"
                                                                     or d.startswith("__HIVE"))]
    assert len(kept) < len(live)
    sql = con.execute("select sql from duckdb_views() where view_name = 'raw_engine_steps'").fetchone()[0]
    assert sql.count(".parquet") == len(kept)


def test_report_window_and_its_previous_are_kept(whole, monkeypatch):
    store, snap, full = whole
    monkeypatch.setenv("ATTRIBUTION_PRUNE", "all")
    settings = Settings()
    probe = pruning.anchor_connection(store, snap)
    window = report_window(probe, since="2026-05-07", until="2026-05-08")
    assert window == report_window(full, since="2026-05-07", until="2026-05-08")
    con = store.connect(snap, days=report_days(store, snap, window))
    # as in the report (run_analyses): each connection reads a window's Prometheus increases once, not per asker
    with shared_increases():
        assert_same(window_changes(full, window, settings), window_changes(con, window, settings))
        assert_same(window_health(store, full, window, settings), window_health(store, con, window, settings))


def test_open_window_reads_everything(whole):
    store, snap, _ = whole
    assert pruning.plan(store, snap, None, None) is None


def test_a_request_running_for_days_before_the_window_is_read(store_dir, tmp_path, monkeypatch):
    """A request that arrived two days before the window and is still running in it counts for concurrency:
    its partition is found from the Parquet statistics of `finished` (no data read) and read."""
    base = datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp()
    lines = [litellm_line(0, "batch", 0, 5, 3 * 86400, 1000, 50, base=base)]  # runs 3 days
    for day in range(4):  # short requests on each day
        lines += [litellm_line(10 + day * 10 + i, "chat", day * 86400 + i * 60, day * 86400 + i * 60 + 1,
                               day * 86400 + i * 60 + 3, 100 + i, 10, base=base) for i in range(5)]
    log = tmp_path / "litellm.jsonl"
    log.write_text("\n".join(lines) + "\n")
    ingest([str(log)], store_dir)
    monkeypatch.setenv("ATTRIBUTION_PRUNE", "all")  # (also if the ingest cached the commit's join)
    store = Store.open(store_dir)
    snap = store.snapshot()
    since = datetime(2026, 3, 4, 6, tzinfo=UTC)
    days = pruning.plan(store, snap, since, since + timedelta(hours=6))
    assert days is not None
    assert days["requests"][0] <= "2026-02-28"  # the long request's day (03-01), less a margin
    assert days["engine_steps"] == ("2026-03-04", "2026-03-04")  # 06:00..12:00 and its margin
    con, w = pruning.connect(store, since, since + timedelta(hours=6), snapshot=snap)
    got = analyses.concurrency(analyses.select(con, since=w))
    want = analyses.concurrency(analyses.select(store.connect(snap), since=w))
    assert_same(want, got)
    # without the statistics' reach-back the running request would be missed
    short = store.connect(snap, days=(days["engine_steps"][0], None))
    spanning = "select count(*) from int_analysis_requests where t_arrival < epoch_us($s::timestamptz)"
    analyses.select(short, since=w)
    assert short.execute(spanning, {"s": since}).fetchone()[0] == 0
    analyses.select(con, since=w)
    assert con.execute(spanning, {"s": since}).fetchone()[0] == 1


def test_dashboard_date_filter_reads_the_commits_connection_and_answers_as_pruned(days_store):
    """The dashboard's date filter is each analysis' window on the commit's shared connection (dashboard.Commit:
    every partition bound once, no view opened per filter set); its pages equal those of a connection reading
    only the filter's days and the previous window's, the requests whole (as the View opened it before)."""
    from attribution import joincache
    from attribution.config import connect_settings
    from attribution.dashboard import Filters, View
    from attribution.views import JOIN_INPUTS

    flt = Filters(since=datetime(2026, 5, 6, 13, tzinfo=UTC), until=datetime(2026, 5, 7, 9, tzinfo=UTC))
    shared = View(days_store, flt)
    assert shared.commit is View(days_store, Filters()).commit
    assert flt.since is not None and flt.until is not None
    days = pruning.plan(shared.store, shared.snapshot, flt.since - (flt.until - flt.since), flt.until,
                        whole=(*JOIN_INPUTS, *pruning.SCRAPES))
    pruned = View(days_store, flt)
    pruned.con = shared.store.connect(shared.snapshot, days=days)
    connect_settings(pruned.con, pruned.settings)
    joincache.use(pruned.con)
    sql = pruned.con.execute("select sql from duckdb_views() where view_name = 'raw_engine_steps'").fetchone()[0]
    assert "day=2026-05-08" not in sql and "day=2026-05-04" not in sql and "day=2026-05-05" in sql
    for page in ("thresholds", "changes"):  # (the step lines; the previous window)
        assert_same(getattr(shared, page)(), getattr(pruned, page)())
