"""The charts' common look (attribution.charts.common.layout) is the one plotly's own `update_layout` gives,
at a fraction of the CPU: same resolved template, same layout values, and no figure shares state with another."""

from __future__ import annotations

import cProfile
import pstats

import plotly.graph_objects as go
import polars as pl
import pytest

from attribution.analyses import Analysis
from attribution.charts import capacity, common


def _plotly_way(fig: go.Figure, title: str | None, *, height: int, legend: bool, panels: bool) -> go.Figure:
    """The look as it was built before: the template by name and two `update_layout` calls."""
    top = (46 if title else 16) + (30 if legend else 0) + (20 if panels else 0)
    fig.update_layout(
        template=common.TEMPLATE,
        title={"text": title, "x": 0.01, "xanchor": "left", "y": 1, "yanchor": "top", "pad": {"t": 12},
               "yref": "container", "font": {"size": 15}} if title else None,
        height=height + top - 70, margin={"l": 60, "r": 20, "t": top, "b": 50},
        font={"family": common.FONT, "size": 12}, showlegend=legend,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "xanchor": "left",
                "yref": "container", "font": {"size": 11}},
        hoverlabel={"namelength": -1})
    if legend:
        fig.update_layout(legend={"y": 1 - (38 if title else 6) / (height + top - 70), "yanchor": "top"})
    return fig


def _figure() -> go.Figure:
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name="n"))
    # set before the look is applied: the look merges into these, as update_layout does
    fig.update_layout(barmode="group", legend={"bgcolor": "#eee"}, title={"subtitle": {"text": "sub"}})
    return fig


@pytest.mark.parametrize("title,height,legend,panels", [("A title", 360, True, False), (None, 200, True, True),
                                                        ("t", 160, False, False), (None, 300, False, True)])
def test_layout_equals_plotly_update_layout(title, height, legend, panels):
    ours = common.layout(_figure(), title, height=height, legend=legend, panels=panels).to_plotly_json()
    theirs = _plotly_way(_figure(), title, height=height, legend=legend, panels=panels).to_plotly_json()
    assert ours == theirs
    assert ours["layout"]["template"] == go.Figure(layout={"template": "plotly_white"}).layout.template.to_plotly_json()
    assert ours["layout"]["legend"]["bgcolor"] == "#eee" and ours["layout"]["barmode"] == "group"
    # the resolved template keeps plotly's key order, so the HTML embeds it byte for byte as before
    assert list(ours["layout"]["template"]["data"]) == list(theirs["layout"]["template"]["data"])


def test_set_layout_still_validates():
    with pytest.raises(ValueError):
        common.set_layout(go.Figure(), margin={"l": "wide"})
    with pytest.raises(ValueError):
        common.set_layout(go.Figure(), not_a_property=1)


def test_each_figure_owns_its_template():
    a, b = common.layout(go.Figure()), common.layout(go.Figure())
    a.layout.template.layout.paper_bgcolor = "#123456"
    assert b.layout.template.layout.paper_bgcolor == "white"
    assert common.layout(go.Figure()).layout.template.layout.paper_bgcolor == "white"


def test_layout_does_a_fraction_of_plotlys_work():
    """The look used to cost 20-70 ms of CPU a figure (plotly re-validating the template). Its speed is measured
    in bench/charts/run.py (a CPU ratio with the load recorded); here the work, counted as Python calls, which
    no load changes: a tenth of plotly's way when written (10k against 108k calls)."""
    def calls(f) -> int:
        f()  # warm: lazy imports and the template load, paid once by either way
        prof = cProfile.Profile()
        prof.enable()
        f()
        prof.disable()
        return pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
    ours = calls(lambda: common.layout(go.Figure(), "t"))
    theirs = calls(lambda: _plotly_way(go.Figure(), "t", height=360, legend=True, panels=False))
    assert ours < theirs / 3


def _capacity(values: dict[str, list[float]]) -> go.Figure:
    n = len(values["completed_per_day"])
    df = pl.DataFrame({"deployment": [f"pod-{i}" for i in range(n)], **values, "utilization": [0.5] * n})
    return capacity.utilization(Analysis("capacity", {}, {"capacity": df}))


def test_a_log_axis_inside_one_decade_has_several_ticks():
    # two identical pods' capacity (session 9, sample_logs): all bars between 10k and 30k
    fig = _capacity({"completed_per_day": [12_310.0, 12_105.0], "busiest_hour_per_day": [21_000.0, 20_400.0],
                     "capacity_per_day": [14_103.0, 13_854.0]})
    ticks = fig.layout.yaxis.tickvals
    assert fig.layout.yaxis.type == "log" and len(ticks) >= 2
    assert list(ticks) == [10_000.0, 20_000.0]  # the 1-2-5 sequence within 1.5x of the bars
    # bars are measured from the power of ten below the smallest: two near-equal bars look near-equal
    assert list(fig.layout.yaxis.range) == [4.0, pytest.approx(4.4983, abs=1e-4)]


def test_a_wide_log_axis_ticks_powers_of_ten():
    fig = _capacity({"completed_per_day": [3.0, 50_000.0], "busiest_hour_per_day": [12.0, 90_000.0],
                     "capacity_per_day": [40.0, 200_000.0]})
    assert list(fig.layout.yaxis.tickvals) == [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0]
    assert list(fig.layout.yaxis.range) == [0.0, pytest.approx(5.4771, abs=1e-4)]  # 1 .. 1.5 x 200k


def test_ratio_ticks_always_include_no_change():
    assert 1.0 in common.log_ticks([1.3, 1.8], include=(1.0,))
    assert common.log_ticks([None, 0.0, -2.0]) == []
