"""CPU of the charts' common look (attribution.charts.common.layout) against plotly's own way of building the
same layout (the template by name and two `update_layout` calls, tests/test_chart_look.py `_plotly_way`), in
one run on one machine: a ratio, with the load average recorded before and after, so a loaded machine shows.

    PYTHONPATH=$PWD python bench/charts/run.py [--figures 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # the reference way lives beside the test that pins its equality

import plotly.graph_objects as go  # noqa: E402
from test_chart_look import _plotly_way  # noqa: E402

from attribution.charts import common  # noqa: E402


def cpu_per_figure(build, n: int) -> float:
    """CPU seconds per figure over `n` figures (process time: other processes' load does not count)."""
    t = time.process_time()
    for _ in range(n):
        build()
    return (time.process_time() - t) / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", type=int, default=200, help="figures built per way and round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, the two ways alternating; the best is kept")
    ap.add_argument("--bound", type=float, default=3.0, help="exit 1 if ours is not this many times cheaper")
    args = ap.parse_args(argv)
    ours_f = lambda: common.layout(go.Figure(), "t")  # noqa: E731
    theirs_f = lambda: _plotly_way(go.Figure(), "t", height=360, legend=True, panels=False)  # noqa: E731
    ours_f(), theirs_f()  # warm: plotly's lazy imports and template load are paid once by either way
    load_before = os.getloadavg()
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(cpu_per_figure(ours_f, args.figures))
        theirs.append(cpu_per_figure(theirs_f, args.figures))
    load_after = os.getloadavg()
    ratio = min(theirs) / min(ours)
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} ({os.cpu_count()} cores)")
    print(f"ours   {min(ours) * 1e3:8.3f} ms CPU a figure (best of {args.rounds} x {args.figures})")
    print(f"plotly {min(theirs) * 1e3:8.3f} ms CPU a figure")
    print(f"ratio  {ratio:8.1f}x cheaper (bound {args.bound}x)")
    return 0 if ratio >= args.bound else 1


if __name__ == "__main__":
    raise SystemExit(main())
