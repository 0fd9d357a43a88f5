"""Charts of a `compare` Analysis: after/before ratios of the re-weighted percentiles with their 95% bootstrap
intervals (log scale, 1 = no change), overall and per workload or prompt-length bucket, and per feature the
change among the requests that crossed it against the others."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts.common import label, layout, message, ratio_axis, table

CHANGED = {True: ("#D55E00", "changed (interval excludes 1, beyond tolerance)"), False: ("#777777", "no material change")}


def _cohort_names(a: Analysis) -> str:
    p = a.params
    return f"{p.get('after', 'after')} vs {p.get('before', 'before')}"


def _error_bars(df: pl.DataFrame, mid: str, lo: str, hi: str) -> dict[str, Any]:
    return {"type": "data", "symmetric": False, "array": (df[hi] - df[mid]).to_list(),
            "arrayminus": (df[mid] - df[lo]).to_list(), "thickness": 1.5, "width": 4}


def ratios(a: Analysis, *, title: str | None = None) -> go.Figure:
    """One row per metric and percentile of the `summary` table: the ratio after/before with its interval,
    coloured by whether the change is material; metrics without values on both sides are left out."""
    title = title or f"{_cohort_names(a)}: latency ratios (95% interval)"
    s = table(a, "summary")
    if s is not None:
        s = s.filter(pl.col("ratio").is_not_null())
    if s is None or not s.height:
        return message("no metric has values in both cohorts", title)
    fig = go.Figure()
    for changed in (True, False):
        part = s.filter(pl.col("changed") == changed)
        if not part.height:
            continue
        colour, name = CHANGED[changed]
        ys = [f"{label(m)} {p}" for m, p in zip(part["metric"], part["percentile"], strict=True)]
        fig.add_trace(go.Scatter(
            x=part["ratio"].to_list(), y=ys, mode="markers", name=name, marker={"color": colour, "size": 10},
            error_x=_error_bars(part, "ratio", "ratio_lo", "ratio_hi") | {"color": colour},
            customdata=list(zip(part["before"], part["after"], strict=True)),
            hovertemplate="%{y}: x%{x:.3g}<br>before %{customdata[0]:.3g}, after %{customdata[1]:.3g}<extra></extra>"))
    order = [f"{label(m)} {p}" for m, p in zip(s["metric"], s["percentile"], strict=True)]
    fig.add_vline(x=1, line={"color": "#000", "width": 1, "dash": "dash"})
    ratio_axis(fig, s["ratio_lo"].to_list() + s["ratio_hi"].to_list() + s["ratio"].to_list(),
               title="after / before (log scale; < 1 is faster)")
    fig.update_yaxes(categoryorder="array", categoryarray=order[::-1], automargin=True)
    return layout(fig, title, height=max(260, 90 + 30 * len(order)))


def by_group(a: Analysis, *, kind: str = "workload", metric: str = "ttft_s", percentile: str = "p50",
             title: str | None = None) -> go.Figure:
    """The ratio and interval of one metric and percentile per workload (`kind="workload"`, the `by_workload`
    table) or per prompt-length bucket (`kind="bucket"`, `by_bucket`)."""
    title = title or f"{label(metric)} {percentile}, after / before, per {kind}"
    df = table(a, f"by_{kind}")
    rows = df.filter((pl.col("metric") == metric) & (pl.col("percentile") == percentile)
                     & pl.col("ratio").is_not_null()) if df is not None else None
    if rows is None or not rows.height:
        return message(f"no {label(metric)} in both cohorts", title)
    names = [str(v) for v in rows[kind]]
    fig = go.Figure(go.Scatter(
        x=rows["ratio"].to_list(), y=names, mode="markers", marker={"color": "#0072B2", "size": 10},
        error_x=_error_bars(rows, "ratio", "ratio_lo", "ratio_hi"), name=f"{label(metric)} {percentile}",
        customdata=list(zip(rows["n_before"], rows["n_after"], strict=True)),
        hovertemplate="%{y}: x%{x:.3g} (%{customdata[0]:,} before, %{customdata[1]:,} after)<extra></extra>"))
    fig.add_vline(x=1, line={"color": "#000", "width": 1, "dash": "dash"})
    ratio_axis(fig, rows["ratio_lo"].to_list() + rows["ratio_hi"].to_list() + rows["ratio"].to_list(),
               title="after / before (log scale)")
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1], automargin=True)
    return layout(fig, title, height=max(240, 90 + 32 * len(names)), legend=False)


def attribution(a: Analysis, *, metric: str = "ttft_s", title: str | None = None) -> go.Figure:
    """Per feature that fired on some but not all requests: the change of `metric` among the requests that
    crossed it and among the others, with intervals (the `attribution` table), titled with the verdict."""
    title = title or f"{label(metric)}: change among requests that crossed each feature vs the others"
    att = table(a, "attribution")
    rows = att.filter((pl.col("metric") == metric) & pl.col("crossing_ratio").is_not_null()
                      & pl.col("other_ratio").is_not_null()) if att is not None else None
    if rows is None or not rows.height:
        return message("no feature split the compared requests into crossing and others", title)
    names = [f"{f}: {v}" for f, v in zip(rows["feature"], rows["verdict"], strict=True)]
    fig = go.Figure()
    for which, colour in (("crossing", "#D55E00"), ("other", "#0072B2")):
        fig.add_trace(go.Scatter(
            x=rows[f"{which}_ratio"].to_list(), y=names, mode="markers", marker={"color": colour, "size": 10},
            name="crossed it" if which == "crossing" else "did not cross",
            error_x=_error_bars(rows, f"{which}_ratio", f"{which}_lo", f"{which}_hi") | {"color": colour},
            hovertemplate="%{y}: x%{x:.3g}<extra>%{fullData.name}</extra>"))
    fig.add_vline(x=1, line={"color": "#000", "width": 1, "dash": "dash"})
    ratio_axis(fig, [v for w in ("crossing", "other") for c in ("ratio", "lo", "hi") for v in rows[f"{w}_{c}"]],
               title="after / before (log scale)")
    fig.update_yaxes(automargin=True)
    return layout(fig, title, height=max(240, 90 + 40 * len(names)))
