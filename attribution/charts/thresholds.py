"""Charts of a `thresholds` Analysis: per feature, the share of requests over its threshold next to the share
of prefill tokens they carry; the share per day for the features that split the traffic; and for
step-scoped features the share of time each pod spent over the threshold."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts.common import colours, layout, message, table


def crossings(a: Analysis, *, only_crossed: bool = True, title: str | None = None) -> go.Figure:
    """Horizontal bars per request-scoped feature: share of its engines' requests that crossed, and share of
    all requests' prefill tokens those requests carry (the `requests` table). `only_crossed` leaves out features no
    request crossed."""
    title = title or "features: requests over the threshold, and their share of prefill tokens"
    req = table(a, "requests")
    if req is not None and only_crossed:
        req = req.filter(pl.col("crossed") > 0)
    if req is None or not req.height:
        return message("no request crossed a feature threshold in this window", title)
    req = req.sort("share_of_engine_requests", "feature", descending=[False, True])
    names = [f"{f} ({op} {t})" for f, op, t in zip(req["feature"], req["op"], req["threshold"], strict=True)]
    fig = go.Figure()
    fig.add_trace(go.Bar(y=names, x=req["share_of_engine_requests"].to_list(), orientation="h",
                         name="share of its engines' requests",
                         marker_color="#0072B2", customdata=req["crossed"].to_list(),
                         hovertemplate="%{y}: %{x:.2%} (%{customdata:,} requests)<extra></extra>"))
    fig.add_trace(go.Bar(y=names, x=req["prefill_token_share_of_all_requests"].to_list(), orientation="h",
                         name="share of all prefill tokens", marker_color="#E69F00",
                         hovertemplate="%{y}: %{x:.2%} of prefill tokens<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickformat=".0%", range=[0, 1.02])
    fig.update_yaxes(automargin=True)
    return layout(fig, title, height=max(260, 70 + 42 * len(names)))


def by_day(a: Analysis, *, features: list[str] | None = None, title: str | None = None) -> go.Figure:
    """Share of requests over each feature's threshold per UTC day (the `by_day` table); by default the
    features that crossed on some requests but not on all of them."""
    title = title or "requests over the threshold, per day"
    days = table(a, "by_day")
    if days is None:
        return message("no per-day crossings in this window", title)
    req = table(a, "requests")
    if features is None and req is not None:  # as `attribution thresholds` picks them
        features = req.filter((pl.col("crossed") > 0) & (pl.col("crossed") < pl.col("requests")))["feature"].to_list()
    rows = days.filter(pl.col("feature").is_in(features or []))
    if not rows.height:
        return message("no feature split the traffic (each crossed on every request or on none)", title)
    cmap = colours(rows["feature"].unique())
    fig = go.Figure()
    for (feature,), part in sorted(rows.partition_by("feature", as_dict=True).items()):
        part = part.sort("day")
        fig.add_trace(go.Scatter(x=[str(d) for d in part["day"]], y=part["share_of_engine_requests"].to_list(),
                                 mode="lines+markers",
                                 name=feature, line={"color": cmap[feature]}, customdata=part["crossed"].to_list(),
                                 hovertemplate="%{x}: %{y:.2%} (%{customdata:,})<extra>%{fullData.name}</extra>"))
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", title="share of its engines' requests")
    fig.update_xaxes(type="category", title="day (UTC)")
    return layout(fig, title)


def steps(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Step-scoped features: the share of each pod's time spent over the threshold (the `steps` table)."""
    title = title or "step-scoped features: time over the threshold, per pod"
    st = table(a, "steps")
    if st is None:
        return message("no step lines carry a step-scoped feature's quantity in this window", title)
    st = st.with_columns(pl.col("deployment").fill_null("(none)"))  # the analyses' word for a missing pod
    cmap = colours(st["deployment"].unique())
    fig = go.Figure()
    for (dep,), part in sorted(st.partition_by("deployment", as_dict=True).items()):
        part = part.sort("feature")
        fig.add_trace(go.Bar(y=part["feature"].to_list(), x=part["time_share"].to_list(), orientation="h", name=dep,
                             marker_color=cmap[dep], customdata=part["episodes"].to_list(),
                             hovertemplate="%{y}: %{x:.2%} of the time (%{customdata:,} episodes)"
                                           "<extra>%{fullData.name}</extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickformat=".1%", rangemode="tozero")
    fig.update_yaxes(automargin=True)
    return layout(fig, title, height=max(260, 80 + 30 * st.height))
