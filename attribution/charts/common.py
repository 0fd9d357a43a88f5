"""What every chart builder shares: the look (one template, one palette with a stable colour per name),
the figure for a table that is missing or empty (a chart that says why instead of an error), and the
lookups that find an Analysis' group column. Reshaping only: no numbers are computed here."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from functools import cache

import plotly.graph_objects as go
import polars as pl
from plotly.basedatatypes import BasePlotlyType

from attribution.analyses import Analysis
from attribution.errors import AttributionError

# Colour-blind-safe qualitative palette (Okabe-Ito, then Tableau for more names).
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
    "#4E79A7", "#F28E2B", "#59A14F", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F",
)
QUANTILE_COLOURS = {"p50": "#56B4E9", "p90": "#0072B2", "p95": "#CC79A7", "p99": "#D55E00", "p99_9": "#882255", "max": "#555555",
                    "mean": "#009E73", "peak": "#882255"}
HEIGHT = 360
TEMPLATE = "plotly_white"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif"
# Columns an analysis table can be grouped by (`name_groups` in attribution.analyses.common).
GROUP_COLUMNS = ("workload", "model", "deployment", "label", "day", "version", "group")


def colours(names: Iterable[object]) -> dict[str, str]:
    """A colour per name, by sorted order: the same names get the same colours in every chart."""
    ordered = sorted({str(n) for n in names})
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(ordered)}


@cache
def _template_json() -> str:
    """The template as plotly resolves `template=TEMPLATE` (its keys in the same order), as JSON, once:
    assigning the name makes plotly deep-copy and re-validate the whole template on every figure (20-70 ms
    CPU each, about 40% of a small report's time)."""
    return json.dumps(go.Figure(layout={"template": TEMPLATE}).layout.template.to_plotly_json())


def apply_template(fig: go.Figure) -> go.Figure:
    """Give `fig` the common template without validating it again: the same value `template=TEMPLATE`
    gives (a test checks), as a fresh dict per figure so that editing one figure's template never touches
    another's. Validation is off only for this one assignment, as plotly does for its default template."""
    lo = fig.layout
    before = lo._validate
    lo._validate = False
    try:
        lo.template = json.loads(_template_json())
    finally:
        lo._validate = before
    return fig


def _merged(old: object, new: object) -> object:
    """`new` laid over `old` key by key, as `update_layout` merges a nested property."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    return {**old, **{k: _merged(old.get(k), v) for k, v in new.items()}}


def set_layout(fig: go.Figure, **props: object) -> go.Figure:
    """`fig.update_layout(**props)` for top-level layout properties, at a tenth of the CPU: each property is
    merged with its current value and assigned (validated) directly, skipping the batch-update pass that
    re-walks every path (about 20 ms per call)."""
    lo = fig.layout
    for key, value in props.items():
        if isinstance(value, dict) and key in lo:
            value = _merged(lo[key].to_plotly_json(), value)
        elif value is None and isinstance(lo[key], BasePlotlyType):
            for sub in lo[key].to_plotly_json():  # update_layout empties a set nested property, keeping {}
                lo[key][sub] = None
            continue
        lo[key] = value
    return fig


def layout(fig: go.Figure, title: str | None = None, *, height: int = HEIGHT, legend: bool = True,
           panels: bool = False) -> go.Figure:
    """The common look: white template, small margins, the legend between the title and the plot (higher
    when `panels` have titles of their own)."""
    top = (46 if title else 16) + (30 if legend else 0) + (20 if panels else 0)
    apply_template(fig)
    legend_box = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "xanchor": "left",
                  "yref": "container", "font": {"size": 11}}
    if legend:  # just below the title, in the top margin
        legend_box.update(yanchor="top", y=1 - (38 if title else 6) / (height + top - 70))
    set_layout(
        fig,
        title={"text": title, "x": 0.01, "xanchor": "left", "y": 1, "yanchor": "top", "pad": {"t": 12},
               "yref": "container", "font": {"size": 15}} if title else None,
        height=height + top - 70,
        margin={"l": 60, "r": 20, "t": top, "b": 50},
        font={"family": FONT, "size": 12},
        showlegend=legend,
        legend=legend_box,
        hoverlabel={"namelength": -1},
    )
    return fig


def message(text: str, title: str | None = None, *, height: int = 160) -> go.Figure:
    """A figure holding only `text`: for a table the analysis did not produce or that has no rows."""
    fig = go.Figure()
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 13, "color": "#666"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return layout(fig, title, height=height, legend=False)


def table(a: Analysis, name: str) -> pl.DataFrame | None:
    """The analysis' table `name`, or None when it is missing or has no rows."""
    df = a.tables.get(name)
    return df if df is not None and df.height else None


def group_column(df: pl.DataFrame, exclude: Iterable[str] = ()) -> str | None:
    """The column the analysis grouped by (workload, day, ...), if the table has one."""
    skip = set(exclude)
    return next((c for c in GROUP_COLUMNS if c in df.columns and c not in skip), None)


def grouped_by(df: pl.DataFrame, exclude: Iterable[str] = ()) -> str:
    """The column a grouped analysis table (one row per group) is grouped by; it always has one."""
    col = group_column(df, exclude)
    if col is None:
        raise AttributionError(f"a grouped table has none of the group columns {GROUP_COLUMNS}: {df.columns}")
    return col


def label(name: str) -> str:
    """`ttft_s` -> `TTFT (s)`, `prompt_tokens` -> `prompt tokens`: axis and legend text."""
    names = {"queue_s": "queue (s)", "ttft_s": "TTFT (s)", "tpot_s": "TPOT (s)", "e2e_s": "end-to-end (s)",
             "prompt_tokens": "prompt tokens", "output_tokens": "output tokens", "cached_tokens": "cached tokens",
             "kv_tokens": "live KV tokens", "in_system": "in system", "seen_at_arrival": "seen at arrival"}
    return names.get(name, name.replace("_", " "))


def log_ticks(values: Iterable[float | None], *, include: tuple[float, ...] = ()) -> list[float]:
    """Tick values on the 1-2-5 sequence spanning the positive `values` (and `include`), powers of ten only
    when that would be more than nine ticks: a log axis whose data sit inside one decade still gets
    several labelled ticks (Plotly's `dtick=1` shows one, its automatic ticks label minor digits "2", "5")."""
    vals = [v for v in values if v is not None and v > 0] + list(include)
    if not vals:
        return []
    lo, hi = min(vals), max(vals)
    ticks = [m * 10.0**e for e in range(-6, 10) for m in (1, 2, 5)]
    inside = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5]
    if len(inside) > 9:  # a wide range: powers of ten only
        inside = [t for t in inside if f"{t:.0e}".startswith("1")]
    return inside


def log_axis(fig: go.Figure, values: Iterable[float | None], *, axis: str = "y", **props: object) -> go.Figure:
    """A log axis from the power of ten below the smallest of `values` to 1.5x the largest, with `log_ticks`,
    labelled as Plotly writes numbers (10k, 20k, 0.5). The fixed bottom is what a bar on a log axis is
    measured from: Plotly's own range hugs the data, so bars of 8.70 and 8.79 would look 10x apart."""
    vals = [v for v in values if v is not None and v > 0]
    if vals:
        bottom = 10.0 ** math.floor(math.log10(min(vals)))
        props = {"tickvals": log_ticks(vals, include=(bottom,)),
                 "range": [math.log10(bottom), math.log10(max(vals) * 1.5)], **props}
    getattr(fig, f"update_{axis}axes")(type="log", **props)
    return fig


def ratio_axis(fig: go.Figure, values: Iterable[float | None], *, title: str, axis: str = "x") -> go.Figure:
    """A log axis for ratios (1 = no change) with ticks on the 1-2-5 sequence spanning `values` and 1, read
    as multipliers (x0.05, x1, x2): Plotly's own log ticks label minor digits only ("2", "5")."""
    inside = log_ticks(values, include=(1.0,))
    text = [f"x{t:g}" for t in inside]
    getattr(fig, f"update_{axis}axes")(type="log", tickvals=inside, ticktext=text, title=title)
    return fig
