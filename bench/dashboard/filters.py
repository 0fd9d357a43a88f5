"""Filter changes on the dashboard, page by page, as a reader makes them after the first look: a day, another
day, a three-day window, one workload, another, one deployment, a deployment and a workload, a day and a
workload, one engine version (or label), back to everything. Each change is timed as the app computes it: the
app's caches emulated (dashboards/_data.py: `_view` keeps the views of the last two filter sets, `_run` the
answers of 64 calls), so a change costs opening the view of its filter set when it is new, then the page's
library call (View.answer); the browser's paint is not in it. Each page starts from empty caches (a change
made on that page opens its view). p50 and p95 per page, wall and CPU seconds (the process's, every thread:
what a loaded machine's wall inflates), and the load average after each page.

    python -m bench.dashboard.filters STORE [--pages lengths,concurrency] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from typing import Any

from attribution.analyses import Analysis
from attribution.config import load_settings
from attribution.dashboard import Choices, Filters, View
from attribution.summaries import pages

PAGES = ("overview", "lengths", "concurrency", "arrivals", "latency", "capacity", "thresholds")
VIEWS = 2  # dashboards/_data.py _view(max_entries=2)


def _day(t: datetime, k: int) -> datetime:
    return t.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=k)


def changes(ch: Choices) -> list[tuple[str, Filters]]:
    """The sequence of filter sets a reader moves through (named), from the store's own values."""
    assert ch.first is not None
    d0 = _day(ch.first, 1)  # the first whole day
    wl = [w for w in ch.workloads if w != "(none)"] or list(ch.workloads)
    dep = [d for d in ch.deployments if d != "(none)"] or list(ch.deployments)
    seq = [("day 1", Filters(since=d0, until=d0 + timedelta(days=1))),
           ("day 3", Filters(since=d0 + timedelta(days=2), until=d0 + timedelta(days=3))),
           ("days 2-4", Filters(since=d0 + timedelta(days=1), until=d0 + timedelta(days=4))),
           (f"workload {wl[0]}", Filters(workloads=(wl[0],))),
           (f"workload {wl[-1]}", Filters(workloads=(wl[-1],))),
           (f"deployment {dep[0]}", Filters(deployments=(dep[0],))),
           (f"deployment {dep[-1]} + workload {wl[0]}", Filters(deployments=(dep[-1],), workloads=(wl[0],))),
           (f"day 2 + workload {wl[0]}", Filters(since=d0 + timedelta(days=1), until=d0 + timedelta(days=2),
                                                 workloads=(wl[0],)))]
    if len(ch.versions) > 1:
        seq.append((f"version {ch.versions[0]}", Filters(versions=(ch.versions[0],))))
    elif len(ch.labels) > 1:
        seq.append((f"label {ch.labels[0]}", Filters(labels=(ch.labels[0],))))
    seq.append(("back to all", Filters()))
    return seq


def _pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile of a handful of timings."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))]


def run_page(root: str, page: str, kwargs: dict[str, Any], seq: list[tuple[str, Filters]], st: Any
             ) -> dict[str, Any]:
    views: OrderedDict[Filters, View] = OrderedDict()
    answers: dict[tuple[Filters, str], Any] = {}

    def shown(flt: Filters) -> tuple[float, float, float, float, Any]:
        t0, c0 = time.perf_counter(), time.process_time()
        if flt not in views:
            views[flt] = View(root, flt, settings=st)
            while len(views) > VIEWS:
                views.popitem(last=False)
        views.move_to_end(flt)
        t1, c1 = time.perf_counter(), time.process_time()
        key = (flt, page)
        if key not in answers:
            answers[key] = views[flt].answer(page, **kwargs)
        return t1 - t0, time.perf_counter() - t0, c1 - c0, time.process_time() - c0, answers[key]

    first = shown(Filters())[1]
    rows = []
    for name, flt in seq:
        opened, total, opened_cpu, cpu, res = shown(flt)
        n = res.params.get("requests") if isinstance(res, Analysis) else None
        rows.append({"change": name, "s": round(total, 3), "open_view_s": round(opened, 3), "cpu_s": round(cpu, 3),
                     "open_view_cpu_s": round(opened_cpu, 3), "requests": n, "result": type(res).__name__})
    ts, cs = [r["s"] for r in rows], [r["cpu_s"] for r in rows]
    return {"page": page, "first_look_s": round(first, 3), "p50_s": _pct(ts, 0.5), "p95_s": _pct(ts, 0.95),
            "max_s": max(ts), "p50_cpu_s": _pct(cs, 0.5), "p95_cpu_s": _pct(cs, 0.95),
            "open_view_cpu_s_median": _pct([r["open_view_cpu_s"] for r in rows], 0.5), "changes": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args()
    st = load_settings()
    load0 = os.getloadavg()[0]
    ch = View(args.store, Filters(), settings=st).choices()  # the join, built once if the ingest did not
    seq = changes(ch)
    looks = pages.first_look(st)
    out: dict[str, Any] = {"store": args.store, "requests": ch.requests, "load_1min_before": load0, "pages": []}
    print(f"{ch.requests:,} requests; load {load0:.1f}; {len(seq)} changes a page", flush=True)
    for page in args.pages.split(","):
        res = run_page(args.store, page, looks[page], seq, st)
        out["pages"].append(res)
        slow = max(res["changes"], key=lambda r: r["s"])
        print(f"{page:12s} first {res['first_look_s']:7.2f}  p50 {res['p50_s']:7.3f}  p95 {res['p95_s']:7.3f} s"
              f"  CPU p50 {res['p50_cpu_s']:7.3f}  p95 {res['p95_cpu_s']:7.3f} s, opening a view (median) "
              f"{res['open_view_cpu_s_median']:.3f}  (slowest: {slow['change']}, {slow['s']:.2f} s, view "
              f"{slow['open_view_s']:.2f} s)  load {os.getloadavg()[0]:.1f}", flush=True)
    out["load_1min_after"] = os.getloadavg()[0]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"load {out['load_1min_after']:.1f}; peak RSS {out['peak_rss_mb']} MB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
