"""Charts of a `memsplit` Analysis: per engine start, the cache memory split between the recurrent-state pool
and the KV pool now and as recommended, against what the traffic needs; and the what-if replay (queueing
and capacity under each split)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from attribution.analyses import Analysis
from attribution.charts.common import layout, message, table
from attribution.labels import version_label

GIB = 2**30
POOLS = (("state", "#CC79A7"), ("KV", "#0072B2"))


def _start_names(df: pl.DataFrame, current: pl.DataFrame) -> list[str]:
    """`deployment` over `engine version, from date` per start_id (two lines: several starts share the axis)."""
    info = {r["start_id"]: r for r in current.iter_rows(named=True)}
    out = []
    for sid in df["start_id"]:
        r = info.get(sid, {})
        started = f", {r['started']:%d %b}" if r.get("started") is not None else ""
        out.append(f"{r.get('deployment', sid)}<br>{version_label(r.get('engine'), r.get('version')) or ''}{started}")
    return out


def pools(a: Analysis, *, title: str | None = None) -> go.Figure:
    """Per engine start, three stacked bars in GiB per GPU: the current split (state pool + KV pool), the
    recommended one, and what the traffic needs (state for the demanded concurrency + KV for its live
    tokens), with the start's cache memory as a marker. From `current` and `recommendation`."""
    title = title or "memory per engine start: state pool and KV pool, now / recommended / needed"
    cur, rec = table(a, "current"), table(a, "recommendation")
    if cur is None or rec is None:
        return message("no engine start with a known memory layout", title)
    rec = rec.join(cur.select("start_id", "state_pool_bytes", "kv_pool_bytes"), on="start_id", how="left")
    names = _start_names(rec, cur)
    fig = go.Figure()
    bars = (("now", "state_pool_bytes", "kv_pool_bytes"), ("recommended", "state_bytes", "kv_bytes"),
            ("needed", "need_state_bytes", "need_kv_bytes"))
    for split, state_col, kv_col in bars:
        for pool, colour in POOLS:
            col = state_col if pool == "state" else kv_col
            fig.add_trace(go.Bar(
                x=[names, [split] * len(names)], y=(rec[col] / GIB).to_list(), name=f"{pool} pool",
                legendgroup=pool, showlegend=split == "now", marker_color=colour,
                marker_pattern_shape="/" if split == "needed" else "",
                hovertemplate="%{x}: %{y:.2f} GiB<extra>" + f"{pool} pool</extra>"))
    fig.add_trace(go.Scatter(x=[names, ["recommended"] * len(names)], y=(rec["cache_bytes"] / GIB).to_list(),
                             mode="markers", name="cache memory", marker={"symbol": "line-ew-open", "size": 36,
                                                                          "color": "#000", "line": {"width": 2}},
                             hovertemplate="%{x}: %{y:.2f} GiB for the caches<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(tickangle=0, tickfont={"size": 10})
    fig.update_yaxes(title="GiB per GPU", rangemode="tozero")
    return layout(fig, title, height=420)


def whatif(a: Analysis, *, title: str | None = None) -> go.Figure:
    """The replay of each start's arrivals: queue p99 (left) and capacity per day (right) under the current
    and the recommended split, next to the measured queue where the logs give it. From `whatif`."""
    title = title or "what-if: the arrivals replayed under the current and the recommended split"
    w = table(a, "whatif")
    cur = table(a, "current")
    if w is None or cur is None:
        return message("no what-if replay (run memsplit with run_whatif=True)", title)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("queue p99 (s)", "capacity per day (requests)"),
                        horizontal_spacing=0.08)
    colours = {("measured", "current"): "#999999", ("simulated", "current"): "#0072B2",
               ("simulated", "recommended"): "#D55E00"}
    for (source, split), colour in colours.items():
        part = w.filter((pl.col("source") == source) & (pl.col("split") == split))
        if not part.height:
            continue
        names = _start_names(part, cur)
        name = f"{split} ({source})"
        for col, metric in ((1, "queue_p99"), (2, "capacity_per_day")):
            if part[metric].is_null().all():
                continue
            fig.add_trace(go.Bar(x=names, y=part[metric].to_list(), name=name, legendgroup=name,
                                 showlegend=col == 1, marker_color=colour,
                                 hovertemplate="%{x}: %{y:,.3g}<extra>" + name + "</extra>"), row=1, col=col)
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickangle=-20, automargin=True)
    fig.update_annotations(font_size=12)
    return layout(fig, title, height=420, panels=True)
