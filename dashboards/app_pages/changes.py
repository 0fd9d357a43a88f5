"""What changed: the filtered window against the one before it (traffic and length drift, latency ratios with
intervals, material regressions) and inside it (engine starts, a before/after) (`attribution changes`)."""

import _data as data
import streamlit as st

st.title("What changed")
res = data.changes()
if data.empty(res):
    st.stop()

data.scope(res)
data.tables(res, ["versions", "week_regressions", "upgrade_regressions", "traffic", "drift"],
            more=["week_summary", "week_attribution", "upgrade_cohorts", "upgrade_summary", "upgrade_by_workload",
                  "upgrade_attribution"])
