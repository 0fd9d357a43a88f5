"""Parsing files in worker processes, so an ingest of several files uses every core.

The ingest process keeps everything that touches the store (planning, batching, Parquet writing, commits);
workers only turn a planned file into messages with the function the ingest hands over with each plan
(`attribution.ingest.units.parse_plan`, pickled by reference, so this module imports nothing of the ingest):
one per chunk with its rows and the parser state around it, then "done" or "failed". The ingest applies a file's messages in order,
so the store sees exactly what a sequential read would commit, files merely interleave. The ingest process
parses files too, between the workers' messages (`run(here=True)`): one interpreter fewer to start.

Workers are fresh interpreters (`python -I`, importing `attribution.workers`), not forks: Polars' thread pool makes
a forked child unsafe, and `multiprocessing`'s spawn would re-import the caller's `__main__` (a user script without a
`__main__` guard would start itself again). Each worker talks over two pipes of its own with length-prefixed
pickles (`multiprocessing.connection.Connection`): a full pipe blocks the worker, which bounds memory to a few
messages per worker; a dead ingest closes the pipes, and the worker exits on the broken pipe or end of input
instead of lingering. Workers ignore SIGINT: Ctrl-C stops the ingest, which stops them.

A worker never imports from the working directory (a `zstandard.py` or `secrets.py` where the user happens to
run the tool would be executed): it starts isolated (`-I`: no cwd, no PYTHON* variables) with the parent's
import path minus the working directory (`import_path`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

Message = tuple[Any, ...]
Work = Callable[[Any], Iterable[Message]]  # a plan -> its messages


def default_jobs() -> int:
    """Worker processes for an ingest: `$ATTRIBUTION_JOBS`, else the CPUs this process may run on."""
    from attribution.config import env_int

    jobs = env_int("ATTRIBUTION_JOBS")
    if jobs is not None:
        return jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def import_path() -> list[str]:
    """This process's import path (a source registered from a plugin or a test included) without the working
    directory (`''`, or its absolute spelling, which `python -m`/`-c` put first). The directory holding the
    `attribution` package comes last when it is the working directory (a source checkout run in place), so
    every other module is still found elsewhere first."""
    cwd = os.path.realpath(os.getcwd())
    out = [p for p in sys.path if p and os.path.realpath(p) != cwd]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not any(os.path.realpath(p) == os.path.realpath(root) for p in out):
        out.append(root)
    return list(dict.fromkeys(out))


# `-I` starts without the working directory on sys.path; the path is set before anything of ours is imported
_BOOT = "import sys, json; sys.path[:] = json.loads(sys.argv[1]); import attribution.workers as w; " \
        "sys.exit(w.main(sys.argv[2:]))"


class _Worker:
    def __init__(self) -> None:
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, json.dumps(import_path()), str(task_r), str(res_w)],
            pass_fds=(task_r, res_w), stdin=subprocess.DEVNULL, close_fds=True,
        )
        os.close(task_r)
        os.close(res_w)
        self.tasks = Connection(task_w, readable=False)
        self.results = Connection(res_r, writable=False)
        self.current: int | None = None  # the index of the plan it is parsing

    def give(self, index: int, plan: Any, work: Work) -> None:
        self.current = index
        self.tasks.send((work, plan))

    def stop(self) -> None:
        for conn in (self.tasks, self.results):
            try:
                conn.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Pool:
    """Worker processes started ahead of the work (an interpreter takes ~0.5 s to import Polars and the
    parsers: the ingest plans its files meanwhile). Stopped on exit."""

    def __init__(self, jobs: int):
        self.workers = [_Worker() for _ in range(jobs)]

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:
            w.stop()


def run(plans: list[Any], jobs: int, handle: Callable[[int, Message], None], weight: Callable[[Any], int],
        pool: Pool | None = None, *, work: Work, here: bool = False) -> None:
    """Parse `plans` in `jobs` worker processes (those of `pool` first), the heaviest first: a worker calls
    `work(plan)` (a module-level function: it travels by name) and sends back the messages it yields; call
    `handle(index, message)` in this process for every message, in order per plan. A plan whose worker dies
    gets a "failed" message. With `here`, this process is one of the `jobs`: it parses plans itself between
    the workers' messages (one interpreter fewer to start, each importing Polars, DuckDB and the parsers)."""
    order = sorted(range(len(plans)), key=lambda i: -weight(plans[i]))
    n = min(jobs, len(plans)) - (1 if here else 0)
    started = pool.workers if pool else []
    for w in started[n:]:
        w.stop()
    workers = started[:n] + [_Worker() for _ in range(n - len(started[:n]))]

    def hand(w: _Worker, i: int) -> _Worker:
        """Give plan `i` to `w`, or to a new worker when `w` died after its last message (its task pipe is
        broken: a file it never started must not fail with it)."""
        try:
            w.give(i, plans[i], work)
            return w
        except OSError:  # BrokenPipeError
            w.current = None
            fresh = _Worker()
            workers.append(fresh)
            fresh.give(i, plans[i], work)
            return fresh

    def receive(w: _Worker) -> None:
        """Handle the next message of busy worker `w` (ready to be read)."""
        index = w.current
        assert index is not None  # (a busy worker has a file)
        try:
            msg = w.results.recv()
        except (EOFError, OSError):
            code = w.proc.wait()
            handle(index, ("failed", f"internal error: the worker process parsing this file died "
                                     f"(exit code {code})"))
            w.current = None
            busy.remove(w)
            if order:  # the other files still get read, by a new worker
                w = _Worker()
                workers.append(w)
                busy.append(hand(w, order.pop(0)))
            return
        handle(index, msg)
        if msg[0] in ("done", "failed"):
            if order:
                if (taker := hand(w, order.pop(0))) is not w:
                    busy.remove(w)
                    busy.append(taker)
            else:
                w.current = None
                with contextlib.suppress(OSError):  # (a worker that died meanwhile has nothing to stop)
                    w.tasks.send(None)
                busy.remove(w)

    mine: Iterator[Message] | None = None  # the messages of the plan this process parses
    mine_index = -1
    try:
        busy = [hand(w, order.pop(0)) for w in list(workers) if order]
        while busy or mine is not None or (here and order):
            if here and mine is None and order:
                mine_index = order.pop(0)
                mine = iter(work(plans[mine_index]))
            if mine is not None:
                msg = next(mine, None)  # one chunk of our own, then whatever the workers sent meanwhile
                if msg is None:
                    mine = None
                else:
                    handle(mine_index, msg)
                ready = wait([w.results for w in busy], timeout=0) if busy else []
            else:
                ready = wait([w.results for w in busy])
            for conn in ready:
                receive(next(w for w in busy if w.results is conn))
    finally:
        for w in workers:
            w.stop()


def _serve(tasks: Connection, results: Connection) -> None:
    while True:
        task = tasks.recv()
        if task is None:
            return
        work, plan = task
        for msg in work(plan):
            results.send(msg)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tasks = Connection(int(argv[0]), writable=False)
    results = Connection(int(argv[1]), readable=False)
    try:
        _serve(tasks, results)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 1  # the ingest went away
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
