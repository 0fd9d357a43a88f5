"""Output for the terminal and for scripts: Rich tables on a TTY, CSV and JSON for pipes. stdout carries data
only; progress and diagnostics go to stderr."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from enum import StrEnum
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def json_default(o: Any) -> Any:
    if isinstance(o, datetime | date):
        return o.isoformat()
    if isinstance(o, float) and o != o:
        return None
    return str(o)


def to_json(obj: Any) -> str:
    return json.dumps(obj, default=json_default, indent=2)


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
