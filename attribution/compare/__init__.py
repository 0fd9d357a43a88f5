"""Before/after comparison of two cohorts of requests, with re-weighting to a common traffic mix, bootstrap
intervals and an attribution table that says which engine features can explain the change.

    con = Store.open(path).connect()
    res = compare(select(con), by="version", before="0.10.0", after="0.11.0")
    res.tables["summary"], res.tables["attribution"]
"""

from attribution.choices import CohortBy
from attribution.compare.cohorts import Cohorts, parse_window, resolve
from attribution.compare.comparison import DEFAULT_EDGES, METRICS, bucket_labels, compare

__all__ = ["DEFAULT_EDGES", "METRICS", "CohortBy", "Cohorts", "bucket_labels", "compare", "parse_window", "resolve"]
