"""Files parsed in worker processes give the store exactly what a sequential read gives, survive a dying
worker and a killed ingest, and leave no worker behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE, sample_slice
from synthetic_source import pid_messages, register, write_log
from test_store import _worker, rows, same_tables

from attribution import ingest as ingest_mod
from attribution import workers
from attribution.ingest import batching, ingest, planning
from attribution.ingest import run as ingest_run
from attribution.store import Staged, Store

register()


@pytest.fixture
def always_parallel(monkeypatch):
    monkeypatch.setattr(ingest_run, "PARALLEL_MIN_BYTES", 0)


def _workers_of(pid: int) -> list[int]:
    """Worker processes started by `pid` (children running attribution.workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"attribution.workers" in cmd:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sample_logs_in_workers_equal_a_sequential_read(tmp_path, always_parallel):
    """Both engine formats of sample_logs/ (the SGLang pod and a vLLM pod after the upgrade, their first
    20,000 lines: one file per worker) parsed in workers give the rows a sequential read gives."""
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    sample_slice(tmp_path / "in", lines=20_000, only=("sglang", "vllm/after/qwen35-vllm-0"))
    inputs = [str(tmp_path / "in" / "sglang"), str(tmp_path / "in" / "vllm" / "after" / "qwen35-vllm-0")]
    seq = ingest(inputs, tmp_path / "seq", jobs=1, year=truth["year"], tz=truth["tz"])
    par = ingest(inputs, tmp_path / "par", jobs=2, year=truth["year"], tz=truth["tz"])
    files = sorted(f.path for f in par.files if f.status == "read")
    assert len(files) == 2 and sum(par.rows.values()) > 30_000 and par.rows == seq.rows
    for table in ("requests", "request_events", "engine_steps", "engine_config", "access_log", "ingest_errors"):
        a, b = rows(tmp_path / "seq", table), rows(tmp_path / "par", table)
        assert a.height == b.height and a.equals(b), table
    again = ingest(inputs, tmp_path / "par", jobs=2, year=truth["year"], tz=truth["tz"])
    assert again.count("unchanged") == len(again.files) and not again.rows


def test_chunks_of_files_in_workers_interleave_into_the_sequential_rows(tmp_path, always_parallel):
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(3):
        write_log(src / f"pod{i}.log", i * 100_000, 5_000 * (i + 1))
    seq = ingest([str(src)], tmp_path / "seq", jobs=1, chunk_bytes=8192)
    par = ingest([str(src)], tmp_path / "par", jobs=2, chunk_bytes=8192)
    assert [(f.status, f.rows, f.bytes) for f in par.files] == [(f.status, f.rows, f.bytes) for f in seq.files]
    same_tables(tmp_path / "par", tmp_path / "seq")
    assert not list((tmp_path / "par" / "_tmp").iterdir())  # every file a worker staged was adopted


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_the_ingest_process_parses_plans_too_with_one_worker_fewer(jobs):
    """`run(here=True)`: this process is one of the jobs; every plan is handled once, its messages in order."""
    seen: dict[int, list[tuple]] = {}
    workers.run(list(range(7)), jobs, lambda i, msg: seen.setdefault(i, []).append(msg), weight=lambda p: 1,
                work=pid_messages, here=True)
    assert sorted(seen) == list(range(7))
    assert all(msgs[0][0] == "pid" and msgs[0][2] == i and msgs[1:] == [("done",)] for i, msgs in seen.items())
    pids = {msgs[0][1] for msgs in seen.values()}
    assert os.getpid() in pids and len(pids) == jobs  # (the first plans go one to each worker, one here)
    assert not _workers_of(os.getpid())


def test_a_worker_stages_the_rows_of_large_chunks_as_parquet(tmp_path):
    src = tmp_path / "pod.log"
    write_log(src, 0, 5_000)
    Store.open(tmp_path / "s", create=True)
    plan, _ = _plan(src, tmp_path / "s")
    plain = list(ingest_mod.parse_plan(plan))
    plan, _ = _plan(src, tmp_path / "s")
    plan.stage_root, plan.stage_min = str(tmp_path / "s"), 8192
    staged = list(ingest_mod.parse_plan(plan))
    assert [m[0] for m in staged] == [m[0] for m in plain] and len(plain) > 3
    n_staged = 0
    for a, b in zip(plain, staged, strict=True):
        if a[0] != "unit":
            continue
        assert a[1:4] == b[1:4] and set(a[4]) == set(b[4])
        for table, df in a[4].items():
            if a[1].nbytes >= 8192 and table != "ingest_line_shapes":  # the census stays a frame: it is counted
                assert isinstance(b[4][table], Staged) and b[4][table].rows == df.height
                assert pl.read_parquet(tmp_path / "s" / "_tmp" / b[4][table].name).equals(df)
                n_staged += 1
            else:
                assert b[4][table].equals(df)
    assert n_staged > 3


def _plan(path: Path, store: Path) -> tuple[ingest_mod.Plan, object]:
    st = Store.open(store)
    with st.writer() as w:
        batch = batching.Batch(w, 1 << 30, ingest_mod.IngestSummary(store=str(store)))
        opts = dict(fmt=None, deployment=None, label=None, year=2026, tz="UTC", options={}, chunk_bytes=16384,
                    max_line_bytes=1 << 20)
        return planning.plan_file(path, w, batch, {}, {}, opts, lambda *_: None)


def test_a_worker_that_dies_fails_its_file_only_and_a_rerun_completes_it(tmp_path, always_parallel, monkeypatch):
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(3):  # about 20 chunks each: pod1's first is far from its last
        write_log(src / f"pod{i}.log", i * 100_000, 5_000)
    ingest([str(src)], tmp_path / "reference", jobs=1, chunk_bytes=8192)

    real_run = workers.run
    killed: list[int] = []

    def run_and_kill_one(plans, jobs, handle, weight, **kw):
        def handle_and_kill(i, msg):
            handle(i, msg)
            if not killed and msg[0] == "unit" and Path(plans[i].path).name == "pod1.log":
                victims = _workers_of(os.getpid())
                # the busiest worker cannot be told apart from here: kill them all, both files must fail
                for pid in victims:
                    os.kill(pid, signal.SIGKILL)
                killed.extend(victims)
        real_run(plans, jobs, handle_and_kill, weight, **kw)

    monkeypatch.setattr(workers, "run", run_and_kill_one)
    first = ingest([str(src)], tmp_path / "s", jobs=2, chunk_bytes=8192)
    assert killed
    failed = [f for f in first.files if f.status == "failed"]
    assert failed and all("worker process parsing this file died" in f.message for f in failed)
    assert all(f.status in ("read", "failed") for f in first.files)
    monkeypatch.setattr(workers, "run", real_run)
    second = ingest([str(src)], tmp_path / "s", jobs=2, chunk_bytes=8192)
    assert {f.path for f in second.files if f.status == "read"} >= {f.path for f in failed}
    same_tables(tmp_path / "s", tmp_path / "reference")
    assert all(not _alive(pid) for pid in killed)


def test_kill_9_of_a_parallel_ingest_leaves_no_worker_and_a_rerun_gives_the_uninterrupted_rows(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(4):
        write_log(src / f"pod{i}.log", i * 100_000, 6_000)
    with open(src / "pod2.log", "a") as fh:
        fh.write("bad line\n")
    ingest([str(src)], tmp_path / "reference", jobs=1, chunk_bytes=8192)
    killed = 0
    for _attempt in range(2):  # a fresh run, then a resumed one (its workers start from the committed offsets)
        proc = _worker(src, tmp_path / "s", jobs=2)
        deadline = time.monotonic() + 60
        kids: list[int] = []
        while proc.poll() is None and not kids and time.monotonic() < deadline:
            kids = _workers_of(proc.pid)
            time.sleep(0.02)
        time.sleep(0.3)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait()
        gone_by = time.monotonic() + 20
        while any(_alive(k) for k in kids) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not any(_alive(k) for k in kids), "a worker outlived its killed ingest"
    assert killed >= 1
    final = _worker(src, tmp_path / "s", jobs=2)
    assert final.wait() == 0, final.stderr.read().decode()
    same_tables(tmp_path / "s", tmp_path / "reference")
