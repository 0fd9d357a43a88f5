"""Compare two cohorts: queue, TTFT, TPOT and end-to-end percentile ratios re-weighted to a common
workload x prompt-length mix with bootstrap intervals, and which engine features can explain the change
(`attribution compare`)."""

import _data as data
import streamlit as st

from attribution.charts import compare as charts

st.title("Compare two cohorts")
left, mid, right, far = st.columns(4)
cohort_by = left.radio("Cohorts by", ["version", "label", "window"], horizontal=True, key="compare_by")
options = data.cohort_options(cohort_by)
before = data.cohort_input(mid, "Before", options, key="compare_before")
after = data.cohort_input(right, "After", options, key="compare_after")
resamples = far.number_input("Bootstrap resamples", min_value=100, max_value=5000, value=1000, step=100,
                             key="compare_resamples")

res = data.compare(cohort_by=cohort_by, before=before, after=after, resamples=int(resamples))
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.ratios(res))
data.tables(res, ["summary", "attribution", "capacity", "cohorts"], more=["by_workload", "by_bucket", "mix"])
