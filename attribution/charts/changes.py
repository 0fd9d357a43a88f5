"""Charts of a `changes` Analysis (attribution.report.changes): the distance between this window's and the
previous window's length distributions per group, and the latency ratios with intervals of either
comparison it holds (against the previous window, or the before/after inside the window)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from attribution.analyses import Analysis
from attribution.charts import compare
from attribution.charts.common import colours, group_column, label, layout, message, table

WHICH = {"week": "this window vs the previous one", "upgrade": "after vs before, inside this window"}


def drift(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Bars per group and length metric: the binned distance between the two windows' distributions, with
    the drift threshold as a dashed line (the `drift` table)."""
    title = title or "length distributions: distance from the previous window"
    d = table(a, "drift")
    rows = d.filter(pl.col("distance").is_not_null()) if d is not None else None
    if rows is None or not rows.height:
        return message("no group has requests in both windows", title)
    gcol = group_column(rows, exclude=("metric",)) or "metric"
    cmap = colours(rows["metric"].unique())
    fig = go.Figure()
    for (metric,), part in sorted(rows.partition_by("metric", as_dict=True).items()):
        fig.add_trace(go.Bar(
            x=[str(g) for g in part[gcol]], y=part["distance"].to_list(), name=label(metric),
            marker_color=cmap[metric], customdata=list(zip(part["p50_before"], part["p50_now"], part["status"],
                                                            strict=True)),
            hovertemplate="%{x}: distance %{y:.3f} (%{customdata[2]})<br>p50 %{customdata[0]:,.0f} -> "
                          "%{customdata[1]:,.0f}<extra>%{fullData.name}</extra>"))
    threshold = a.params.get("drift_threshold")
    if threshold is not None:
        fig.add_hline(y=threshold, line={"color": "#D55E00", "dash": "dash", "width": 1},
                      annotation_text=f"drift threshold {threshold:g}", annotation_position="top left")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1], title="distance (0 = same, 1 = disjoint)")
    return layout(fig, title)


def ratios(a: Analysis, *, which: str = "upgrade", title: str | None = None) -> go.Figure:
    """The latency ratios with 95% intervals of one comparison: `which` = "week" (this window vs the previous
    one) or "upgrade" (the before/after inside the window), as `charts.compare.ratios` draws them."""
    summary = a.tables.get(f"{which}_summary")
    cohorts = a.params.get("cohorts") or {}
    names = ({"before": cohorts.get("before"), "after": cohorts.get("after")} if which == "upgrade"
             else {"before": "previous window", "after": "this window"})
    title = title or f"latency, {WHICH[which]}: ratios (95% interval)"
    if summary is None:
        return message(f"no comparison {WHICH[which]}", title)
    return compare.ratios(Analysis("compare", names, {"summary": summary}), title=title)
