"""Chart of capacity's `spend` table: what the gateway billed next to what the GPUs cost, per pod (totals over
the span, where a GPU-hour price gives the GPU cost), else per million output tokens (per group)."""

from __future__ import annotations

import plotly.graph_objects as go

from attribution.analyses import Analysis
from attribution.analyses.spend import summary
from attribution.charts.common import group_column, layout, log_axis, message, table


def billed_vs_gpu(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Grouped bars per pod (log scale): USD billed by the gateway and the GPU cost over the same span; where
    there is no GPU total (groups, or no GPU-hour price), USD per million output tokens, billed and GPU."""
    spend = table(a, "spend")
    if spend is None:
        return message("no request of this window was logged by a gateway", title or "gateway spend")
    if spend["billed_requests"].sum() == 0:
        return message(summary(spend), title or "gateway spend")
    gcol = group_column(spend, exclude=("deployment", "billing", "cost_sources"))
    names = [str(d) if gcol is None else f"{d} / {g}" for d, g in
             zip(spend["deployment"], spend[gcol] if gcol else spend["deployment"], strict=True)]
    totals = "gpu_usd" in spend.columns and spend["gpu_usd"].null_count() < spend.height
    cols = (("billed_usd", "billed by the gateway", "#E69F00"), ("gpu_usd", "GPU cost", "#0072B2")) if totals \
        else (("billed_usd_per_m_output", "billed by the gateway", "#E69F00"),
              ("gpu_usd_per_m_output", "GPU cost", "#0072B2"))
    fig = go.Figure()
    for col, name, colour in cols:
        if col in spend.columns:
            fig.add_trace(go.Bar(x=names, y=spend[col].to_list(), name=name, marker_color=colour,
                                 hovertemplate="%{x}: $%{y:,.4g}<extra>" + name + "</extra>"))
    fig.update_layout(barmode="group")
    unit = "USD over the span" if totals else "USD per million output tokens"
    log_axis(fig, [v for col, _, _ in cols if col in spend.columns for v in spend[col]],
             title=f"{unit} (log scale)")
    fig.update_xaxes(tickangle=-20, automargin=True)
    return layout(fig, title or ("billed by the gateway against the GPU cost, per pod" if totals
                                 else "billed by the gateway against the GPU cost, per million output tokens"))
