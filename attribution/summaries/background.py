"""The dashboard's first look prepared in a detached process, so an ingest returns as soon as its commit and
join are in: `start` launches `python -m attribution.summaries.background`, which takes the store's one
preparation lock (two preparers never hold memory at once), gives up if a newer commit landed meanwhile, runs
attribution.summaries.first_look at a low priority under a DuckDB memory limit, and stops at the next page
once a newer commit appears (its pages would be pruned anyway)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from attribution.config import Settings, env_on, environment
from attribution.joincache import cache_dir

LOCK = "pages.lock"  # under the store's _cache: held by the process preparing pages
LOG = "pages.log"  # the last detached preparation's output (an exception's traceback, if any)
MEMORY_MB = 1024  # DuckDB's working memory in the preparing process ($ATTRIBUTION_DUCKDB_MEMORY_MB); it spills
NICE = 10


def detached() -> bool:
    """$ATTRIBUTION_PREPARE_PAGES_DETACH=0 (off/no/false) prepares inside the ingest, which then returns after."""
    return env_on("ATTRIBUTION_PREPARE_PAGES_DETACH")


def start(root: str | Path, commit: int, settings: Settings) -> int:
    """Launch the preparation of commit `commit` in its own session (it outlives the ingest and a Ctrl-C
    of its terminal); the settings travel pickled on its stdin. The process id."""
    d = cache_dir(Path(root))
    d.mkdir(parents=True, exist_ok=True)
    with open(d / LOG, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "attribution.summaries.background", str(Path(root).resolve()), str(commit)],
            stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True, env=environment(),
            cwd=os.getcwd())
    assert proc.stdin is not None
    with proc.stdin:
        proc.stdin.write(pickle.dumps(settings))
    return proc.pid


@contextlib.contextmanager
def locked(root: str | Path) -> Iterator[None]:
    """Hold the store's preparation lock (waits for a preparer already running: one at a time)."""
    d = cache_dir(Path(root))
    d.mkdir(parents=True, exist_ok=True)
    with open(d / LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run(root: str | Path, commit: int, settings: Settings, log: Callable[[str], None] | None = None
        ) -> list[str]:
    """The detached process' work: the pages of commit `commit` prepared, unless a newer commit is there."""
    from attribution.store import Store
    from attribution.summaries import first_look

    with locked(root):
        if Store.open(root).snapshot().version != commit:
            return []  # a newer commit landed while we waited: its own preparer follows
        return first_look.prepare(root, commit, settings, memory_mb=MEMORY_MB, log=log)


def main(argv: list[str]) -> int:
    root, commit = argv[0], int(argv[1])
    settings = pickle.loads(sys.stdin.buffer.read())
    with contextlib.suppress(OSError):
        os.nice(NICE)  # background work: the reader's dashboard and the next ingest go first
    kept = run(root, commit, settings, log=lambda line: print(f"commit {commit}: {line}", flush=True))
    print(f"commit {commit}: prepared {', '.join(kept) or 'nothing'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
