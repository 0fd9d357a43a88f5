"""Overview: the `attribution analyze` summary of the filtered requests (findings, token lengths,
concurrency, latency, goodput and capacity per pod) and what the store holds."""

import _data as data
import streamlit as st

from attribution.charts import capacity as charts

st.title("Overview")
by = st.selectbox("Group by", data.GROUPS, index=data.group_index(), key="overview_by")

res = data.overview(by=by)
if data.empty(res):
    st.stop()

data.scope(res)
data.points(res, "findings", "finding", title="Worth a look")
data.chart(charts.utilization(res))
data.tables(res, ["lengths", "concurrency", "latency", "goodput", "capacity"], more=["store"])
