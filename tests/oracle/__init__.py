"""Test oracles: SQL statements of answers the product computes another way (the NumPy kernels of
attribution.analyses.sweep and attribution.thresholds.steps). The product never runs them; tests compare the
kernels with them on the same slices. Each file opens with the header the queries/ files carry, and each
materialised result is a temporary table named after its file (the files that follow read it by that name).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from attribution.db import fetch

HERE = Path(__file__).parent
_PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def load(name: str) -> tuple[str, list[str]]:
    """The text of tests/oracle/<name>.sql and its `$parameters`."""
    text = (HERE / f"{name}.sql").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return text, list(dict.fromkeys(_PARAM_RE.findall(body)))


def _params(name: str, needed: list[str], given: dict[str, Any]) -> dict[str, Any] | None:
    missing = [p for p in needed if p not in given]
    assert not missing, f"tests/oracle/{name}.sql needs parameters: {', '.join(missing)}"
    return {p: given[p] for p in needed} or None


def run(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> pl.DataFrame:
    """The rows of tests/oracle/<name>.sql."""
    text, needed = load(name)
    return fetch(con, text, _params(name, needed, params))


def materialize(con: duckdb.DuckDBPyConnection, name: str, table: str | None = None, **params: Any) -> None:
    """Store the rows of tests/oracle/<name>.sql in a temporary table (default: the file's name)."""
    text, needed = load(name)
    con.execute(f"create or replace temp table {table or name} as\n{text}", _params(name, needed, params))
