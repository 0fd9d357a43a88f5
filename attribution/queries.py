"""SQL questions kept as files in `queries/` (installed as `attribution.sql`), one question per file.

The header comment of each file (`-- Question:`, `-- Grain:`, `-- Parameters:`, `-- Columns:`) is its
docstring; values are passed as DuckDB named parameters (`$name`), never formatted into the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from attribution.db import fetch
from attribution.errors import AttributionError

_PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    doc: str
    params: tuple[str, ...]


@cache
def load(name: str) -> Query:
    res = resources.files("attribution.sql") / f"{name}.sql"
    if not res.is_file():
        raise AttributionError(f"no query named {name!r} in queries/")
    text = res.read_text()
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    if not header or not header[0].lower().startswith("question:"):
        raise AttributionError(f"queries/{name}.sql:1: the file must open with a `-- Question:` header")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    params = tuple(dict.fromkeys(_PARAM_RE.findall(body)))
    return Query(name, text, "\n".join(header), params)


def run(con: Any, name: str, **params: Any) -> pl.DataFrame:
    """Run a query file with its `$parameters` and return the rows."""
    q = load(name)
    missing = [p for p in q.params if p not in params]
    if missing:
        raise AttributionError(f"queries/{name}.sql needs parameters: {', '.join(missing)}")
    return fetch(con, q.sql, {k: params[k] for k in q.params} if q.params else None)
