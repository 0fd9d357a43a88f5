"""The report's Prometheus section (issue 18): what the window's engine histograms and counters say per
deployment and model, each percentile with the bucket it lies in, labelled bucket-interpolated and kept apart
from the exact per-request figures of the latency section. Present only when the window has such samples."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl

from attribution.analyses.common import percentile_column
from attribution.histograms.catalogue import LABEL
from attribution.report.fmt import num, pct
from attribution.report.model import Section

if TYPE_CHECKING:
    from attribution.report.build import Inputs

SHOWN = (50.0, 90.0, 99.0)


def bucket_text(value: float | None, lo: float | None, hi: float | None) -> str:
    """`0.275 in (0.25, 0.5]`: the interpolated answer and the bucket the true value lies in."""
    if value is None or lo is None or hi is None:
        return ""
    top = "+Inf)" if math.isinf(hi) else f"{num(hi)}]"
    return f"{num(value)} in ({num(lo)}, {top}"


def wide(rows: pl.DataFrame, kind: str) -> pl.DataFrame:
    """One row per deployment, model and `kind` (phase / counts), one text column per shown percentile."""
    keys = ["deployment", "model", kind, "observations", "mean"]
    out = rows.filter(pl.col("percentile").is_in(SHOWN)).select(
        *keys, pl.col("percentile").map_elements(percentile_column, return_dtype=pl.Utf8),
        pl.struct("value", "lo", "hi").map_elements(lambda r: bucket_text(r["value"], r["lo"], r["hi"]),
                                                    return_dtype=pl.Utf8).alias("answer"))
    if out.is_empty():
        return out
    return out.pivot("percentile", index=keys, values="answer", maintain_order=True)


def metrics_sections(inp: Inputs) -> list[Section]:
    """[the section] when the window has histogram or counter answers, else []."""
    a = inp.metrics
    if a is None or not any(a.tables[t].height for t in ("latency", "lengths", "prefix_cache")):
        return []
    s = Section("metrics", f"Engine metrics from Prometheus ({LABEL})", definitions=a.definitions)
    lat = a.tables["latency"]
    for r in lat.filter((pl.col("percentile") == 99.0) & (pl.col("phase") == "ttft")).iter_rows(named=True):
        s.lines.append(f"{r['deployment']} ({r['model']}): TTFT p99 {bucket_text(r['value'], r['lo'], r['hi'])} s "
                       f"over {num(r['observations'])} requests ({LABEL}).")
    for r in a.tables["prefix_cache"].iter_rows(named=True):
        if r["hit_rate"] is not None:
            s.lines.append(f"{r['deployment']} ({r['model']}): prefix-cache hit rate {pct(r['hit_rate'])} of "
                           f"{num(r['queried_tokens'])} looked-up tokens.")
    s.table("latency", a.titles["latency"], wide(lat, "phase"))
    s.table("lengths", a.titles["lengths"], wide(a.tables["lengths"], "counts"))
    s.table("prefix_cache", a.titles["prefix_cache"], a.tables["prefix_cache"].drop("counters"))
    if "goodput" in a.tables:
        s.table("goodput", a.titles["goodput"], a.tables["goodput"].drop("label"))
    s.notes += a.notes
    return [s]


def bucket_thresholds_sections(inp: Inputs) -> list[Section]:
    """[the thresholds section] of a window without per-request rows whose token histograms count
    request-scoped features (bucket-derived: exact on an edge, else a bound), else []."""
    a = inp.thresholds
    if a is None or "histogram_requests" not in a.tables:
        return []
    s = Section("thresholds", "Feature-threshold crossings (bucket-derived, from token histograms)",
                definitions=a.definitions)
    rows = a.tables["histogram_requests"]
    for r in rows.iter_rows(named=True):
        s.lines.append(f"{r['feature']} on {r['deployment']} ({r['model']}), {r['quantity']} {r['op']} "
                       f"{num(r['threshold'])}: {r['answer']}; {num(r['requests'])} requests in all.")
    s.table("histogram_requests", a.titles["histogram_requests"], rows.drop("title", "label"))
    s.notes += a.notes
    return [s]
