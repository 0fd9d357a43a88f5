"""Dashboard page load times (issue 9 item 3) on a store of a few million requests: what each page costs
when its result is not cached yet (the library call behind it, for the whole store and for a "dig" filter of
one workload, one pod, one hour), and what a reader waits in Chromium for every page, first visit and
again (cached). The data set is simulated (hybrid-before-after) and ingested once, then reused; the store
commit's join cache (attribution.joincache) is removed first, so its build is timed too.

    python -m bench.dashboard.run                                  # 2M requests in /tmp/attribution-bench
    python -m bench.dashboard.run --requests 200000 --json out.json
    python -m bench.dashboard.run --skip-browser                   # library calls only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from attribution import dashboard, joincache
from attribution.dashboard import Filters, View
from attribution.ingest import ingest
from attribution.simulate.output import simulate_to_dir

console = Console(width=150)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGES = {  # page method -> sidebar title
    "overview": "Overview", "lengths": "Workloads and lengths", "concurrency": "Concurrency and live tokens",
    "latency": "Latency and goodput", "thresholds": "Feature thresholds", "memsplit": "Memory split",
    "compare": "Compare two cohorts",
}


def mem(pid: int | str = "self") -> dict[str, float]:
    """Resident and peak resident memory (MB) of a process."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024)
    return out


def load() -> float:
    return os.getloadavg()[0]


def data(root: Path, requests: int, seed: int | None) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The simulated logs and their store, made once (the ingest is incremental: a rerun reads nothing)."""
    logs, store = root / "logs", root / "store"
    info: dict[str, Any] = {}
    if not (logs / "ground_truth.json").is_file():
        t = time.perf_counter()
        simulate_to_dir("hybrid-before-after", logs, requests=requests, seed=seed,
                        progress=lambda m: console.print(m, highlight=False))
        info["simulate_s"] = round(time.perf_counter() - t, 1)
    truth = json.loads((logs / "ground_truth.json").read_text())
    if dashboard.store_version(store) is None:
        t = time.perf_counter()
        ingest([str(logs)], store, year=truth["year"], tz=truth["tz"])
        info["ingest_s"] = round(time.perf_counter() - t, 1)
    cache = joincache.cache_dir(store)
    info.update(requests=truth["totals"]["requests"], store_mb=round(sum(
        f.stat().st_size for f in store.rglob("*") if f.is_file() and cache not in f.parents) / 1e6))
    return store, info, truth


def cohorts(truth: dict[str, Any]) -> dict[str, str]:
    """The compare page's cohorts: the halves of the simulated span (the scenario's old and new engine),
    by arrival window, since the simulated SGLang logs name no engine version."""
    first, last = (datetime.fromisoformat(truth["totals"][k]) for k in ("first_arrival", "last_finished"))
    mid = first + (last - first) / 2
    iso = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
    return {"cohort_by": "window", "before": f"{iso(first)}..{iso(mid)}",
            "after": f"{iso(mid)}..{iso(last + timedelta(seconds=1))}"}


def library(store: Path, compare: dict[str, str]) -> list[dict[str, Any]]:
    """Each page's library call on a fresh view: the cost of a page whose result is not cached yet. First the
    store commit's join cache is built from cold (what the first reader after an ingest waits for, once)."""
    rows = []
    shutil.rmtree(joincache.cache_dir(store), ignore_errors=True)
    t = time.perf_counter()
    everything = View(store, Filters())
    rows.append({"filters": "(commit)", "step": "build join cache", "seconds": round(time.perf_counter() - t, 1),
                 **mem(), "load": load()})
    console.print(rows[-1], highlight=False)
    ch = everything.choices()
    busy = ch.first.replace(hour=15, minute=0, second=0, microsecond=0)  # the scenario's daily peak hour
    dig = Filters(since=busy, until=busy + timedelta(hours=1), deployments=ch.deployments[:1],
                  workloads=ch.workloads[:1])
    kwargs = {"compare": compare}
    del everything
    for name, flt in (("everything", Filters()), ("dig", dig)):
        t = time.perf_counter()
        view = View(store, flt)
        rows.append({"filters": name, "step": "open view", "seconds": round(time.perf_counter() - t, 1),
                     **mem(), "load": load()})
        console.print(rows[-1], highlight=False)
        for page in PAGES:
            t = time.perf_counter()
            res = getattr(view, page)(**kwargs.get(page, {}))
            rows.append({"filters": name, "step": page, "seconds": round(time.perf_counter() - t, 1), **mem(),
                         "load": load(), "empty": getattr(res, "message", None)})
            console.print(rows[-1], highlight=False)
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _windows(tab: Any, windows: dict[str, Any]) -> None:
    tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()
    tab.get_by_text("window", exact=True).click()
    for side in ("before", "after"):
        box = tab.get_by_label(f"{side.capitalize()} (SINCE..UNTIL, UTC)")
        box.fill(windows[side])
        box.press("Enter")
        tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()


def browser(store: Path, root: Path, windows: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Every page in Chromium through the sidebar, twice: first visit (computed) and again (cached)."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    cmd, env = dashboard.command(store, port=port)
    log = (root / "server.log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    rows: list[dict[str, Any]] = []
    try:
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                  args=CHROMIUM_ARGS)
            tab = b.new_page(viewport={"width": 1400, "height": 1200})
            tab.set_default_timeout(3_600_000)
            for visit in ("first", "again"):
                for page, title in PAGES.items():
                    t = time.perf_counter()
                    if visit == "first" and page == "overview":
                        tab.goto(f"http://127.0.0.1:{port}/")
                    else:
                        tab.locator("[data-testid=stSidebarNav] a", has_text=title).click()
                    tab.get_by_role("heading", level=1, name=title).wait_for()
                    if page == "compare":  # the windows of page_kwargs, typed as a reader would
                        _windows(tab, windows)
                    tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()
                    tab.locator(".js-plotly-plot .main-svg").first.wait_for()
                    rows.append({"visit": visit, "page": page, "seconds": round(time.perf_counter() - t, 1),
                                 "load": load()})
                    console.print(rows[-1], highlight=False)
            b.close()
        return rows, mem(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/attribution-bench/dashboard"))
    ap.add_argument("--skip-browser", action="store_true")
    ap.add_argument("--skip-library", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    store, info, truth = data(args.data_dir, args.requests, args.seed)
    out: dict[str, Any] = {"data": info, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    console.print(out, highlight=False)
    if not args.skip_library:
        out["library"] = library(store, cohorts(truth))
    if not args.skip_browser:
        out["browser"], out["server_memory_mb"] = browser(store, args.data_dir, cohorts(truth))
    table = Table(title=f"dashboard pages on {info['requests']:,} requests (seconds)")
    for col in ("page", "library: everything", "library: dig", "browser: first", "browser: again"):
        table.add_column(col, justify="right")
    cell = {(r["filters"], r["step"]): r["seconds"] for r in out.get("library", [])}
    cell |= {(r["visit"], r["page"]): r["seconds"] for r in out.get("browser", [])}
    build = cell.get(("(commit)", "build join cache"))
    if build is not None:
        table.add_row("build join cache", str(build), "", "", "")
    for page in ["open view", *PAGES]:
        table.add_row(page, *(str(cell.get((k, page), "")) for k in ("everything", "dig", "first", "again")))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
