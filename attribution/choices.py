"""The named choices the library's functions take and the front ends offer as options: how to group requests
(--by), what two cohorts are (--cohort-by), a report's format and its --fail-on conditions, a replay export's
trace format and what groups its requests into sessions. Plain enums in a
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


class TraceFormat(StrEnum):
    """`attribution replay --format`: the load generator's trace format (attribution.replay.formats)."""

    mooncake = "mooncake"
    aiperf = "aiperf"
    sglang = "sglang"
    vllm = "vllm"
    burstgpt = "burstgpt"
    csv = "csv"


class Sessions(StrEnum):
    """What groups requests into conversations. The schema has no session or conversation id; the columns that
    name a client are `user` (LiteLLM's user_api_key_user_id: the key's user), `key_hash` / `key_alias` and
    `team`, coarser still. `user` is a conversation only where each conversation gets its own user id; `none`
    makes every request its own session. (Mooncake traces chain prefix blocks across turns but name no
    session; BurstGPT's `Session ID` is not kept by the ingest.)"""

    none = "none"
    user = "user"
