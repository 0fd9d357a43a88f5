"""Arrivals and burstiness: requests per minute over time, rate and burstiness per group, the hour-of-day
profile, fitted inter-arrival distributions and conversations (`attribution arrivals`)."""

import _data as data
import streamlit as st

from attribution.charts import arrivals as charts

st.title("Arrivals and burstiness")
left, mid, right = st.columns(3)
by = left.selectbox("Group by", data.GROUPS, index=data.group_index(), key="arrivals_by")
tz = mid.text_input("Time zone of the hour profile", value=data.settings().tz if data.settings_ok() else "UTC",
                    key="arrivals_tz")
overall = right.checkbox("Show all requests together", value=False, key="arrivals_overall")

res = data.arrivals(by=by, tz=tz.strip() or None)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.per_minute(res, overall=overall))
data.tables(res, ["rates"], more=["fits", "turns", "diurnal", "weekday", "per_minute"])
data.chart(charts.hour_profile(res))
data.chart(charts.burstiness(res))
