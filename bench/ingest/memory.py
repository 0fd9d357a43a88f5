"""Issue 21: where an ingest's peak memory goes. Runs one ingest in this process (workers as it starts them),
samples the resident memory of this process and of each child every 0.2 s, and marks the phases: parse and
commit (until the last commit), the join cache (attribution.joincache, after the commit), the dashboard pages'
first look (in-process when $ATTRIBUTION_PREPARE_PAGES_DETACH=0, else the detached preparer, followed until it
exits). Prints one row per phase: wall, CPU, peak RSS of this process and the peak sum over its children.

usage: python -m bench.ingest.memory LOGS STORE [--jobs N] [--json FILE]   (STORE is replaced)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import threading
import time
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Sampler(threading.Thread):
    """This process's RSS and the sum over its children (and any extra pid followed), per phase."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.me = os.getpid()
        self.extra: set[int] = set()
        self.phase = "start"
        self.peaks: dict[str, list[int]] = {}
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            kids = set(_children(self.me)) | {p for p in self.extra if os.path.exists(f"/proc/{p}")}
            mine, theirs = _rss(self.me), sum(_rss(p) for p in kids)
            peak = self.peaks.setdefault(self.phase, [0, 0])
            peak[0], peak[1] = max(peak[0], mine), max(peak[1], theirs)
            time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs")
    ap.add_argument("store", type=Path)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--json", type=Path)
    ap.add_argument("--after-only", action="store_true",
                    help="STORE is an ingested store (a copy): its _cache is removed and only after_commit runs")
    a = ap.parse_args()
    from attribution import joincache, summaries
    from attribution.ingest import ingest

    shutil.rmtree(a.store / "_cache" if a.after_only else a.store, ignore_errors=True)
    s = Sampler()
    s.start()
    rows: list[dict[str, Any]] = []
    mark = {"t": time.perf_counter(), "c": time.process_time(), "cc": _child_cpu()}

    def phase(name: str) -> None:
        now, c, cc = time.perf_counter(), time.process_time(), _child_cpu()
        peak = s.peaks.get(s.phase, [0, 0])
        rows.append({"phase": s.phase, "wall_s": round(now - mark["t"], 2), "cpu_s": round(c - mark["c"], 2),
                     "children_cpu_s": round(cc - mark["cc"], 2), "peak_mb": round(peak[0] / 2**20),
                     "children_peak_mb": round(peak[1] / 2**20),
                     "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                     "load": round(os.getloadavg()[0], 2)})
        print(rows[-1], flush=True)
        s.phase = name
        mark.update(t=now, c=c, cc=cc)

    real_use = joincache.use

    def use(con: Any, **kw: Any) -> bool:  # the join cache is the first thing after_commit builds
        if s.phase != "after_commit":  # (a page's own connection uses it too)
            return real_use(con, **kw)
        phase("join cache")
        try:
            return real_use(con, **kw)
        finally:
            phase("pages (in-process)")

    joincache.use = use
    real_after = summaries.after_commit

    def after(root: Any, settings: Any = None) -> Any:
        phase("after_commit")
        return real_after(root, settings)

    summaries.after_commit = after
    phase("parse + commit")
    if a.after_only:
        summaries.after_commit(a.store)
        rows_, nbytes = {}, 0
    else:
        summary = ingest([a.logs], a.store, year=2026, tz="UTC", jobs=a.jobs)
        rows_, nbytes = summary.rows, summary.bytes
    pid = _prepared_pid(a.store)
    if pid:
        phase("detached pages")
        s.extra.add(pid)
        while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
            time.sleep(0.2)
    phase("end")
    s.stop = True
    out = {"logs": a.logs, "jobs": a.jobs, "bytes": nbytes, "rows": rows_, "phases": rows[1:-1],
           "detach": os.environ.get("ATTRIBUTION_PREPARE_PAGES_DETACH", "")}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _prepared_pid(store: Path) -> int:
    """The detached preparer's pid, if one runs (it holds the store's pages lock: found by its command line)."""
    root = str(store.resolve())
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"attribution.summaries.background" in cmd and root.encode() in cmd:
                return int(d)
    return 0


if __name__ == "__main__":
    main()
