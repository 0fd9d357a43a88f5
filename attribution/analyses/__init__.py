"""The analyses behind `attribution lengths | concurrency | latency | capacity | analyze`, the dashboard and the
report: each takes a Selection (a store connection prepared for one window and grouping by `select`) and
returns an Analysis (named Polars frames, definitions, notes such as `sampled` or `estimate`). Front ends
render these; they never compute numbers of their own.

    con = Store.open(path).connect()
    sel = select(con, since="7d", by="workload")
    lengths(sel).tables["stats"]
"""

from attribution.analyses.arrivals import arrivals
from attribution.analyses.capacity import capacity
from attribution.analyses.common import (
    Analysis,
    Selection,
    Window,
    parse_when,
    release,
    resolve_window,
    select,
)
from attribution.analyses.concurrency import concurrency
from attribution.analyses.latency import Score, Slo, latency, load_presets, parse_slo, score_presets
from attribution.analyses.lengths import lengths
from attribution.analyses.overview import analyze
from attribution.choices import GroupBy

__all__ = [
    "Analysis", "GroupBy", "Score", "Selection", "Slo", "Window", "analyze", "arrivals", "capacity", "concurrency",
    "latency",
    "lengths", "load_presets", "parse_slo", "parse_when", "release", "resolve_window", "score_presets", "select",
]
