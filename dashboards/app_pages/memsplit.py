"""Memory split: for each engine start of a hybrid model, the current KV / recurrent-state split, how often
the state pool or running cap bound while the KV pool had room, and the split the traffic asks for with the
flags that enact it (`attribution memsplit`)."""

import _data as data
import streamlit as st

from attribution.charts import memsplit as charts

st.title("Memory split")
left, right = st.columns([2, 1])
model = left.text_input("Model preset or config.json path (default: the model each engine start logged)",
                        key="memsplit_model", placeholder="qwen3.5-35b-a3b")
whatif = right.toggle("Replay the arrivals under both splits (slower)", value=False, key="memsplit_whatif")

res = data.memsplit(model=model.strip() or None, whatif=whatif)
if data.empty(res):
    st.stop()

data.scope(res)
data.chart(charts.whatif(res) if whatif else charts.pools(res))
data.tables(res, ["summary", "flags", *(["whatif"] if whatif else [])],
            more=["recommendation", "current", "diagnosis", "demand", "episodes"])
