"""What changed: the filtered window against the one before it (traffic and length drift, latency ratios with
intervals, material regressions) and inside it (engine starts, a before/after) (`attribution changes`)."""

import _data as data
import streamlit as st

from attribution.charts import changes as charts

st.title("What changed")
res = data.changes()
if data.empty(res):
    st.stop()

data.scope(res)
# the report's charts of this section, one at a time: (the table it needs, the chart)
views = {"latency ratios, before/after inside the window": ("upgrade_summary", lambda: charts.ratios(res, which="upgrade")),
         "latency ratios, against the previous window": ("week_summary", lambda: charts.ratios(res, which="week")),
         "length drift": ("drift", lambda: charts.drift(res))}
available = [v for v, (table, _) in views.items() if table in res.tables] or list(views)[1:2]
view = st.radio("Chart", available, horizontal=True, key="changes_chart")
data.chart(views[view][1]())
data.tables(res, ["versions", "week_regressions", "upgrade_regressions", "traffic", "drift"],
            more=["week_summary", "week_attribution", "upgrade_cohorts", "upgrade_summary", "upgrade_by_workload",
                  "upgrade_attribution"])
