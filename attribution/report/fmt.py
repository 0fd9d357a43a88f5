"""How a report cell reads, the same in HTML and Markdown: shares as percentages, seconds and ratios to three
significant digits, counts with thousands separators, times in UTC to the minute. Display only: the JSON
form keeps the numbers."""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

from attribution.columns import is_p_value, is_share, p_value_text

RATIO_HINTS = ("ratio", "_lo", "_hi")


def cell(v: Any, column: str = "") -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return ""
        if is_share(column):
            return pct(v)
        if is_p_value(column):
            return p_value_text(v)
        if column.startswith("usd") or column.endswith("_usd"):
            return f"${v:,.3g}" if abs(v) < 1000 else f"${v:,.0f}"
        if any(h in column for h in RATIO_HINTS):
            return f"x{v:.3g}"
        return num(v)
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M")
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, list | tuple):
        return ", ".join(cell(x) for x in v)
    return str(v)


def num(v: float | None) -> str:
    """Whole numbers with separators from 1000 up, else three significant digits; `n/a` for no value."""
    if v is None or v != v:
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == int(v):
        return f"{int(v)}"
    return f"{v:.3g}"


def pct(v: float) -> str:
    if v == 0:
        return "0%"
    if abs(v) < 0.001:
        return f"{v * 100:.2g}%"
    return f"{v:.1%}"


def seconds(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "?"
    if v < 1:
        return f"{v * 1000:.3g} ms"
    return f"{v:.3g} s"


def header(column: str) -> str:
    return column.replace("_", " ")
