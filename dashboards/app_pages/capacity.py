"""Capacity and cost: per pod, what it completed and could complete at its running limit, the GPU cost per
million tokens (with a GPU-hour price) and, where a gateway logged the requests, what it billed next to the
GPU cost (`attribution capacity`)."""

import _data as data
import streamlit as st

from attribution.charts import capacity as charts
from attribution.charts import spend as spend_charts

st.title("Capacity and cost")
by = st.selectbox("Group by", data.GROUPS, index=data.GROUPS.index("all"), key="capacity_by",
                  help="all: each pod as a whole (capacity's default); a grouping: each pod's groups")

res = data.capacity(by=by)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.utilization(res))
if "cost" in res.tables:
    data.chart(charts.cost(res))
if "spend" in res.tables:
    data.chart(spend_charts.billed_vs_gpu(res))
data.tables(res, ["capacity", "cost", "spend"], more=["littles_law"])
