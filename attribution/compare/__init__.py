"""Before/after comparison of two cohorts of requests, with re-weighting to a common traffic mix, bootstrap
intervals and an attribution table that says which engine features can explain the change.

    con = Store.open(path).connect()
    res = compare(select(con), by="version", before="0.10.0", after="0.11.0")
    res.tables["summary"], res.tables["attribution"]
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attribution.choices import CohortBy
    from attribution.compare.cohorts import Cohorts, parse_window, resolve
    from attribution.compare.comparison import DEFAULT_EDGES, METRICS, bucket_labels, compare

__all__ = ["DEFAULT_EDGES", "METRICS", "CohortBy", "Cohorts", "bucket_labels", "compare", "parse_window", "resolve"]

# imported on first use: a Spark executor drawing bootstrap blocks imports attribution.compare.stats and
# .resample (NumPy only), not the analysis and its query layer
_HOMES = {"CohortBy": "attribution.choices", "Cohorts": "attribution.compare.cohorts",
          "parse_window": "attribution.compare.cohorts", "resolve": "attribution.compare.cohorts",
          **dict.fromkeys(("DEFAULT_EDGES", "METRICS", "bucket_labels", "compare"), "attribution.compare.comparison")}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
