"""Ingest health: input files by status, ingest problems, engine <-> gateway matches per source, rows per
deployment, log gaps and the engines' API servers' responses in the filtered window (`attribution health`)."""

import _data as data
import streamlit as st

st.title("Ingest health")
res = data.health()
if data.empty(res):
    st.stop()

data.scope(res)
data.tables(res, ["joins", "gaps", "errors", "responses"], more=["files", "coverage"])
