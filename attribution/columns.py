"""What a result column's name says about its values, one rule for every front end (CLI tables, dashboard,
report): which columns hold shares (fractions of 1, shown as percentages)."""

from __future__ import annotations


def is_share(column: str) -> bool:
    """A share: `share` or `utilization` is one of the name's `_`-separated words (`time_share`,
    `share_of_all_requests`, `at_limit_share_of_busy_time`, `utilization_before`), and it is no rate (`per_s`).
    `shared_experts_stream` is not one."""
    words = column.split("_")
    return ("share" in words or "utilization" in words) and "per_s" not in column
