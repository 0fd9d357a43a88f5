"""Charts of a `capacity` Analysis: per pod, what it completed per day, its busiest hour's rate and what
it could complete at its running limit; and the cost per million tokens."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts.common import group_column, layout, log_axis, message, table


def _names(df: pl.DataFrame) -> list[str]:
    gcol = group_column(df, exclude=("deployment",))
    if gcol is None:
        return [str(d) for d in df["deployment"]]
    return [f"{d} / {g}" for d, g in zip(df["deployment"], df[gcol], strict=True)]


def _pod_bars(df: pl.DataFrame, series: tuple[tuple[str, str, str], ...], hover: str, axis_title: str,
              **bar: object) -> go.Figure:
    """Bars per pod, one group of them for each (column, name, colour) of `series`, on a log axis; `hover`
    the hover text before the series name; `bar` more go.Bar arguments (customdata)."""
    names = _names(df)
    fig = go.Figure()
    for col, name, colour in series:
        fig.add_trace(go.Bar(x=names, y=df[col].to_list(), name=name, marker_color=colour,
                             hovertemplate=hover + "<extra>" + name + "</extra>", **bar))
    fig.update_layout(barmode="group")
    log_axis(fig, [v for col, _, _ in series for v in df[col]], title=axis_title)
    fig.update_xaxes(tickangle=-20, automargin=True)
    return fig


def utilization(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Grouped bars per pod (log scale): completed per day, the busiest hour x 24, and the capacity per day;
    utilization in the hover text. From the `capacity` table."""
    title = title or "requests per day per pod: completed, busiest hour x 24, capacity"
    cap = table(a, "capacity")
    if cap is None:
        return message("no pod completed requests with known end times in this window", title)
    fig = _pod_bars(cap, (("completed_per_day", "completed per day", "#0072B2"),
                          ("busiest_hour_per_day", "busiest hour x 24", "#56B4E9"),
                          ("capacity_per_day", "capacity per day", "#E69F00")),
                    "%{x}: %{y:,.0f} (utilization %{customdata:.1%})", "requests per day (log scale)",
                    customdata=cap["utilization"].to_list())
    return layout(fig, title)


def cost(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Cost per million input and output tokens per pod at the observed load (the `cost` table; present
    when the analysis had a GPU-hour price)."""
    title = title or "cost per million tokens per pod, at the observed load"
    c = table(a, "cost")
    if c is None:
        return message("no GPU-hour cost configured, so no cost per token", title)
    fig = _pod_bars(c, (("usd_per_m_input", "input tokens", "#0072B2"),
                        ("usd_per_m_output", "output tokens", "#D55E00")),
                    "%{x}: $%{y:,.3g} per million", "USD per million tokens (log scale)")
    return layout(fig, title)
