"""The store's promises: incremental, idempotent, crash-safe, rotation-aware, and readable during an ingest."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import assert_plain_equals_ours
from synthetic_source import register, write_log

from attribution.db import fetch
from attribution.errors import StoreLocked
from attribution.ingest import ingest
from attribution.store import Store

TESTS = Path(__file__).resolve().parent

register()


def rows(store: Path, table: str = "engine_steps") -> pl.DataFrame:
    df = fetch(Store.open(store).connect(), f"select * from {table}")
    return df.sort(df.columns) if df.height else df


def same_tables(a: Path, b: Path) -> None:
    for table in ("engine_steps", "ingest_errors"):
        ra, rb = rows(a, table), rows(b, table)
        assert ra.height == rb.height, table
        assert ra.equals(rb), table


def test_second_ingest_changes_nothing(tmp_path):
    log = tmp_path / "pod.log"
    write_log(log, 0, 500)
    first = ingest([str(log)], tmp_path / "s", chunk_bytes=2048)
    assert first.rows["engine_steps"] == 500
    before = rows(tmp_path / "s")
    again = ingest([str(log)], tmp_path / "s")
    assert [f.status for f in again.files] == ["unchanged"]
    assert again.rows == {}
    assert rows(tmp_path / "s").equals(before)


def test_every_write_is_synced_unless_the_store_is_scratch(tmp_path, monkeypatch):
    # The suite runs with $ATTRIBUTION_FSYNC=0 (conftest); a user's store syncs every file, commit and directory.
    log = tmp_path / "pod.log"
    write_log(log, 0, 50)
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    monkeypatch.delenv("ATTRIBUTION_FSYNC")
    ingest([str(log)], tmp_path / "synced")
    assert len(synced) >= 4  # the data file, its directory, the commit, the log directory
    monkeypatch.setenv("ATTRIBUTION_FSYNC", "0")
    n = len(synced)
    ingest([str(log)], tmp_path / "scratch")
    assert len(synced) == n
    same_tables(tmp_path / "synced", tmp_path / "scratch")


def test_grown_file_is_read_from_its_offset(tmp_path):
    log = tmp_path / "pod.log"
    write_log(log, 0, 300)
    ingest([str(log)], tmp_path / "s", chunk_bytes=1024)
    write_log(log, 300, 200, header=False)
    grown = ingest([str(log)], tmp_path / "s", chunk_bytes=1024)
    assert grown.rows["engine_steps"] == 200
    assert grown.files[0].bytes < log.stat().st_size / 2  # only the new part was read
    ingest([str(log)], tmp_path / "fresh")
    same_tables(tmp_path / "s", tmp_path / "fresh")
    # the parser state (a running count) continued across the two runs
    assert rows(tmp_path / "s")["waiting"].max() == 500


def test_unterminated_last_line_is_superseded_when_completed(tmp_path):
    log = tmp_path / "pod.log"
    write_log(log, 0, 10, final_newline=False)
    ingest([str(log)], tmp_path / "s")
    assert rows(tmp_path / "s").height == 10
    with open(log, "a") as fh:  # the last line `n=9` goes on: it becomes `n=95`
        fh.write("5\n")
    write_log(log, 10, 5, header=False)
    ingest([str(log)], tmp_path / "s")
    got = rows(tmp_path / "s")
    assert got.height == 15
    assert 95 in got["running"].to_list() and 9 not in got["running"].to_list()
    ingest([str(log)], tmp_path / "fresh")
    same_tables(tmp_path / "s", tmp_path / "fresh")
    files = Store.open(tmp_path / "s").connect().execute("select rows, lines from ingest_files").fetchall()
    assert files == [(15, 16)]


def test_rotation_by_rename_and_in_place(tmp_path):
    log = tmp_path / "pod.log"
    write_log(log, 0, 100)
    ingest([str(tmp_path)], tmp_path / "s")
    write_log(log, 100, 50, header=False)  # grew, then was rotated before we saw the growth
    log.rename(tmp_path / "pod.log.1")
    write_log(log, 1000, 30)  # a new file at the old path
    second = ingest([str(tmp_path)], tmp_path / "s")
    assert second.rows["engine_steps"] == 80  # 50 from the renamed file's unread part + 30 new
    ingest([str(tmp_path)], tmp_path / "fresh")
    a, b = rows(tmp_path / "s"), rows(tmp_path / "fresh")
    assert a.drop("file").sort(a.drop("file").columns).equals(b.drop("file").sort(b.drop("file").columns))
    # truncated in place: same path, new (shorter) content -> read anew, old rows kept
    log.write_text("")
    write_log(log, 5000, 3)
    third = ingest([str(log)], tmp_path / "s")
    assert third.rows["engine_steps"] == 3
    assert rows(tmp_path / "s").height == 183


def test_truncated_gzip_keeps_what_it_can(tmp_path):
    plain = tmp_path / "src.log"
    write_log(plain, 0, 20000)
    raw = gzip.compress(plain.read_bytes())
    cut = tmp_path / "pod.log.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    s = ingest([str(cut)], tmp_path / "s")
    got = rows(tmp_path / "s")
    assert 1000 < got.height < 20000
    errs = rows(tmp_path / "s", "ingest_errors")
    assert errs.height == 1 and "truncated" in errs["reason"][0]
    assert errs["line"][0] == got["line"].max() + 1
    assert s.files[0].status == "read"


def test_long_lines_neither_crash_nor_balloon(tmp_path):
    log = tmp_path / "pod.log"
    write_log(log, 0, 3)
    with open(log, "a") as fh:
        fh.write("x" * 5_000_000 + "\n")
    write_log(log, 3, 3, header=False)
    ingest([str(log)], tmp_path / "s")
    assert rows(tmp_path / "s").height == 6
    ingest([str(log)], tmp_path / "small", max_line_bytes=1_000_000, chunk_bytes=100_000)
    assert rows(tmp_path / "small").height == 6
    errs = rows(tmp_path / "small", "ingest_errors")
    assert errs["line"].to_list() == [5] and "5,000,001 bytes" in errs["reason"][0]


def test_unrecognised_and_garbage_files_are_reported_and_skipped(tmp_path):
    (tmp_path / "notes.txt").write_text("just some notes\n")
    (tmp_path / "blob.bin").write_bytes(os.urandom(5000))
    write_log(tmp_path / "pod.log", 0, 10)
    with open(tmp_path / "pod.log", "a") as fh:
        fh.write("bad line with sk-abcdefghijklmnopqrstuvwxyz inside\n")
    s = ingest([str(tmp_path)], tmp_path / "s")
    assert sorted(f.status for f in s.files) == ["read", "unrecognised", "unrecognised"]
    errs = rows(tmp_path / "s", "ingest_errors")
    assert errs.height == 3
    assert not errs["sample"].str.contains("sk-abcdefghij").any()
    again = ingest([str(tmp_path)], tmp_path / "s")
    assert {f.status for f in again.files} == {"unchanged"}


def test_one_writer_at_a_time(tmp_path):
    write_log(tmp_path / "pod.log", 0, 10)
    store = Store.open(tmp_path / "s", create=True)
    with store.writer():
        with pytest.raises(StoreLocked):
            ingest([str(tmp_path / "pod.log")], tmp_path / "s")


def test_many_small_commits_are_compacted(tmp_path):
    for i in range(20):
        write_log(tmp_path / f"pod{i}.log", i * 10, 10)
        ingest([str(tmp_path / f"pod{i}.log")], tmp_path / "s")
    snap = Store.open(tmp_path / "s").snapshot()
    assert len(snap.live("engine_steps")) < 16
    assert rows(tmp_path / "s").height == 200


_WORKER = """
import sys
sys.path.insert(0, {tests!r})
from synthetic_source import register
register()
import attribution.ingest.run as m
m.PARALLEL_MIN_BYTES = 0
m.ingest([{src!r}], {store!r}, chunk_bytes=8192, jobs={jobs})
"""


def _worker(src: Path, store: Path, jobs: int = 1) -> subprocess.Popen:
    """An ingest in another process (to be killed), in this process (jobs=1) or in worker processes."""
    code = _WORKER.format(tests=str(TESTS), src=str(src), store=str(store), jobs=jobs)
    return subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)


def _commits(store: Path) -> int:
    return len(list((store / "_log").glob("*[0-9].json"))) if (store / "_log").exists() else 0


def test_kill_9_at_any_moment_then_rerun_gives_the_uninterrupted_rows(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(4):  # 31 commits of 8 KB chunks: room for the three kills below (after 17) and a rerun
        write_log(src / f"pod{i}.log", i * 100_000, 2_000)
    with open(src / "pod1.log", "a") as fh:
        fh.write("bad line\n")
    ingest([str(src)], tmp_path / "reference", chunk_bytes=8192, jobs=1)  # what _worker runs, in this process
    killed = 0
    # Chosen moments, however fast or slow the machine is today: just after the first commit of a fresh run,
    # then a resumed run after a few commits, and one further on (each kill lands between two commits or in
    # the middle of one: the next chunk is being parsed, staged or committed). A moment drawn at random
    # adds no case these miss and costs a full run each.
    for after in (1, 4, 12):
        done = _commits(tmp_path / "s")
        proc = _worker(src, tmp_path / "s")
        while proc.poll() is None and _commits(tmp_path / "s") < done + after:
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait()
    assert killed == 3
    final = _worker(src, tmp_path / "s")
    assert final.wait() == 0, final.stderr.read().decode()
    same_tables(tmp_path / "s", tmp_path / "reference")
    assert_plain_equals_ours(tmp_path / "s")  # and any engine reading data/ alone gets the same rows


def test_readers_work_while_an_ingest_runs(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(3):
        write_log(src / f"pod{i}.log", i * 100_000, 5_000)
    ingest([str(src / "pod0.log")], tmp_path / "s")
    proc = _worker(src, tmp_path / "s")
    seen = []
    while proc.poll() is None:
        n = fetch(Store.open(tmp_path / "s").connect(), "select count(*) as n from engine_steps").item()
        seen.append(n)
        time.sleep(0.05)
    assert proc.wait() == 0
    seen.append(rows(tmp_path / "s").height)
    assert seen == sorted(seen) and seen[-1] == 15_000
    assert len(set(seen)) > 2  # the reader saw the ingest progress, commit by commit


def test_a_statement_whose_data_file_moved_meanwhile_runs_again():
    """The rename of a removed file `data/` -> `_trash/` can fall between DuckDB's two looks at the glob, or
    between its finding the file and opening it: that statement is run again (the file is then in the trash);
    any other failure is not hidden."""
    from attribution.db import reading_store

    calls = []

    def moved_once():
        calls.append(1)
        if len(calls) == 1:
            raise duckdb.IOException('IO Error: No files found that match the pattern "/s/*/engine_steps/day=2026-01-01/'
                                     '000000000034-c0e4f072a0b6.parquet"')
        return "rows"

    assert reading_store(moved_once) == "rows" and len(calls) == 2

    def always_gone():
        raise duckdb.IOException("IO Error: Cannot open file \"/s/data/requests/day=x/a.parquet\": No such file or "
                                 "directory")

    with pytest.raises(duckdb.IOException):  # (a file gone for good is not retried forever)
        reading_store(always_gone)

    def other():
        calls.append(1)
        raise duckdb.IOException("IO Error: Could not read from file \"/elsewhere.parquet\": Input/output error")

    calls.clear()
    with pytest.raises(duckdb.IOException):
        reading_store(other)
    assert len(calls) == 1
