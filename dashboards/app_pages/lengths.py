"""Workloads and lengths: prompt, output and cached tokens per group, by request count and by token
volume (`attribution lengths`)."""

import _data as data
import streamlit as st

from attribution.charts import lengths as charts

st.title("Workloads and lengths")
left, mid, right = st.columns(3)
by = left.selectbox("Group by", data.GROUPS, index=data.group_index(), key="lengths_by")
metric = mid.radio("Length", ["prompt_tokens", "output_tokens", "cached_tokens"], horizontal=True,
                   format_func=lambda m: m.removesuffix("_tokens"), key="lengths_metric")
weight = right.radio("Weight each bin by", ["requests", "tokens"], horizontal=True, key="lengths_weight")

res = data.lengths(by=by)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.histogram(res, metric=metric, weight=weight))
data.tables(res, ["stats", "histogram_lengths"], more=["histogram", "histogram_buckets"])  # histogram_lengths: Prometheus, when present
