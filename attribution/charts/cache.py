"""Charts of a `cache` Analysis: the prefix-reuse curve (hit ratio against LRU capacity, per definition, one
global cache and one per deployment) and the measured cached-token share per day and source."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts.common import layout, message, table

NAMES = {"block_weighted": "block-weighted", "token_weighted": "token-weighted",
         "mean_request_blocks": "mean per request (blocks)", "mean_request_tokens": "mean per request (tokens)"}
DASH = {"global": "solid", "per_deployment": "dash"}


def curve(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Hit ratio against capacity in tokens (log scale), one line per definition and scope; the unbounded cache
    as a dotted level per definition."""
    title = title or "prefix-reuse curve: LRU hit ratio against cache capacity"
    df = table(a, "curve")
    if df is None:
        return message("no request in this window carries block hashes", title)
    fig = go.Figure()
    for (scope, d), colour in zip(((s, d) for s in ("global", "per_deployment") for d in NAMES),
                                  ["#0072B2", "#E69F00", "#009E73", "#CC79A7"] * 2, strict=True):
        part = df.filter((pl.col("scope") == scope) & pl.col("capacity_tokens").is_not_null())
        if not part.height:
            continue
        fig.add_trace(go.Scatter(x=part["capacity_tokens"].to_list(), y=part[d].to_list(), mode="lines+markers",
                                 name=f"{NAMES[d]}, {scope.replace('_', ' ')}", line={"color": colour,
                                                                                     "dash": DASH[scope]},
                                 hovertemplate="%{x:,} tokens: %{y:.1%}<extra></extra>"))
    fig.update_xaxes(type="log", title="cache capacity (tokens, log scale)")
    fig.update_yaxes(tickformat=".0%", title="hit ratio", rangemode="tozero")
    return layout(fig, title)


def measured_by_day(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Cached-token share per UTC day, one line per measure and source (deployments and workloads summed)."""
    title = title or "measured cached-token share per day"
    df = table(a, "measured_by_day")
    if df is None:
        return message("no source in this window reports cached tokens or prefix-cache hits", title)
    per = (df.group_by("measure", "source", "day").agg(pl.col("queried_tokens", "cached_tokens").sum())
           .with_columns((pl.col("cached_tokens") / pl.col("queried_tokens")).alias("share")).sort("day"))
    fig = go.Figure()
    for (measure, source), part in sorted(per.group_by("measure", "source"), key=lambda g: g[0]):
        fig.add_trace(go.Scatter(x=part["day"].to_list(), y=part["share"].to_list(), mode="lines+markers",
                                 name=f"{measure} ({source})", hovertemplate="%{x}: %{y:.1%}<extra></extra>"))
    fig.update_yaxes(tickformat=".0%", title="cached share of prompt tokens", rangemode="tozero")
    return layout(fig, title)
