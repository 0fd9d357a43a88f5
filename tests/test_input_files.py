"""Inputs that are not regular files, or stop being readable, never abort, block or go unnoticed: each is in
`ingest_files` (status, reason) and `ingest_errors`, the rest is ingested, and the CLI exits 6."""

from __future__ import annotations

import errno
import os
import signal
import socket
from pathlib import Path

import pytest
from synthetic_source import register, write_log
from typer.testing import CliRunner

from attribution import discovery
from attribution.cli import app
from attribution.db import fetch
from attribution.errors import EXIT_INPUTS_NOT_READ
from attribution.ingest import ingest
from attribution.ingest import run as ingest_run
from attribution.store import Store

register()


@pytest.fixture(autouse=True)
def _no_hang():
    """A read that blocks (a FIFO opened for reading waits for a writer) fails the test instead of hanging."""
    def boom(*_):
        raise TimeoutError("the ingest blocked")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def files_table(store: Path) -> dict[str, tuple[str, str | None]]:
    df = fetch(Store.open(store).connect(), "select file, status, reason from ingest_files where not rotated")
    return {Path(f).name: (s, r) for f, s, r in df.iter_rows()}


def errors_of(store: Path) -> dict[str, str]:
    df = fetch(Store.open(store).connect(), "select file, reason from ingest_errors")
    return {Path(f).name: r for f, r in df.iter_rows()}


def steps(store: Path) -> int:
    return fetch(Store.open(store).connect(), "select count(*) as n from engine_steps")["n"][0]


def _hostile_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    write_log(d / "good.log", 0, 50)
    write_log(d / "old.log", 100, 5)
    os.symlink(d / "old.log", d / "latest.log")
    (d / "old.log").unlink()  # latest.log now dangles
    os.symlink(d / "loop-b.log", d / "loop-a.log")
    os.symlink(d / "loop-a.log", d / "loop-b.log")
    os.symlink("self.log", d / "self.log")
    os.mkfifo(d / "pipe.log")
    os.symlink("/dev/zero", d / "zero.log")  # a device that never ends
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "s.sock"))
    sock.close()
    return d


def test_dangling_links_loops_fifos_sockets_and_devices_are_recorded_and_skipped(tmp_path):
    d = _hostile_dir(tmp_path)
    s = ingest([str(d)], tmp_path / "s")
    assert steps(tmp_path / "s") == 50
    status = {Path(f.path).name: f.status for f in s.files}
    assert status == {"good.log": "read", "latest.log": "skipped", "loop-a.log": "skipped",
                      "loop-b.log": "skipped", "self.log": "skipped", "pipe.log": "skipped",
                      "zero.log": "skipped", "s.sock": "skipped"}
    got = files_table(tmp_path / "s")
    assert got["good.log"] == ("read", None)
    assert "dangling symlink" in got["latest.log"][1] and "old.log" in got["latest.log"][1]
    assert "symlink loop" in got["loop-a.log"][1] and "symlink loop" in got["self.log"][1]
    assert "FIFO" in got["pipe.log"][1] and "socket" in got["s.sock"][1] and "device" in got["zero.log"][1]
    errs = errors_of(tmp_path / "s")
    assert errs["pipe.log"].startswith("skipped: a FIFO") and len(errs) == 7
    # the same problems found again commit nothing
    version = Store.open(tmp_path / "s").snapshot().version
    again = ingest([str(d)], tmp_path / "s")
    assert Store.open(tmp_path / "s").snapshot().version == version
    assert len(again.problems) == 7 and again.count("unchanged") == 1


def test_special_files_named_on_the_command_line_never_block(tmp_path):
    d = _hostile_dir(tmp_path)
    named = [str(d / n) for n in ("pipe.log", "zero.log", "latest.log", "self.log", "good.log")]
    s = ingest(named, tmp_path / "s")
    assert sorted(f.status for f in s.files) == ["read", "skipped", "skipped", "skipped", "skipped"]
    assert steps(tmp_path / "s") == 50


def test_a_link_that_dangled_is_read_once_its_target_is_back(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    os.symlink(d / "vllm.1.log", d / "latest.log")
    assert ingest([str(d)], tmp_path / "s").problems[0].status == "skipped"
    write_log(d / "vllm.1.log", 0, 20)
    s = ingest([str(d)], tmp_path / "s")
    assert [f.status for f in s.files] == ["read"] and steps(tmp_path / "s") == 20
    got = files_table(tmp_path / "s")
    assert got["vllm.1.log"] == ("read", None)
    assert got["latest.log"][0] == "link" and "vllm.1.log" in got["latest.log"][1]  # no stale `skipped`


@pytest.fixture
def deep_tree(tmp_path):
    """logs/d/d/.../d, 1,000 levels (built and removed level by level: pathlib's mkdir(parents=True) and
    shutil.rmtree, pytest's clean-up included, recurse once per level)."""
    top = tmp_path / "logs"
    deep = str(top)
    os.mkdir(deep)
    for _ in range(1000):
        deep += "/d"
        os.mkdir(deep)
    yield top, Path(deep)
    while len(deep) >= len(str(top)):
        for name in os.listdir(deep):
            if not os.path.isdir(os.path.join(deep, name)):
                os.unlink(os.path.join(deep, name))
        os.rmdir(deep)
        deep = os.path.dirname(deep)


def test_deep_directories_are_walked_to_a_bound_without_recursion_error(tmp_path, deep_tree):
    top, deep = deep_tree
    write_log(top / "d" / "d" / "shallow.log", 0, 10)
    write_log(deep / "deep.log", 100, 10)
    s = ingest([str(top)], tmp_path / "s")
    assert steps(tmp_path / "s") == 10
    [skip] = s.problems
    assert skip.status == "skipped" and f"more than {discovery.MAX_DEPTH} directories" in skip.message
    assert skip.path.count("/d") == discovery.MAX_DEPTH + 1


def _deny(monkeypatch, denied: set[str]) -> None:
    """Permission denied on these paths, also for root (which chmod cannot stop)."""
    for p in denied:
        os.chmod(p, 0)
    real_open, real_scandir = os.open, os.scandir

    def check(path) -> None:
        if os.path.abspath(os.fspath(path)) in denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    def fake_open(path, *a, **kw):
        check(path)
        return real_open(path, *a, **kw)

    def fake_scandir(path="."):
        check(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "scandir", fake_scandir)


def test_unreadable_files_and_directories_are_in_the_store(tmp_path, monkeypatch):
    d = tmp_path / "logs"
    (d / "locked").mkdir(parents=True)
    write_log(d / "good.log", 0, 30)
    write_log(d / "secret.log", 0, 30)
    write_log(d / "locked" / "inner.log", 0, 30)
    _deny(monkeypatch, {str(d / "secret.log"), str(d / "locked")})
    s = ingest([str(d)], tmp_path / "s")
    monkeypatch.undo()
    os.chmod(d / "locked", 0o755)
    assert steps(tmp_path / "s") == 30
    got = files_table(tmp_path / "s")
    assert got["secret.log"][0] == "skipped" and "Permission denied" in got["secret.log"][1]
    assert got["locked"][0] == "skipped" and "cannot be listed" in got["locked"][1]
    assert {Path(f.path).name for f in s.problems} == {"secret.log", "locked"}
    assert set(errors_of(tmp_path / "s")) == {"secret.log", "locked"}


def test_files_vanishing_before_or_while_read_are_recorded(tmp_path, monkeypatch):
    d = tmp_path / "logs"
    d.mkdir()
    for name in ("a.log", "b.log", "c.log"):
        write_log(d / name, 0, 40)
    real_discover, real_plan = discovery.discover_inputs, ingest_run.plan_file

    def discover_then_delete(paths):
        out = real_discover(paths)
        (d / "a.log").unlink()  # gone between discovery and planning
        return out

    def plan_then_delete(path, *a, **kw):
        planned = real_plan(path, *a, **kw)
        if path.name == "b.log":
            path.unlink()  # gone between planning and reading
        return planned

    monkeypatch.setattr(discovery, "discover_inputs", discover_then_delete)
    monkeypatch.setattr(ingest_run, "plan_file", plan_then_delete)
    s = ingest([str(d)], tmp_path / "s", jobs=1)
    assert {Path(f.path).name: f.status for f in s.files} == {"a.log": "vanished", "b.log": "vanished",
                                                             "c.log": "read"}
    assert "internal error" not in " ".join(f.message or "" for f in s.files)
    assert steps(tmp_path / "s") == 40
    got = files_table(tmp_path / "s")
    assert got["a.log"][0] == "vanished" and got["b.log"][0] == "vanished"


def test_exit_code_6_when_some_input_was_not_read(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    write_log(d / "good.log", 0, 10)
    (d / "notes.txt").write_text("not a log\n")  # unrecognised is reported, not an exit code
    r = CliRunner().invoke(app, ["ingest", str(d), "--store", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    os.symlink(d / "gone.log", d / "latest.log")
    r = CliRunner().invoke(app, ["ingest", str(d), "--store", str(tmp_path / "s")])
    assert r.exit_code == EXIT_INPUTS_NOT_READ == 6, r.output
    assert "1 skipped" in r.output and "latest.log" in r.output
    assert steps(tmp_path / "s") == 10
