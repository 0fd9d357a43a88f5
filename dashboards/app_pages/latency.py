"""Latency and goodput: queue, TTFT, TPOT and end-to-end percentiles per group and prompt length, the share
of requests meeting a joint SLO, and the ERS score (`attribution latency`); Prometheus histogram
percentiles beside them when the window has them."""

import _data as data
import streamlit as st

from attribution.analyses import load_presets
from attribution.charts import latency as charts

st.title("Latency and goodput")
left, mid, preset_col, right = st.columns(4)
by = left.selectbox("Group by", data.GROUPS, index=data.group_index(), key="latency_by")
slo = mid.text_input("Joint SLO (seconds, or ms; empty: the preset)", value=", ".join(data.settings().slo) if data.settings_ok() else "",
                     key="latency_slo",
                     help="Terms every good request meets at once: queue, ttft, tpot, e2e; e.g. ttft=0.5, tpot=50ms")
# the named SLOs of presets.toml (the CLI's --preset); "settings" keeps the settings' SLO
preset = preset_col.selectbox("SLO preset", ["settings", *sorted(load_presets()[0])], key="latency_preset",
                              help="A named SLO from presets.toml, used when the joint SLO field is empty")
view = right.radio("Chart", ["percentiles", "goodput", "by prompt length"], horizontal=True, key="latency_chart")

res = data.latency(by=by, slo=tuple(t for t in slo.replace(",", " ").split() if t),
                   preset=None if preset == "settings" else preset)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart({"percentiles": charts.percentiles, "goodput": charts.goodput, "by prompt length": charts.by_bucket}[view](res))
# from Prometheus histograms (labelled bucket-interpolated, with bucket edges), shown only when the window has them
data.tables(res, ["percentiles", "goodput", "scores", "histogram_percentiles", "exact_vs_histogram"],
            more=["slo_terms", "buckets"])
