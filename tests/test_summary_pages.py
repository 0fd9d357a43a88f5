"""The dashboard's first look prepared per commit (attribution.summaries.pages): a prepared page reads back equal
to the page computed, only an unfiltered view with a page's opening options reads it, other settings or another
commit miss, a damaged file is a miss, an ingest prepares its commit (above the size threshold) and removes
the older commits' pages, and the options kept are those the page scripts pass."""

from __future__ import annotations

import os
import shutil
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_dashboard import page
from test_join import _slp, _store, _vllm_line

from attribution.analyses import Analysis
from attribution.analyses.common import Empty
from attribution.config import load_settings
from attribution.dashboard import Filters, View
from attribution.ingest import ingest
from attribution.store import Store
from attribution.summaries import after_commit, background, first_look, pages

CHEAP = ("overview", "lengths")  # the overview runs lengths, concurrency, latency and capacity

# these tests are about what an ingest prepares after its commit (off by default in tests: conftest)
pytestmark = pytest.mark.summaries


def _computed(root: Path, name: str, kwargs: dict) -> Analysis:
    res = getattr(View(root, Filters()), name)(**kwargs)
    assert isinstance(res, Analysis)
    return res


def _equal(a: Analysis, b: Analysis) -> None:
    assert (a.name, a.params, a.titles, a.definitions, a.notes) == (b.name, b.params, b.titles, b.definitions,
                                                                    b.notes)
    assert list(a.tables) == list(b.tables)
    for k, df in a.tables.items():
        assert df.schema == b.tables[k].schema and df.equals(b.tables[k], null_equal=True), k


def test_a_prepared_page_reads_back_as_computed_and_only_unfiltered(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", ",".join(CHEAP))
    store, _ = _store(tmp_path)
    root, st = store.root, load_settings()
    commit = store.snapshot().version
    assert not pages.commit_dir(root, commit, st).exists()  # 4 requests: below the size worth preparing
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    assert sorted(first_look.prepare(root, commit, st)) == sorted(CHEAP)
    looks = pages.first_look(st)
    view = View(root, Filters())
    for name in CHEAP:
        computed = _computed(root, name, looks[name])
        with monkeypatch.context() as m:  # the view reads the files: computing is not an option
            m.setattr(View, name, lambda self, **kw: pytest.fail("computed"))
            _equal(view.answer(name, **looks[name]), computed)
    # other options, a filter, other settings, another commit: computed (equal to the library's)
    other = view.answer("lengths", by="deployment")
    _equal(other, _computed(root, "lengths", {"by": "deployment"}))
    with monkeypatch.context() as m:
        m.setattr(pages, "load", lambda *a: pytest.fail("a filtered view read the unfiltered answer"))
        one = Filters(deployments=view.choices().deployments[:1])
        res = View(root, one).answer("lengths", **looks["lengths"])
        assert isinstance(res, Analysis) and res.params["requests"] < view.choices().requests
    assert pages.load(root, commit, st, "lengths", looks["lengths"]) is not None
    assert pages.load(root, commit, load_settings({"by": "deployment"}), "lengths",
                      looks["lengths"]) is None
    assert pages.load(root, commit + 1, st, "lengths", looks["lengths"]) is None
    # a damaged file is a miss, and the page is computed
    path = pages.commit_dir(root, commit, st) / pages._call_key("lengths", looks["lengths"])
    (path / "0.arrow").write_bytes(b"not arrow")
    assert pages.load(root, commit, st, "lengths", looks["lengths"]) is None
    _equal(view.answer("lengths", **looks["lengths"]), _computed(root, "lengths", looks["lengths"]))


def test_params_keep_their_types_and_what_cannot_be_kept_is_not_saved(tmp_path):
    params = {"since": datetime(2026, 5, 4, tzinfo=UTC), "day": datetime(2026, 5, 4).date(), "slo": ("ttft=0.5",),
              "span": timedelta(hours=3), "nested": {"a": [1, 2.5, None, "x", {"b": True}]}, "nan": 0.1}
    assert pages._decode(pages._encode(params)) == params
    assert type(pages._decode(pages._encode(params))["slo"]) is tuple
    res = Analysis("x", {"odd": object()}, {})
    st = load_settings()
    assert not pages.save(tmp_path, 1, st, "lengths", {}, res)
    assert pages.load(tmp_path, 1, st, "lengths", {}) is None
    # an empty state is kept too (compare on a store with one engine version computes for seconds to say so)
    assert pages.save(tmp_path, 1, st, "compare", {}, Empty("one cohort only"))
    assert pages.load(tmp_path, 1, st, "compare", {}) == Empty("one cohort only")


def test_the_ingest_prepares_the_first_look_and_drops_older_commits(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_DETACH", "0")  # inside the ingest (the detached one: below)
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "lengths,latency")
    store, _ = _store(tmp_path)
    first = store.snapshot().version
    st = load_settings()
    assert pages.commit_dir(store.root, first, st).is_dir()
    logs = tmp_path / "logs"
    (logs / "pod-a" / "vllm-next.log").write_text(_vllm_line("02-14 09:00:00", "e269fdcb7c6ce894"))
    (logs / "litellm-next.jsonl").write_text(_slp("e269fdcb7c6ce894", 1739446413.0 + 77187, "batch", None, 64))
    ingest([str(logs)], store.root, year=2025, tz="UTC")
    second = store.snapshot().version
    assert second > first and not pages.commit_dir(store.root, first, st).exists()
    looks = pages.first_look(st)
    for name in ("lengths", "latency"):
        got = pages.load(store.root, second, st, name, looks[name])
        assert got is not None
        _equal(got, _computed(store.root, name, looks[name]))
        assert got.params["requests"] == 5
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "off")
    assert after_commit(store.root).pages == ()


def test_the_options_prepared_are_those_each_page_opens_with(tmp_path, monkeypatch):
    """Each page script, run on a store, asks View.answer for exactly `first_look`'s options."""
    root = tmp_path / "empty"
    Store.open(root, create=True)
    asked: list[tuple[str, dict]] = []
    answer = View.answer

    def spy(self, name, **kwargs):
        asked.append((name, kwargs))
        return answer(self, name, **kwargs)

    monkeypatch.setattr(View, "answer", spy)
    looks = pages.first_look(load_settings())
    for name in looks:
        asked.clear()
        page(name, root, monkeypatch)
        assert asked == [(name, looks[name])], name


def _wait(pid: int) -> int:
    """The exit status of a preparation the test's ingest started (a child of this process)."""
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_detached_preparation_lets_the_ingest_return_and_a_kill_leaves_no_half_page(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "lengths,latency")
    monkeypatch.setenv("ATTRIBUTION_DUCKDB_MEMORY_MB", "256")
    seen: list[dict] = []
    monkeypatch.setattr(background, "start", _spy(background.start, seen))
    store, _ = _store(tmp_path)
    root, st, looks = store.root, load_settings(), pages.first_look(load_settings())
    commit = store.snapshot().version
    assert [s["commit"] for s in seen] == [commit]
    assert _wait(seen[0]["pid"]) == 0  # the ingest returned first; the process finishes on its own
    for name in ("lengths", "latency"):
        _equal(pages.load(root, commit, st, name, looks[name]), _computed(root, name, looks[name]))
    assert "prepared lengths, latency" in (pages.cache_dir(root) / background.LOG).read_text()
    # a kill while writing leaves a temporary directory no reader looks at, pruned by the next preparation
    # once stale; a kill at any point never leaves a page that is not the whole answer
    half = pages.cache_dir(root) / f".pages-{'0' * 32}.tmp"
    half.mkdir()
    (half / "meta.json").write_text("{")
    for delay in (1.5, 1.0, 0.6, 0.3):  # (an idle machine prepares both pages within 1.5 s: kill sooner)
        shutil.rmtree(pages.commit_dir(root, commit, st), ignore_errors=True)
        pid = background.start(root, commit, st)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        status = _wait(pid)
        for name in ("lengths", "latency"):
            got = pages.load(root, commit, st, name, looks[name])
            assert got is None or _same_as_computed(root, name, looks[name], got)
        if status == -signal.SIGKILL:
            break
    assert status == -signal.SIGKILL  # killed while running, at one of the delays
    monkeypatch.setattr(pages, "STALE_TMP_S", -1)
    assert background.run(root, commit, st) == ["lengths", "latency"]
    assert not half.exists() and not list(pages.cache_dir(root).glob(".pages-*.tmp"))
    # a preparation that finds a newer commit in the store prepares nothing (the newer one's own does)
    assert background.run(root, commit - 1, st) == []


def _spy(start, seen):
    def spy(root, commit, settings):
        pid = start(root, commit, settings)
        seen.append({"commit": commit, "pid": pid})
        return pid
    return spy


def _same_as_computed(root: Path, name: str, kwargs: dict, got) -> bool:
    _equal(got, _computed(root, name, kwargs))
    return True


def test_the_thresholds_preparation_keeps_every_step_line_for_a_readers_first_change(tmp_path, tmp_path_factory,
                                                                                   monkeypatch):
    """The commit's preparation of the thresholds page keeps every step line's rows (attribution.kept); a reader
    (another process: no connection of the commit's open) answers its first filter change, a day, from them:
    no step line counted or read, and the answer is the one computed without them."""
    from conftest import sample_store_at

    from attribution import dashboard
    from attribution.joincache import cache_dir
    from attribution.thresholds import steps

    root = tmp_path / "sample"
    shutil.copytree(sample_store_at(tmp_path_factory.getbasetemp()), root)
    shutil.rmtree(cache_dir(root), ignore_errors=True)
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "thresholds")
    monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_MIN", "0")
    st = load_settings()
    assert first_look.prepare(root, Store.open(root).snapshot().version, st) == ["thresholds"]
    assert len(list(cache_dir(root).glob("threshold_step_rows-*.arrow"))) == 1
    first = View(root, Filters()).choices().first
    day = datetime(first.year, first.month, first.day, tzinfo=UTC) + timedelta(days=1)
    flt = Filters(since=day, until=day + timedelta(days=1))
    kwargs = pages.first_look(st)["thresholds"]
    dashboard._COMMITS.clear()  # (a reader's process)
    reads = []
    real_run = steps.queries.run
    with monkeypatch.context() as m:
        m.setattr(steps, "_read_step_rows", lambda *a: pytest.fail("a step line read"))
        m.setattr(steps.queries, "run", lambda con, name, **kw: reads.append(name) or real_run(con, name, **kw))
        res = View(root, flt).answer("thresholds", **kwargs)
    assert "threshold_step_lines_count" not in reads
    dashboard._COMMITS.clear()
    shutil.rmtree(cache_dir(root))  # (nothing kept: every line read again)
    _equal(res, View(root, flt).answer("thresholds", **kwargs))
