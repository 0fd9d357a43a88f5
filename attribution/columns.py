"""What a result column's name says about its values, one rule for every front end (CLI tables, dashboard,
report): which columns hold shares (fractions of 1, shown as percentages) and which p-values (and how one
reads), and a table cut to the columns a view shows."""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import polars as pl


def is_share(column: str) -> bool:
    """A share: `share` or `utilization` is one of the name's `_`-separated words (`time_share`,
    `share_of_all_requests`, `at_limit_share_of_busy_time`, `utilization_before`), and it is no rate (`per_s`).
    `shared_experts_stream` is not one."""
    words = column.split("_")
    return ("share" in words or "utilization" in words) and "per_s" not in column


def is_p_value(column: str) -> bool:
    """A p-value: `p_value`, `p_adjusted` (the compare tables' test of a material change, and its Holm
    adjustment)."""
    return column.startswith(("p_value", "p_adjusted"))


def p_value_text(v: float | None) -> str:
    """A p-value as the report and the dashboard write it: three significant digits, in e-notation below
    1e-4 (`9.06e-20`, `0.0123`, `1`); empty for no value."""
    if v is None or v != v:
        return ""
    return f"{v:.3g}"


@overload
def view(df: pl.DataFrame, cols: list[str]) -> pl.DataFrame: ...
@overload
def view(df: None, cols: list[str]) -> None: ...
def view(df: pl.DataFrame | None, cols: list[str]) -> pl.DataFrame | None:
    """`df` cut to the columns of `cols` it has, in that order (None stays None)."""
    if df is None:
        return None
    return df.select([c for c in cols if c in df.columns])
