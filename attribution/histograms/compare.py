"""Two windows compared on histogram data: per deployment, model, phase and percentile, the ratio of the
bucket-interpolated percentiles, the range of ratios the bucket edges allow, and a verdict that says
"cannot tell" when the two answers' buckets overlap (the true values could be in either order)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from attribution.analyses.common import Analysis, Selection, Window, percentile_list
from attribution.histograms.analysis import latency_percentiles
from attribution.histograms.catalogue import DEFINITIONS, LABEL

if TYPE_CHECKING:
    from attribution.compare.cohorts import Cohorts

JOIN = ["deployment", "model", "engine", "phase", "metric", "percentile"]


def verdict(a_lo: float | None, a_hi: float | None, b_lo: float | None, b_hi: float | None) -> str:
    """`lower` / `higher` when B's bucket (b_lo, b_hi] lies wholly below / above A's, else `cannot tell`."""
    if None in (a_lo, a_hi, b_lo, b_hi):
        return "no answer"
    assert a_lo is not None and a_hi is not None and b_lo is not None and b_hi is not None
    if b_hi <= a_lo:
        return "lower"
    if b_lo >= a_hi:
        return "higher"
    return "cannot tell"


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0 or math.isinf(den) or math.isnan(num):
        return None
    return num / den


def compare_rows(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Percentile rows of window A and window B (tables.percentile_rows) side by side with ratio B / A, its
    range from the bucket edges (ratio_lo = b.lo / a.hi, ratio_hi = b.hi / a.lo) and the verdict."""
    both = a.join(b, on=JOIN, how="inner", suffix="_b", nulls_equal=True)
    rows = []
    for r in both.iter_rows(named=True):
        rows.append({**{k: r[k] for k in JOIN}, "a": r["value"], "a_lo": r["lo"], "a_hi": r["hi"],
                     "b": r["value_b"], "b_lo": r["lo_b"], "b_hi": r["hi_b"],
                     "ratio": _ratio(r["value_b"], r["value"]), "ratio_lo": _ratio(r["lo_b"], r["hi"]),
                     "ratio_hi": _ratio(r["hi_b"], r["lo"]),
                     "verdict": verdict(r["lo"], r["hi"], r["lo_b"], r["hi_b"]), "label": LABEL})
    return pl.DataFrame(rows, schema={
        **{k: (pl.Float64 if k == "percentile" else pl.Utf8) for k in JOIN},
        **{k: pl.Float64 for k in ("a", "a_lo", "a_hi", "b", "b_lo", "b_hi", "ratio", "ratio_lo", "ratio_hi")},
        "verdict": pl.Utf8, "label": pl.Utf8}, orient="row")


def compare_windows(con: duckdb.DuckDBPyConnection, a: Window, b: Window,
                    percentiles: Iterable[float] | None = None) -> Analysis:
    """Window B against window A on the latency histograms of the same deployments and models."""
    pcts = percentile_list(percentiles)
    rows = compare_rows(latency_percentiles(con, a, pcts), latency_percentiles(con, b, pcts))
    notes = [] if rows.height else ["no latency histogram present in both windows for the same deployment and model"]
    return Analysis(
        name="metrics_compare",
        params={"a": a.to_dict(), "b": b.to_dict(), "percentiles": pcts},
        tables={"compare": rows},
        titles={"compare": f"window B against window A ({LABEL} percentiles, seconds)"},
        definitions={**DEFINITIONS, "ratio": "B / A of the interpolated percentiles; ratio_lo and ratio_hi: the "
                     "ratios the bucket edges allow (b.lo / a.hi, b.hi / a.lo; none when a.hi is +Inf)",
                     "verdict": "lower / higher when B's bucket lies wholly below / above A's; cannot tell when "
                     "they overlap (both answers in the same bucket, or buckets that share values)"},
        notes=notes,
    )


def window_cohorts(con: duckdb.DuckDBPyConnection, before: tuple[datetime, datetime] | None,
                   after: tuple[datetime, datetime] | None, fractions: Iterable[float]) -> pl.DataFrame:
    """`compare --cohort-by window`: the after window (B) against the before window (A) on latency
    histograms, at `fractions` (0.5, 0.9, ...); empty without two windows or histograms in both."""
    if before is None or after is None:
        return pl.DataFrame()
    a, b = Window(*before), Window(*after)
    pcts = [f * 100 for f in fractions]
    return compare_rows(latency_percentiles(con, a, pcts), latency_percentiles(con, b, pcts))


HISTOGRAM_TITLE = f"after (B) against before (A) from Prometheus latency histograms ({LABEL} percentiles, seconds)"
HISTOGRAM_DEFINITIONS = {
    "histograms": "the latency histograms of the same deployments and models in the two windows: ratio = "
    "B / A of the interpolated percentiles; ratio_lo / ratio_hi the ratios the bucket edges allow; verdict "
    "lower / higher when B's bucket lies wholly below / above A's, cannot tell when they overlap",
}


def histogram_only(sel: Selection, cohorts: Cohorts, hist: pl.DataFrame) -> Analysis:
    """`compare --cohort-by window` on a store with histograms but no per-request rows in a window."""
    return Analysis(
        "compare", {**sel.window.to_dict(), **cohorts.params()}, {"histograms": hist},
        {"histograms": HISTOGRAM_TITLE}, {**DEFINITIONS, **HISTOGRAM_DEFINITIONS},
        ["no per-request rows in a window: the comparison rests on the Prometheus histograms alone"],
    )
