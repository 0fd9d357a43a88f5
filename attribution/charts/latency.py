"""Charts of a `latency` Analysis: percentiles per group for each phase (a `latency` of a selection grouped by
label or version draws the cohorts side by side: before/after), the same per prompt-length bucket, and
goodput against the SLO with the share meeting each term alone."""

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

METRICS = ("ttft_s", "tpot_s", "e2e_s")


def percentiles(a: Analysis, *, metrics: tuple[str, ...] = METRICS, quantiles: tuple[str, ...] = ("p50", "p90", "p95", "p99"),
                title: str | None = None) -> go.Figure:
    """One panel per metric (log scale): grouped bars of `quantiles` per group. From the `percentiles` table;
    metrics the logs do not give are left out."""
    title = title or "latency percentiles per group"
    pct = table(a, "percentiles")
    if pct is None:
        return message("no completed requests with timings in this window", title)
    present = [m for m in metrics if pct.filter(pl.col("metric") == m).height]
    if not present:
        return message("the logs give none of " + ", ".join(label(m) for m in metrics), title)
    gcol = group_column(pct, exclude=("metric",))
    fig = make_subplots(rows=1, cols=len(present), subplot_titles=[label(m) for m in present],
                        horizontal_spacing=0.06)
    for col, m in enumerate(present, start=1):
        rows = pct.filter(pl.col("metric") == m)
        names = [str(v) for v in rows[gcol]] if gcol else ["all"] * rows.height
        for q in [q for q in quantiles if q in pct.columns]:
            fig.add_trace(go.Bar(x=names, y=rows[q].to_list(), name=q, legendgroup=q, showlegend=col == 1,
                                 marker_color=QUANTILE_COLOURS.get(q),
                                 hovertemplate="%{x}: %{y:.3g} s<extra>" + f"{label(m)} {q}</extra>"), row=1, col=col)
        log_axis(fig, [v for q in quantiles if q in pct.columns for v in rows[q]], row=1, col=col)
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickangle=-25, automargin=True)
    fig.update_annotations(font_size=12)
    return layout(fig, title, height=400, panels=True)


def by_bucket(a: Analysis, *, metric: str = "ttft_s", quantile: str = "p90", title: str | None = None) -> go.Figure:
    """`quantile` of `metric` per prompt-length bucket, one line per group (log scale), from `buckets`."""
    title = title or f"{label(metric)} {quantile} by prompt length"
    buckets = table(a, "buckets")
    rows = buckets.filter(pl.col("metric") == metric) if buckets is not None else None
    if rows is None or not rows.height:
        return message(f"no {label(metric)} in this window", title)
    gcol = group_column(rows, exclude=("metric", "bucket"))
    order = rows.select("bucket", "bucket_lo").unique().sort("bucket_lo")["bucket"].to_list()
    parts = rows.partition_by(gcol, as_dict=True) if gcol else {("all",): rows}
    cmap = colours(k[0] for k in parts)
    fig = go.Figure()
    for (name,), part in sorted(parts.items(), key=lambda kv: str(kv[0][0])):
        part = part.sort("bucket_lo")
        fig.add_trace(go.Scatter(
            x=part["bucket"].to_list(), y=part[quantile].to_list(), customdata=part["requests"].to_list(),
            mode="lines+markers", name=str(name), line={"color": cmap[str(name)]},
            hovertemplate="%{x} tokens: %{y:.3g} s (%{customdata:,} requests)<extra>%{fullData.name}</extra>"))
    fig.update_xaxes(title="prompt tokens", categoryorder="array", categoryarray=order)
    log_axis(fig, rows[quantile], title=f"{label(metric)} {quantile}")
    return layout(fig, title)


def goodput(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Per group: the share of requests meeting every SLO term at once (bars) and each term alone (markers),
    from the `goodput` and `slo_terms` tables."""
    slo = a.params.get("slo") or {}
    terms = " and ".join(f"{m} <= {v:g} s" for m, v in (slo.get("terms") or {}).items())
    title = title or (f"goodput: share meeting {terms}" if terms else "goodput")
    good = table(a, "goodput")
    if good is None:
        return message("no completed requests in this window", title)
    gcol = group_column(good)
    names = [str(v) for v in good[gcol]] if gcol else ["all"] * good.height
    fig = go.Figure(go.Bar(x=names, y=good["good_share_of_judged_requests"].to_list(),
                           name="every term (goodput, share of judged requests)",
                           marker_color="#0072B2", customdata=good["goodput_per_s"].to_list(),
                           hovertemplate="%{x}: %{y:.1%} (%{customdata:.3g} good requests/s)<extra></extra>"))
    per_term = table(a, "slo_terms")
    if per_term is not None:
        tcol = group_column(per_term, exclude=("term",))
        symbols = ("diamond", "circle", "square", "triangle-up")
        for i, ((term,), part) in enumerate(sorted(per_term.partition_by("term", as_dict=True).items())):
            xs = [str(v) for v in part[tcol]] if tcol else ["all"] * part.height
            fig.add_trace(go.Scatter(x=xs, y=part["met_share"].to_list(), mode="markers", name=f"{term} alone",
                                     marker={"symbol": symbols[i % len(symbols)], "size": 11, "color": "#D55E00"
                                             if i == 0 else "#009E73", "line": {"width": 1, "color": "#fff"}},
                                     hovertemplate="%{x}: %{y:.1%}<extra>" + f"{term} alone</extra>"))
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05], title="share of requests")
    fig.update_xaxes(automargin=True)
    return layout(fig, title)
