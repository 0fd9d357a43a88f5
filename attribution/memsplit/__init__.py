"""Where to put the boundary between the KV pool and the recurrent-state pool of a hybrid model, from the
operator's own traffic: the current split of each engine start (current.py), how often the state pool or
running cap bound while the KV pool had room (diagnosis.py), the split the traffic asks for and the flags
that enact it (recommend.py), and a replay of the measured arrivals under both splits (whatif.py).

    con = Store.open(path).connect()
    res = memsplit(con, "qwen3.5-35b-a3b", engine="sglang")
    res.tables["recommendation"], res.tables["flags"], res.tables["whatif"]
"""

from __future__ import annotations

from attribution.memsplit.assemble import DEFINITIONS, memsplit
from attribution.memsplit.current import CurrentSplit, Overrides, current_split, flag_map
from attribution.memsplit.diagnosis import LIMITS, Settings
from attribution.memsplit.recommend import STATUS, Flag, Recommendation, recommend
from attribution.memsplit.whatif import service_profile, whatif

__all__ = [
    "DEFINITIONS",
    "LIMITS",
    "STATUS",
    "CurrentSplit",
    "Flag",
    "Overrides",
    "Recommendation",
    "Settings",
    "current_split",
    "flag_map",
    "memsplit",
    "recommend",
    "service_profile",
    "whatif",
]
