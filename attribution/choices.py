"""The named choices the library's functions take and the front ends offer as options: how to group requests
(--by), what two cohorts are (--cohort-by), a report's format and its --fail-on conditions. Plain enums in a
module that imports nothing heavy, so a command declares its options without loading the analyses."""

from __future__ import annotations

from enum import StrEnum


class GroupBy(StrEnum):
    workload = "workload"
    model = "model"
    deployment = "deployment"
    label = "label"
    day = "day"
    version = "version"
    all = "all"


class CohortBy(StrEnum):
    label = "label"
    version = "version"
    window = "window"


class ReportFormat(StrEnum):
    html = "html"
    md = "md"
    json = "json"


class FailOn(StrEnum):
    regression = "regression"  # a latency percentile rose materially (vs the previous window, or inside it)
    drift = "drift"            # a group's length distribution moved beyond the drift threshold
    health = "health"          # parse errors, unmatched joins, log gaps, or a skipped ingest
    empty = "empty"            # no requests in the window
    action = "action"          # any line marked `act`
