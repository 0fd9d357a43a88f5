"""Prompt cache: measured cached-token shares per source and day, the LRU prefix-reuse curve where requests
carry block hashes, and the savings (`attribution cache`)."""

import _data as data
import streamlit as st

from attribution.charts import cache as charts

st.title("Prompt cache")
cap = st.number_input("LRU capacity in blocks (0: the whole curve)", min_value=0, value=0, step=1000,
                      key="cache_capacity")

res = data.cache(capacity_blocks=int(cap) or None)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.measured_by_day(res))
data.chart(charts.curve(res))
data.tables(res, ["measured", "potential", "savings"], more=["curve", "measured_by_day"])
