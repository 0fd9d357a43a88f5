"""Per-day length counts merged into the lengths page (attribution.summaries.days): on a store the merged page
equals the page computed from the window's requests (the same queries over the window's own counts; that
those give DuckDB's avg and quantile_cont over the requests bit for bit, tests/test_lengths.py) as the store
changes (a day added, a day re-touched, a file rotated), recounting only the days whose rows changed; a kill
while counting leaves no half file under a day's name."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta

import pytest
from test_join import _slp, _store, _vllm_line
from test_summary_pages import _equal

from attribution import analyses
from attribution.analyses import Analysis
from attribution.analyses.common import Empty
from attribution.config import load_settings
from attribution.dashboard import Filters, View
from attribution.ingest import ingest
from attribution.summaries import days, first_look, pages

BASE = 1739446413.0  # 2025-02-13 11:33:33 UTC, the day test_join's store holds
def _merged(root, bys: tuple[str, ...]) -> tuple[dict[str, Analysis], days.Counted]:
    """The lengths page grouped by each of `bys`, merged from the day counts of one view (counted once)."""
    st = load_settings()
    view = View(root, Filters(), settings=st)
    counted = days.count_days(view.con, days.days_dir(root, view.con, st))
    got = {}
    for by in bys:
        res = days.lengths(view.con, counted, by=by, percentiles=st.percentiles)
        assert res is not None
        got[by] = res
    return got, counted


def test_the_merged_page_equals_the_computed_one_as_the_store_changes(tmp_path):
    store, _ = _store(tmp_path)
    logs = tmp_path / "logs"
    vllm = logs / "pod-a" / "vllm.log"
    steps = {
        "added": lambda: ((logs / "pod-a" / "vllm-next.log").write_text(_vllm_line("02-14 09:00:00",
                                                                                  "e269fdcb7c6ce894")),
                          (logs / "litellm-next.jsonl").write_text(_slp("e269fdcb7c6ce894", BASE + 77187, "batch",
                                                                        None, 64))),
        "re-touched": lambda: (vllm.open("a").write(_vllm_line("02-13 12:00:00", "f269fdcb7c6ce895")),
                               (logs / "litellm.jsonl").open("a").write(_slp("f269fdcb7c6ce895", BASE + 1587,
                                                                             "search-backend", None, 300))),
        "rotated": lambda: (vllm.rename(vllm.with_name("vllm.log.1")),
                            vllm.write_text(_vllm_line("02-14 10:00:00", "0369fdcb7c6ce896"))),
    }
    recounted = {}
    bys = ("workload", "deployment", "day", "version", "all")
    for step, change in {"first": lambda: None, **steps}.items():
        change()
        if step != "first":
            ingest([str(logs)], store.root, year=2025, tz="UTC")
        # one view merges and one computes every grouping of the commit (a view per page costs more than the page)
        merged, counted = _merged(store.root, bys)
        view = View(store.root, Filters())
        for by in bys:
            got, want = merged[by], view.lengths(by=by)
            assert isinstance(want, Analysis)
            _equal(got, want)
        recounted[step] = counted.recounted
    assert recounted == {"first": ["2025-02-13"], "added": ["2025-02-14"], "re-touched": ["2025-02-13"],
                         "rotated": ["2025-02-14"]}
    assert got.params["requests"] == 7


def test_a_kill_while_counting_leaves_no_half_day_and_stale_counts_go(tmp_path, monkeypatch):
    store, _ = _store(tmp_path)
    st = load_settings()
    view = View(store.root, Filters(), settings=st)
    where = days.days_dir(store.root, view.con, st)
    first = days.count_days(view.con, where)
    (name,) = os.listdir(where)
    # a count killed before its rename leaves only a temporary file; a day's file with an old digest remains
    (where / ".0123.tmp").write_bytes(b"PAR1 half")
    os.utime(where / ".0123.tmp", (1, 1))  # old: a count running now would have written it seconds ago
    (where / "2025-02-13-0000000000000000.parquet").write_bytes(b"old")
    again = days.count_days(view.con, where)
    assert again.recounted == [] and again.reused == first.recounted
    assert os.listdir(where) == [name]
    # the first look's lengths page, prepared from the counts, reads back as the page computed whole
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "lengths")
    commit = store.snapshot().version
    assert first_look.prepare(store.root, commit, st) == ["lengths"]
    looks = pages.first_look(st)
    _equal(pages.load(store.root, commit, st, "lengths", looks["lengths"]),
           View(store.root, Filters()).lengths(**looks["lengths"]))



def _filtered_pair(root, flt: Filters, by: str, monkeypatch) -> tuple[Analysis | Empty, Analysis | Empty]:
    """The lengths page under `flt` merged from the day counts (computing from the rows would fail), and
    computed from the rows, in fresh views."""
    with monkeypatch.context() as m:
        m.setenv("ATTRIBUTION_PREPARE_DAYS", "0")
        want = View(root, flt).lengths(by=by)
    with monkeypatch.context() as m:
        if days.answerable(flt.since, flt.until):
            m.setattr(analyses, "lengths", lambda *a, **k: pytest.fail("computed from the rows"))
        got = View(root, flt).lengths(by=by)
    return got, want


def _same_answer(got: Analysis | Empty, want: Analysis | Empty) -> None:
    if isinstance(want, Empty):
        assert got == want
    else:
        assert isinstance(got, Analysis)
        _equal(got, want)


def test_filtered_lengths_from_the_day_counts_equal_the_rows_as_the_store_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    store, _ = _store(tmp_path)
    logs = tmp_path / "logs"
    day2 = datetime(2025, 2, 14, tzinfo=UTC)
    # (unfiltered too: a first look the ingest did not prepare counts the days then, for the filters after it)
    filters = [Filters(), Filters(workloads=("batch",)), Filters(deployments=("pod-a",), workloads=("search-backend",)),
               Filters(since=day2), Filters(until=day2, deployments=("pod-a",)), Filters(workloads=("nobody",))]
    changes = {"first": lambda: None,
               "added": lambda: ((logs / "pod-a" / "vllm-next.log").write_text(
                   _vllm_line("02-14 09:00:00", "e269fdcb7c6ce894")), (logs / "litellm-next.jsonl").write_text(
                   _slp("e269fdcb7c6ce894", BASE + 77187, "batch", None, 64)))}
    for step, change in changes.items():
        change()
        if step != "first":
            ingest([str(logs)], store.root, year=2025, tz="UTC")
        for flt in filters:
            got, want = _filtered_pair(store.root, flt, "workload", monkeypatch)
            _same_answer(got, want)
    assert isinstance(got, Empty) and "No requests match" in got.message
    # another process (the cache emptied) merges the files the commit's listing names, without a recount
    days._COUNTED.clear()
    monkeypatch.setattr(days, "count_days", lambda *a, **k: pytest.fail("counted again"))
    got, _ = _filtered_pair(store.root, Filters(since=day2), "day", monkeypatch)
    assert isinstance(got, Analysis) and got.params["requests"] == 1
    view = View(store.root, Filters())  # (held: a view's connection closes with it)
    where = days.days_dir(store.root, view.con, load_settings())
    assert sorted(p.name for p in where.glob("commit-*.json")) == [f"commit-{store.snapshot().version:020d}.json"]


def test_filtered_lengths_on_the_sample_week(tmp_path, sample_store, monkeypatch):
    """Whole days, one-sided windows, workloads, deployments, versions and their mixes on six days of sample_logs
    (three deployments, four workloads, two vLLM versions) answer from the counts exactly; an hour's window,
    which the counts cannot answer, is computed from the rows."""
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    root = tmp_path / "store"
    shutil.copytree(sample_store, root)
    ch = View(root, Filters()).choices()
    d0 = datetime(2026, 5, 5, tzinfo=UTC)
    one = timedelta(days=1)
    version = next(v for v in ch.versions if "0.20" in v)
    cases = [(Filters(since=d0, until=d0 + one), "workload"),
             (Filters(since=d0 + one, until=d0 + 4 * one, workloads=(ch.workloads[1],)), "deployment"),
             (Filters(until=d0 + 2 * one, deployments=(ch.deployments[-1],)), "day"),
             (Filters(deployments=(ch.deployments[0], ch.deployments[1]), versions=(version,)), "version"),
             (Filters(versions=(version,), labels=("(none)",)), "all"),
             (Filters(since=d0 + 3 * one), "model"),
             (Filters(since=d0 + timedelta(hours=15), until=d0 + timedelta(hours=16)), "workload")]
    for flt, by in cases:
        got, want = _filtered_pair(root, flt, by, monkeypatch)
        assert isinstance(want, Analysis) and want.params["requests"] > 0, flt
        _same_answer(got, want)
    assert days.answerable(d0, None) and not days.answerable(d0 + timedelta(hours=15), None)
