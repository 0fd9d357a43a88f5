"""Output for the terminal and for scripts: Rich tables on a TTY, CSV and JSON for pipes. stdout carries data
only; progress and diagnostics go to stderr. The one JSON writer (numbers as JSON numbers, NaN and infinity
as null) and the consoles, which lay tables out at their content's full width when writing to a pipe."""

from __future__ import annotations

import json
import math
import sys
from datetime import date, datetime, time
from decimal import Decimal
from enum import StrEnum
from typing import Any

import polars as pl
from rich.console import Console, ConsoleDimensions
from rich.table import Table

# Width of a console that is not a terminal: wider than any table, so a table keeps its content's natural
# width and no cell's word is folded onto a second line (`attribution thresholds | less -S` stays readable).
# Rich pads nothing to this width: a line ends where its table or text ends.
PIPE_WIDTH = 100_000


class _Console(Console):
    """A Rich console whose width is the terminal's on a terminal and PIPE_WIDTH elsewhere ($COLUMNS is
    ignored for a pipe: it describes a terminal the output does not go to)."""

    @property
    def size(self) -> ConsoleDimensions:
        dims = Console.size.fget(self)  # type: ignore[attr-defined]  # a property object: its getter
        return dims if self.is_terminal else ConsoleDimensions(PIPE_WIDTH, dims.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


out = _Console(soft_wrap=True)
err = _Console(stderr=True, soft_wrap=True)


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _jsonable(o: Any) -> Any:
    """`o` with every value JSON has a type for as that type: a DECIMAL (also DuckDB's HUGEINT, e.g. `sum()` of
    a BIGINT, which reaches Polars as DECIMAL(38,0)) is a number (an integer stays exact), NaN and infinity are
    null, dates and times ISO text; anything else unknown is its text."""
    if isinstance(o, dict):
        # keys as json.dumps writes them (str, numbers, bool, None), any other key as its text
        return {k if k is None or isinstance(k, str | int | float) else str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_jsonable(v) for v in o]
    if isinstance(o, bool) or o is None or isinstance(o, str):
        return o
    if isinstance(o, int):
        return int(o)
    if isinstance(o, float):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, Decimal):
        if not o.is_finite():
            return None
        return int(o) if o == o.to_integral_value() else float(o)
    if isinstance(o, datetime | date | time):
        return o.isoformat()
    if type(o).__module__ == "numpy" and hasattr(o, "item"):  # a NumPy scalar
        return _jsonable(o.item())
    return str(o)


def to_json(obj: Any) -> str:
    return json.dumps(_jsonable(obj), indent=2, allow_nan=False)


def cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if v != v:
            return ""
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


def table(df: pl.DataFrame, title: str | None = None) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in df.columns:
        numeric = df.schema[c].is_numeric()
        t.add_column(c, justify="right" if numeric else "left", overflow="fold")
    for row in df.iter_rows():
        t.add_row(*(cell(v) for v in row))
    return t


def frame(df: pl.DataFrame, fmt: Format, title: str | None = None) -> None:
    if fmt == Format.csv:
        flat = df.select(
            pl.col(c).cast(pl.Utf8) if isinstance(df.schema[c], pl.List | pl.Struct | pl.Object) else pl.col(c)
            for c in df.columns
        ) if df.width else df
        sys.stdout.write(flat.write_csv())
    elif fmt == Format.json:
        sys.stdout.write(to_json(df.to_dicts()) + "\n")
    else:
        out.print(table(df, title))


def data(obj: Any) -> None:
    sys.stdout.write(to_json(obj) + "\n")


def only(fmt: Format, command: str, *formats: Format) -> None:
    """A usage error (exit 2, one line) when `command` does not write `fmt`, naming the formats it writes."""
    if fmt not in formats:
        from attribution.errors import UsageError

        raise UsageError(f"{command} --format {fmt.value}: {command} writes {' or '.join(f.value for f in formats)}")
