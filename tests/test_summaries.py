"""What an ingest prepares for its readers (attribution.summaries): the new commit's join and filter values are
there when the ingest returns, a reader gets the same answers from them as from the store itself (after a day
added, a day re-touched and a file rotated), and a kill while preparing leaves the store readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from test_join import _slp, _store, _vllm_line

from attribution import dashboard, joincache, queries, summaries
from attribution.analyses.common import Empty
from attribution.dashboard import Filters, View
from attribution.ingest import ingest
from attribution.store import Store

PAGES = ("overview", "thresholds")  # the overview runs lengths, concurrency, latency, goodput and capacity
EVERYTHING = Filters()
BASE = 1739446413.0  # 2025-02-13 11:33:33 UTC, the day test_join's store holds

# these tests are about what an ingest prepares after its commit (off by default in tests: conftest)
pytestmark = pytest.mark.summaries


def _prepared(store: Store) -> list[str]:
    d = joincache.cache_dir(store.root)
    return sorted(p.name for p in d.glob("*.duckdb")) if d.is_dir() else []


def _answers(root: Path, flt: Filters = EVERYTHING, pages: tuple[str, ...] = PAGES) -> dict[str, object]:
    view = View(root, flt)
    out: dict[str, object] = {"choices": view.choices()}
    for page in pages:
        res = getattr(view, page)()
        out[page] = res if isinstance(res, Empty) else {k: df for k, df in res.tables.items()
                                                                 if k != "store"}
    return out


def _from_the_store(root: Path, monkeypatch: pytest.MonkeyPatch, flt: Filters = EVERYTHING,
                    pages: tuple[str, ...] = PAGES) -> dict[str, object]:
    """The same answers with nothing prepared: every reader derives the join from the staging views."""
    with monkeypatch.context() as m:
        m.setattr(joincache, "use", lambda con, **kw: False)
        m.setattr(joincache, "choices", lambda con: None)
        return _answers(root, flt, pages)


def _same(a: dict[str, object], b: dict[str, object]) -> None:
    assert a.keys() == b.keys()
    for page in a:
        if isinstance(a[page], dict):
            assert a[page].keys() == b[page].keys(), page
            for name, df in a[page].items():
                assert df.equals(b[page][name]), (page, name)
        else:
            assert a[page] == b[page], page


def test_the_ingest_prepares_its_commit_unless_turned_off(tmp_path, monkeypatch):
    store, _ = _store(tmp_path / "on")
    (name,) = _prepared(store)
    assert name.startswith(f"joined_requests-{store.snapshot().version:020d}-")
    con = store.connect()
    assert joincache.use(con)
    cached = joincache.choices(con)
    assert cached is not None and cached.sort(cached.columns).equals(
        queries.run(store.connect(), "dashboard_filter_choices").sort(cached.columns))
    dashboard.narrow(con, Filters(deployments=("pod-a",)))
    assert joincache.choices(con) is None  # narrowed: the caller runs the query on its own views
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")
    off, _ = _store(tmp_path / "off")
    assert _prepared(off) == []
    assert summaries.after_commit(off.root).skipped.startswith("turned off")


def test_answers_are_the_same_with_and_without_prepared_inputs_as_the_store_grows(tmp_path, monkeypatch):
    store, _ = _store(tmp_path)
    logs = tmp_path / "logs"
    vllm = logs / "pod-a" / "vllm.log"
    day = 86400.0
    steps = [
        # a day added: the next day's requests in new files
        lambda: ((logs / "pod-a" / "vllm-next.log").write_text(_vllm_line("02-14 09:00:00", "e269fdcb7c6ce894")),
                 (logs / "litellm-next.jsonl").write_text(_slp("e269fdcb7c6ce894", BASE + day - 9213, "batch",
                                                                None, 64))),
        # the first day re-touched: lines appended to its files
        lambda: (vllm.open("a").write(_vllm_line("02-13 12:00:00", "f269fdcb7c6ce895")),
                 (logs / "litellm.jsonl").open("a").write(_slp("f269fdcb7c6ce895", BASE + 1587, "search-backend",
                                                               None, 300))),
        # the engine log rotated: the old file renamed, a new one started
        lambda: (vllm.rename(vllm.with_name("vllm.log.1")),
                 vllm.write_text(_vllm_line("02-14 10:00:00", "0369fdcb7c6ce896"))),
    ]
    for i, change in enumerate([lambda: None, *steps]):
        change()
        if i:
            ingest([str(logs)], store.root, year=2025, tz="UTC")
        version = store.snapshot().version
        assert [n for n in _prepared(store) if f"-{version:020d}-" in n], f"step {i}: not prepared"
        prepared = _answers(store.root)
        _same(prepared, _from_the_store(store.root, monkeypatch))
    assert prepared["choices"].requests == 7  # (the last commit's)
    flt = Filters(deployments=("pod-a",))
    _same(_answers(store.root, flt), _from_the_store(store.root, monkeypatch, flt))


_PREPARE = "import sys; from attribution import summaries; summaries.after_commit(sys.argv[1])"


@pytest.mark.parametrize("delay", [0.5, 2.0])
def test_a_kill_while_preparing_leaves_the_store_readable(tmp_path, monkeypatch, delay):
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")
    store, _ = _store(tmp_path)
    monkeypatch.delenv("ATTRIBUTION_SUMMARIES")
    expected = _from_the_store(store.root, monkeypatch, pages=("overview",))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _PREPARE, str(store.root)], env=env)
    time.sleep(delay)  # wherever it is (importing, joining, renaming), SIGKILL gives it no chance to tidy up
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _same(_answers(store.root, pages=("overview",)), expected)
    # a file torn by a crash is not read: it is removed and built again
    (name,) = _prepared(store)
    path = joincache.cache_dir(store.root) / name
    path.write_bytes(path.read_bytes()[:4096])
    _same(_answers(store.root, pages=("overview",)), expected)
    assert _prepared(store) == [name]


def test_the_overviews_store_table_counts_what_status_counts(tmp_path):
    """The overview lists the head of `attribution status` (attribution.status.store_counts), not all of it."""
    from attribution.status import store_status

    store, _ = _store(tmp_path)
    status = store_status(store)
    table = dashboard.store_table(str(store.root), status["commit"])
    want = {**{f"{t} rows": n for t, n in status["rows"].items()},
            **{f"files {f['status']}": f["files"] for f in status["files"]},
            "ingest errors": status["error_count"], "store commit": status["commit"]}
    assert dict(table.iter_rows()) == want and status["rows"]["requests"] == 6


def test_the_join_is_built_under_a_memory_limit_spilling_outside_the_store(tmp_path, monkeypatch):
    """DuckDB would take 80% of the machine for the join's hash tables (GBs at millions of requests): the ingest
    bounds it ($ATTRIBUTION_DUCKDB_MEMORY_MB) and spills to a directory of its own, removed afterwards."""
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")
    store, _ = _store(tmp_path / "s")
    monkeypatch.delenv("ATTRIBUTION_SUMMARIES")
    monkeypatch.setenv("ATTRIBUTION_DUCKDB_MEMORY_MB", "64")
    seen: dict[str, str] = {}
    real = joincache.use

    def use(con, **kw):
        for name in ("memory_limit", "temp_directory"):
            seen[name] = con.execute(f"select current_setting('{name}')").fetchone()[0]
        return real(con, **kw)

    monkeypatch.setattr(joincache, "use", use)
    built = summaries.after_commit(store.root)
    assert built.skipped == "" and _prepared(store)
    with duckdb.connect() as ref:
        ref.execute("set memory_limit = '64MB'")
        assert seen["memory_limit"] == ref.execute("select current_setting('memory_limit')").fetchone()[0]
    scratch = Path(seen["temp_directory"])
    assert scratch.name.startswith("attribution-join-") and not scratch.exists()
    assert store.root not in scratch.parents and Path.cwd() not in scratch.parents
    monkeypatch.setattr(joincache, "use", real)
    _same(_answers(store.root), _from_the_store(store.root, monkeypatch))


def test_the_join_takes_one_thread_per_row_group_of_requests(tmp_path, monkeypatch):
    """A DuckDB scan splits among threads by row group: the join of a store with fewer requests than a row group
    runs on one thread (the others would only spin), a bigger store keeps one per row group up to the machine's."""
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")
    store, _ = _store(tmp_path / "s")
    monkeypatch.delenv("ATTRIBUTION_SUMMARIES")
    con = store.connect()
    rows = con.execute("select count(*) from raw_requests").fetchone()[0]
    assert rows >= 3
    threads = lambda: con.execute("select current_setting('threads')").fetchone()[0]  # noqa: E731
    con.execute("set threads = 4")
    assert summaries.join_threads(con) == 1 and threads() == 1
    con.execute("set threads = 4")
    monkeypatch.setattr(summaries, "ROW_GROUP", 1)  # a row group per request: 3 or more
    assert summaries.join_threads(con) == min(4, rows) and threads() == min(4, rows)
    con.execute("set threads = 2")
    assert summaries.join_threads(con) == 2 and threads() == 2  # never more than it had
    seen: list[int] = []
    real = joincache.use

    def use(con, **kw):
        seen.append(con.execute("select current_setting('threads')").fetchone()[0])
        return real(con, **kw)

    monkeypatch.setattr(summaries, "ROW_GROUP", 122_880)
    monkeypatch.setattr(joincache, "use", use)
    assert summaries.after_commit(store.root).skipped == "" and seen == [1]
    monkeypatch.setattr(joincache, "use", real)
    _same(_answers(store.root), _from_the_store(store.root, monkeypatch))


def test_the_commits_preparation_makes_the_histograms_increases_no_filter_change_does(tmp_path, monkeypatch):
    """On a store of many Prometheus histogram samples (here: samples alone, no requests; the threshold lowered)
    the commit's preparation makes the whole store's increases and each series' per-day rows, whatever pages it
    prepares (none here) and however few requests the store holds; a later reader (another process: nothing in
    memory) answers the open window and any window of whole days from them without reading a sample, the same
    rows as the samples' (the open window bit-equal). Below the threshold, or turned off, nothing is made."""
    from datetime import timedelta

    from test_metrics_histograms import T0, _day_store_rows, write

    from attribution import kept
    from attribution.analyses.common import Window
    from attribution.config import load_settings
    from attribution.histograms import analysis
    from attribution.summaries import first_look

    def made(root: Path) -> list[str]:
        return sorted(p.name.split("-")[0] for p in joincache.cache_dir(root).glob("metric_increase*.arrow"))

    def fresh() -> None:  # a new process: no commit connection, no increases kept in memory
        dashboard._COMMITS.clear()
        analysis._KEPT.clear()

    hist, counter = _day_store_rows(range(0, 5))
    for case in ("off", "few", "many"):
        store = write(tmp_path / case, metric_histograms=hist, metric_counters=counter)
        samples = len(hist)
        monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES", "0")
        monkeypatch.setenv("ATTRIBUTION_PREPARE_INCREASES", "0" if case == "off" else "1")
        monkeypatch.setenv("ATTRIBUTION_PREPARE_SAMPLES_MIN", str(samples + 1 if case == "few" else samples))
        monkeypatch.setenv("ATTRIBUTION_PREPARE_PAGES_DETACH", "0")
        fresh()
        built = summaries.after_commit(store.root)
        assert built.skipped == "" and built.pages == ()
        assert made(store.root) == ([] if case != "many" else ["metric_increase", "metric_increase_days"]), case
    assert first_look.prepare(store.root, store.snapshot().version, load_settings()) == []  # (again: read back)
    fresh()
    real, ran = queries.run, []
    monkeypatch.setattr(queries, "run", lambda c, name, **kw: ran.append(name) or real(c, name, **kw))
    view = View(store.root, Filters(deployments=("pod-a",)))
    plain = store.connect()
    for a, b in [(None, None), (0, 2), (1, 4), (3, None), (None, 1)]:
        w = Window(None if a is None else T0 + timedelta(days=a), None if b is None else T0 + timedelta(days=b))
        ran.clear()
        got = analysis.increases(view.con, w)
        assert not {"metric_increase", "metric_increase_days"} & set(ran), (a, b, ran)
        queries.materialize(plain, "int_metric_series", kind="histogram", until=w.until)
        want = real(plain, "metric_increase", kind="histogram", since=w.since, until=w.until)
        if a is None and b is None:
            assert got.schema == want.schema and got.equals(want)
        else:
            assert got.drop("increase").equals(want.drop("increase"))
            assert (got["increase"] - want["increase"]).abs().max() <= 1e-12 * want["increase"].abs().max()
    assert kept.keeps(view.con)
