"""Charts of a `concurrency` Analysis: running and waiting requests and live KV tokens over time per pod (the
`timeseries` table, from `concurrency(sel, timeseries=True)`), and the per-pod percentiles against the
configured running limit. Where a pod's queue time is unknown its requests are drawn as `in system`, and its
engine's step lines (when it prints them) give running, waiting and KV tokens as a `sampled` series."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from attribution.analyses import Analysis
from attribution.analyses.common import percentile_columns
from attribution.charts.common import QUANTILE_COLOURS, colours, label, layout, message, table

PANELS = (("running", "running requests (max per bucket)"), ("waiting", "waiting requests (max per bucket)"),
          ("kv_tokens", "live KV tokens (max per bucket)"))


def _split_unknown(a: Analysis) -> set[str]:
    """Pods whose requests do not say when they were admitted: the sweep cannot split running from waiting."""
    deps = table(a, "deployments")
    if deps is None:
        return set()
    return set(deps.filter(pl.col("split_known") == 0)["deployment"].to_list())


def over_time(a: Analysis, *, deployments: list[str] | None = None, title: str | None = None) -> go.Figure:
    """Three stacked panels sharing the time axis: running, waiting and live KV tokens per pod, the maximum
    in each time bucket. Pods whose waiting/running split is unknown show requests in system in the first
    panel (dotted) and nothing in the other two. Needs the `timeseries` table."""
    title = title or "concurrency over time, per pod"
    ts = table(a, "timeseries")
    if ts is None:
        return message("no time series: run concurrency(sel, timeseries=True)", title)
    if deployments:
        ts = ts.filter(pl.col("deployment").is_in(deployments))
    unknown = _split_unknown(a)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=[t for _, t in PANELS])
    # a row whose source names no deployment is drawn as "(none)", the word the analyses and filters use
    ts = ts.with_columns(pl.col("deployment").fill_null("(none)"), pl.col("source").fill_null("exact"))
    cmap = colours(ts["deployment"].unique())
    for (dep, source), part in sorted(ts.partition_by("deployment", "source", as_dict=True).items()):
        part = part.sort("ts")
        name = dep + ("" if source == "exact" else f" ({source})")
        colour = cmap[dep]
        in_system = dep in unknown and source == "exact"
        for row, (metric, _) in enumerate(PANELS, start=1):
            if in_system and metric != "running":
                continue
            col = "in_system_max" if in_system else f"{metric}_max"
            fig.add_trace(go.Scatter(
                x=part["ts"].to_list(), y=part[col].to_list(), mode="lines", line_shape="hv",
                line={"color": colour, "width": 1.5, "dash": "dot" if in_system else "solid"},
                name=name + (" (in system)" if in_system else ""), legendgroup=dep, showlegend=row == 1,
                hovertemplate="%{x|%a %d %b %H:%M} UTC: %{y:,.0f}<extra>%{fullData.name}</extra>",
            ), row=row, col=1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_annotations(font_size=12)
    return layout(fig, title, height=620, panels=True)


def peaks(a: Analysis, *, metric: str = "running", title: str | None = None) -> go.Figure:
    """Per pod: the time-weighted percentiles (p50 / p90 / p99 and the chosen ones) and the peak of `metric` (running, waiting, in_system,
    kv_tokens), from the `pods` table, with each pod's configured running limit as a marker. A pod without
    `metric` (its split is unknown) shows in_system instead, named so."""
    title = title or f"{label(metric)} requests per pod: time-weighted percentiles, peak, limit"
    pods = table(a, "pods")
    if pods is None:
        return message("no deployments in this window", title)
    rows = pods.filter(pl.col("metric") == metric)
    if metric == "running":
        missing = pods.filter((pl.col("metric") == "in_system")
                              & ~pl.col("deployment").is_in(rows["deployment"].to_list()))
        rows = pl.concat([rows, missing]).sort("deployment")
    if not rows.height:
        return message(f"no {label(metric)} figures in this window", title)
    names = [f"{d}<br>{label(m)}, {s}" for d, m, s in zip(rows["deployment"], rows["metric"], rows["source"],
                                                          strict=True)]
    fig = go.Figure()
    for q in [*percentile_columns(rows), "peak"]:
        fig.add_trace(go.Bar(y=names, x=rows[q].to_list(), name=q, marker_color=QUANTILE_COLOURS.get(q, "#999999"),
                             orientation="h", hovertemplate="%{y}: %{x:,.4g}<extra>" + q + "</extra>"))
    deps = table(a, "deployments")
    if metric in ("running", "in_system") and deps is not None:
        limit = dict(zip(deps["deployment"], deps["running_limit"], strict=True))
        ys = [limit.get(d) for d in rows["deployment"]]
        if any(v is not None for v in ys):
            fig.add_trace(go.Scatter(y=names, x=ys, mode="markers", name="running limit",
                                     marker={"symbol": "line-ns-open", "size": 34, "color": "#000",
                                             "line": {"width": 2}},
                                     hovertemplate="%{y}: limit %{x}<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title=label(metric), rangemode="tozero")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return layout(fig, title, height=max(260, 60 + 70 * len(names)))
