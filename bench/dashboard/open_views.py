"""Opening a filter set's View alone (no page): after the first view (and the filter values), the View of each
filter set filters.py moves through, timed in CPU seconds (the process's, every thread) and wall.

    python -m bench.dashboard.open_views STORE
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from attribution.config import load_settings
from attribution.dashboard import Filters, View
from bench.dashboard.filters import changes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    args = ap.parse_args()
    st = load_settings()
    t, c = time.perf_counter(), time.process_time()
    ch = View(args.store, Filters(), settings=st).choices()
    print(f"first view + filter values: {time.perf_counter() - t:.2f} s wall, {time.process_time() - c:.3f} s CPU")
    walls, cpus, kept = [], [], []
    for _name, flt in changes(ch):
        t, c = time.perf_counter(), time.process_time()
        kept.append(View(args.store, flt, settings=st))
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    print(f"open a filter set's view ({len(cpus)}): CPU median {statistics.median(cpus) * 1000:.1f} ms, max "
          f"{max(cpus) * 1000:.1f} ms; wall median {statistics.median(walls) * 1000:.0f} ms, max "
          f"{max(walls) * 1000:.0f} ms; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
