"""Engine features that switch on at a threshold: the catalogue (TOML data), the effective settings per
engine start, and the crossings counted from request and step logs.

    con = Store.open(path).connect()
    res = thresholds(select(con, since="7d"), load_catalogue(specs=["sparse: kv_len_at_prefill > 95000"]))
    res.tables["requests"]
"""

from attribution.thresholds.catalogue import Catalogue, Feature, load_catalogue, parse_threshold
from attribution.thresholds.crossings import feature_table, mark_requests, prepare, thresholds
from attribution.thresholds.settings import effective_settings, engine_starts

__all__ = [
    "Catalogue", "Feature", "effective_settings", "engine_starts", "feature_table", "load_catalogue",
    "mark_requests", "parse_threshold", "prepare", "thresholds",
]
