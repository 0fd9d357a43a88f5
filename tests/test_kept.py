"""Results kept per store commit on disk (attribution.kept): a window's Prometheus increases, computed by one
command, are read by the next connection to the same commit instead of scanning every sample again; a torn
file is computed again, a connection reading other files (fewer days) has its own, and a newer commit's file
removes the older commit's."""

from __future__ import annotations

import shutil

import pytest

from attribution import kept, queries
from attribution.histograms.analysis import increases, metric_window
from attribution.joincache import cache_dir
from attribution.store import Store


def _kept_files(root) -> list[str]:
    return sorted(p.name for p in cache_dir(root).glob("metric_increase-*.arrow"))


@pytest.fixture
def store(sample_store, tmp_path) -> Store:
    """A copy of the session's sample store (it has Prometheus histograms and counters) whose cache is ours."""
    root = tmp_path / "store"
    shutil.copytree(sample_store, root, ignore=shutil.ignore_patterns("_cache"))
    return Store.open(root)


def test_the_next_connection_reads_the_increases_a_previous_one_kept(store, monkeypatch):
    ran: list[str] = []
    run = queries.run

    def counting(con, name, **params):
        ran.append(name)
        return run(con, name, **params)

    monkeypatch.setattr(queries, "run", counting)
    con = store.connect()
    window = metric_window(con)
    first = increases(con, window)
    assert ran == ["metric_increase"] and first.height > 0
    (name,) = _kept_files(store.root)
    assert name.startswith(f"metric_increase-{store.snapshot().version:020d}-")

    again = increases(store.connect(), window)  # another command on the same commit
    assert ran == ["metric_increase"] and again.equals(first) and again.schema == first.schema

    # the counters and another window are other questions, each kept apart
    counters = increases(store.connect(), window, "counter")
    later = metric_window(con, since="1d")
    increases(store.connect(), later)
    assert ran == ["metric_increase"] * 3 and len(_kept_files(store.root)) == 3
    queries.materialize(con, "int_metric_series", kind="counter", until=None)  # (the series it reads)
    assert counters.equals(run(con, "metric_increase", kind="counter", since=None, until=None))

    # a torn file (a crash, a full disk) is computed again and replaced
    (cache_dir(store.root) / name).write_bytes(b"ARROW1 torn")
    assert increases(store.connect(), window).equals(first) and len(ran) == 4
    assert increases(store.connect(), window).equals(first) and len(ran) == 4


def test_a_connection_reading_other_files_has_its_own_and_a_newer_commit_drops_the_older(store):
    whole = store.connect()
    window = metric_window(whole)
    increases(whole, window)
    pruned = store.connect(days=("2026-05-08", None))  # the last days' files only: other samples
    got = increases(pruned, window)
    assert len(_kept_files(store.root)) == 2
    assert got.equals(queries.run(pruned, "metric_increase", kind="histogram", since=None, until=None))
    assert not got.equals(increases(whole, window))

    newer = store.connect()
    kept.register(newer, store.root, store.snapshot().version + 1)  # as a connection to the next commit
    increases(newer, window)
    (name,) = _kept_files(store.root)
    assert f"-{store.snapshot().version + 1:020d}-" in name


def test_connections_not_made_over_a_store_keep_nothing(store):
    con = store.connect()
    window = metric_window(con)
    cursor = con.cursor()  # not marked as reading the commit (a dashboard's cursor is: kept.share)
    increases(cursor, window)
    assert _kept_files(store.root) == []
    kept.share(con, cursor)
    increases(cursor, window)
    assert len(_kept_files(store.root)) == 1
