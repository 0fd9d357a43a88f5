"""Feature thresholds: which engine features' thresholds the traffic crossed (requests over each threshold,
their share of the prefill work, time the engines spent over step thresholds) (`attribution thresholds`)."""

import _data as data
import streamlit as st

from attribution.charts import thresholds as charts

st.title("Feature thresholds")
left, right = st.columns([2, 1])
spec = left.text_input("Add a feature (NAME: QUANTITY OP VALUE) or set a known one", key="thresholds_spec",
                       placeholder="sparse_prefill: kv_len_at_prefill > 95000")
only_crossed = right.toggle("Chart only features that fired", value=True, key="thresholds_only_crossed")

res = data.thresholds(specs=(spec,) if spec.strip() else ())
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.crossings(res, only_crossed=only_crossed))
data.tables(res, ["requests", "histogram_requests", "by_workload", "steps"],  # histogram_requests: no request rows
            more=["by_day", "steps_by_day", "settings", "not_counted"])
