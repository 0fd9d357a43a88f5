"""Charts of an `arrivals` Analysis: requests per minute over time per group (the `per_minute` table, from
`arrivals(sel, timeseries=True)`), burstiness per group (gap CV and index of dispersion), and the hour-of-day
profile. Reshaping only: the numbers are the analysis'."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts.common import colours, grouped_by, layout, message, table

OVERALL = "(all)"


def per_minute(a: Analysis, *, title: str | None = None, overall: bool = False) -> go.Figure:
    """Requests per minute over time, one line per group (the mean over each bucket; hover shows the busiest
    minute). Without `overall` the (all) line is left out. Needs the `per_minute` table."""
    bucket = a.params.get("bucket_minutes", 1)
    title = title or ("requests per minute" + (f" ({bucket}-minute buckets: mean, hover for the busiest)"
                                              if bucket and bucket > 1 else ""))
    ts = table(a, "per_minute")
    if ts is None:
        return message("no per-minute series: run arrivals(sel, timeseries=True)", title)
    g = grouped_by(ts)
    if g is None:
        return message("no group column in the per-minute series", title)
    if not overall and ts[g].n_unique() > 1:
        ts = ts.filter(pl.col(g) != OVERALL)
    cmap = colours(ts[g].unique())
    fig = go.Figure()
    for (name,), part in sorted(ts.partition_by(g, as_dict=True).items()):
        fig.add_trace(go.Scatter(
            x=part["ts"].to_list(), y=part["rpm_mean"].to_list(), customdata=part["rpm_max"].to_list(),
            mode="lines", line={"color": cmap[str(name)], "width": 1.3}, line_shape="hv", name=str(name),
            hovertemplate="%{x|%a %d %b %H:%M} UTC: %{y:,.1f}/min (busiest minute %{customdata:,})"
                          "<extra>%{fullData.name}</extra>"))
    fig.update_yaxes(rangemode="tozero", title="requests per minute")
    return layout(fig, title)


def burstiness(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Per group: the inter-arrival CV and the index of dispersion at 1, 10 and 60 s (1 = Poisson, dashed)."""
    title = title or "burstiness per group (1 = Poisson)"
    rates = table(a, "rates")
    if rates is None:
        return message("no arrivals in this window", title)
    g = grouped_by(rates)
    names = [str(x) for x in rates[g].to_list()]
    fig = go.Figure()
    for col, text, colour in (("gap_cv", "gap CV", "#0072B2"), ("idc_1s", "IDC 1 s", "#56B4E9"),
                              ("idc_10s", "IDC 10 s", "#E69F00"), ("idc_60s", "IDC 60 s", "#D55E00")):
        fig.add_trace(go.Bar(x=names, y=rates[col].to_list(), name=text, marker_color=colour,
                             hovertemplate="%{x}: %{y:.3g}<extra>" + text + "</extra>"))
    fig.add_hline(y=1, line_dash="dash", line_color="#555")
    fig.update_yaxes(type="log", title="CV / index of dispersion")
    fig.update_layout(barmode="group")
    return layout(fig, title)


def hour_profile(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Mean requests per clock hour by hour of day, one line per group (the `diurnal` table)."""
    tz = a.params.get("tz", "UTC")
    title = title or f"requests per hour by hour of day ({tz})"
    prof = table(a, "diurnal")
    if prof is None:
        return message("no arrivals in this window", title)
    g = grouped_by(prof)
    if prof[g].n_unique() > 1:
        prof = prof.filter(pl.col(g) != OVERALL)
    cmap = colours(prof[g].unique())
    fig = go.Figure()
    for (name,), part in sorted(prof.partition_by([g], as_dict=True).items()):
        part = part.sort("hour")
        fig.add_trace(go.Scatter(x=part["hour"].to_list(), y=part["mean"].to_list(), mode="lines+markers",
                                 name=str(name), line={"color": cmap[str(name)]},
                                 hovertemplate="%{x}:00: %{y:,.1f}/h<extra>%{fullData.name}</extra>"))
    fig.update_xaxes(title="hour of day", dtick=3, range=[-0.5, 23.5])
    fig.update_yaxes(rangemode="tozero", title="requests per hour")
    return layout(fig, title)
