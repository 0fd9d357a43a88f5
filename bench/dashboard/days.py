"""The lengths page's first look computed whole (every request) against merged from per-day counts
(attribution.summaries.days), on one store: CPU seconds (all threads) and wall, each in a fresh view, and
whether the answers are equal.

    python -m bench.dashboard.days STORE [--recount] [--by workload]

`--recount` removes the kept day files first (a first preparation); without it the days whose rows did not
change since the last run are reused (a commit that touched a few days). The store's join is built first,
outside the timings (an ingest builds it: attribution.summaries).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import time
from collections.abc import Callable
from typing import Any

from attribution.config import load_settings
from attribution.dashboard import Filters, View
from attribution.summaries import days


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c, w = _cpu(), time.time()
    out = fn()
    return out, _cpu() - c, time.time() - w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("store")
    ap.add_argument("--recount", action="store_true")
    ap.add_argument("--by", default=None)
    args = ap.parse_args()
    st = load_settings()
    by = args.by or st.by
    View(args.store, Filters(), settings=st).choices()  # the join, built once if the ingest did not
    whole_view = View(args.store, Filters(), settings=st)
    whole, whole_cpu, whole_wall = _timed(lambda: whole_view.lengths(by=by))
    view = View(args.store, Filters(), settings=st)
    where = days.days_dir(args.store, view.con, st)
    if args.recount:
        shutil.rmtree(where, ignore_errors=True)
    counted, count_cpu, count_wall = _timed(lambda: days.count_days(view.con, where))
    merged, merge_cpu, merge_wall = _timed(lambda: days.lengths(view.con, counted, by=by,
                                                                percentiles=st.percentiles))
    equal = merged is not None and list(merged.tables) == list(whole.tables) and all(
        merged.tables[k].equals(whole.tables[k], null_equal=True) for k in whole.tables) and (
        merged.params == whole.params)
    print(json.dumps({
        "requests": counted.requests, "by": by, "load_1min": os.getloadavg()[0],
        "whole": {"cpu_s": round(whole_cpu, 2), "wall_s": round(whole_wall, 2)},
        "count_days": {"cpu_s": round(count_cpu, 2), "wall_s": round(count_wall, 2),
                       "recounted": counted.recounted, "reused": len(counted.reused)},
        "merge": {"cpu_s": round(merge_cpu, 2), "wall_s": round(merge_wall, 2)},
        "equal": equal, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }, indent=1))


if __name__ == "__main__":
    main()
