"""Charts of a `lengths` Analysis: the log-binned histogram per group, by request count and by token volume
side by side (a few long prompts can carry most of the prefill work), and the percentiles per group."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from attribution.analyses import Analysis
from attribution.charts.common import (
    QUANTILE_COLOURS,
    colours,
    group_column,
    label,
    layout,
    log_axis,
    message,
    table,
)

WEIGHTS = {"requests": ("request_share", "share of requests"), "tokens": ("token_share", "share of tokens")}


def _bins(a: Analysis, metric: str) -> tuple[pl.DataFrame | None, str | None]:
    hist = table(a, "histogram")
    if hist is None:
        return None, None
    # a length of 0 (bin -1) has no place on a log axis
    rows = hist.filter((pl.col("metric") == metric) & (pl.col("lo") > 0))
    return (rows, group_column(rows, exclude=("metric",))) if rows.height else (None, None)


def _steps(rows: pl.DataFrame, y: str) -> tuple[list[int], list[float], list[str]]:
    """Step-line points: each bin drawn from its lo to its hi (the last bin closed at its hi)."""
    rows = rows.sort("lo")
    xs = rows["lo"].to_list() + [rows["hi"][-1]]
    ys = rows[y].to_list() + [rows[y][-1]]
    text = [f"{lo:,}-{hi - 1:,} tokens" for lo, hi in zip(rows["lo"], rows["hi"], strict=True)]
    return xs, ys, text + [text[-1]]


def _traces(fig: go.Figure, rows: pl.DataFrame, gcol: str | None, y: str, *, col: int | None = None,
            legend: bool = True) -> None:
    parts = rows.partition_by(gcol, maintain_order=True, as_dict=True) if gcol else {("all",): rows}
    cmap = colours(k[0] for k in parts)
    for (name,), part in sorted(parts.items(), key=lambda kv: str(kv[0][0])):
        xs, ys, text = _steps(part, y)
        trace = go.Scatter(
            x=xs, y=ys, text=text, mode="lines", line={"shape": "hv", "width": 2, "color": cmap[str(name)]},
            name=str(name), legendgroup=str(name), showlegend=legend,
            hovertemplate="%{text}<br>%{y:.2%}<extra>%{fullData.name}</extra>",
        )
        if col is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=1, col=col)


def histogram(a: Analysis, *, metric: str = "prompt_tokens", weight: str = "requests",
              title: str | None = None) -> go.Figure:
    """One step line per group over log-spaced length bins; `weight` = "requests" (share of requests per bin)
    or "tokens" (share of the tokens). Needs the `histogram` table of `attribution.analyses.lengths`."""
    y, ytitle = WEIGHTS[weight]
    title = title or f"{label(metric)}: {ytitle} per length bin"
    rows, gcol = _bins(a, metric)
    if rows is None:
        return message(f"no {label(metric)} in this window", title)
    fig = go.Figure()
    _traces(fig, rows, gcol, y)
    fig.update_xaxes(type="log", title=f"{label(metric)} (log scale)")
    fig.update_yaxes(title=ytitle, tickformat=".0%", rangemode="tozero")
    return layout(fig, title)


def count_vs_tokens(a: Analysis, *, metric: str = "prompt_tokens", title: str | None = None) -> go.Figure:
    """Two panels over the same log-spaced bins: the share of requests and the share of tokens per length,
    one line per group. Where the right panel sits further right, long requests carry the work."""
    title = title or f"{label(metric)}: share of requests (left) and of tokens (right) per length"
    rows, gcol = _bins(a, metric)
    if rows is None:
        return message(f"no {label(metric)} in this window", title)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("share of requests", "share of tokens"))
    _traces(fig, rows, gcol, "request_share", col=1)
    _traces(fig, rows, gcol, "token_share", col=2, legend=False)
    fig.update_xaxes(type="log", title=f"{label(metric)} (log scale)")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    fig.update_annotations(font_size=12)
    return layout(fig, title, panels=True)


def percentiles(a: Analysis, *, metric: str = "prompt_tokens", title: str | None = None) -> go.Figure:
    """p50 / p90 / p95 / p99 / max per group as grouped bars (log scale), from the `stats` table."""
    title = title or f"{label(metric)}: percentiles per group"
    stats = table(a, "stats")
    rows = stats.filter(pl.col("metric") == metric) if stats is not None else None
    if rows is None or not rows.height:
        return message(f"no {label(metric)} in this window", title)
    gcol = group_column(rows, exclude=("metric",))
    names = [str(v) for v in rows[gcol]] if gcol else ["all"] * rows.height
    fig = go.Figure()
    for q in [c for c in ("p50", "p90", "p95", "p99", "max") if c in rows.columns]:
        fig.add_trace(go.Bar(x=names, y=rows[q].to_list(), name=q, marker_color=QUANTILE_COLOURS[q],
                             hovertemplate="%{x}: %{y:,.0f}<extra>" + q + "</extra>"))
    fig.update_layout(barmode="group")
    log_axis(fig, [v for q in ("p50", "p90", "p95", "p99", "max") if q in rows.columns for v in rows[q]],
             title=f"{label(metric)} (log scale)")
    return layout(fig, title)
