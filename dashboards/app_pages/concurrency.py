"""Concurrency and live tokens: requests running and waiting at once and their live KV tokens, per pod over
time, with peaks and time-weighted percentiles (`attribution concurrency --timeseries`)."""

import _data as data
import streamlit as st

from attribution.charts import concurrency as charts

st.title("Concurrency and live tokens")
left, right = st.columns(2)
by = left.selectbox("Group by", data.GROUPS, index=data.group_index(), key="concurrency_by")
per_group = right.toggle("Also sweep each group on its own", value=True, key="concurrency_per_group")

res = data.concurrency(by=by, per_group=per_group)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.over_time(res))
data.tables(res, ["pods", "groups"], more=["deployments"])
