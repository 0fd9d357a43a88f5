"""The dashboard's first look on a store, page by page, as a reader opening it unfiltered meets it: open the view
and read the filter values, then each page with the options it opens with (View.answer: the answer an ingest
prepared for the commit, else computed). `--prepare` first prepares the commit as an ingest does
(attribution.summaries.first_look.prepare, in this process, every page, whatever the store's size) and times that.

    python -m bench.dashboard.first_look STORE [--prepare]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from attribution.config import load_settings
from attribution.dashboard import Filters, View
from attribution.store import Store
from attribution.summaries import first_look, pages


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--prepare", action="store_true", help="prepare the commit's pages first (timed)")
    args = ap.parse_args()
    st = load_settings()
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if args.prepare:
        os.environ["ATTRIBUTION_PREPARE_PAGES_MIN"] = "0"
        t = time.time()
        kept = first_look.prepare(args.store, Store.open(args.store).snapshot().version, st)
        print(f"prepare {time.time() - t:.1f} s, peak {_peak_mb():.0f} MB: {', '.join(kept)}", flush=True)
    t = time.time()
    view = View(args.store, Filters(), settings=st)
    n = view.choices().requests
    print(f"open the view + filter values: {time.time() - t:.2f} s ({n:,} requests)", flush=True)
    for name, kwargs in pages.first_look(st).items():
        t = time.time()
        res = view.answer(name, **kwargs)
        print(f"  {name:12s} {time.time() - t:7.2f} s  {type(res).__name__}", flush=True)
    print(f"peak RSS {_peak_mb():.0f} MB, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
