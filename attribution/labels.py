"""The engine-version label ("vllm 0.20.1"): how every result, filter and cohort names an engine build. One
rule, coded for DuckDB (the `version_label` macro each analysis connection defines, used by queries/*.sql and
the dashboard's filters), for Polars and for plain values; tests/test_definitions.py checks they agree."""

from __future__ import annotations

from typing import Any

import polars as pl

# the engine and its version joined by a space, a missing part left out; NULL when both are missing
VERSION_LABEL_MACRO = ("create or replace macro version_label(engine, version) as "
                       "nullif(concat_ws(' ', engine, version), '')")


def define_macros(con: Any) -> None:
    """Define the label macros on a new DuckDB connection (before any query file runs on it)."""
    con.execute(VERSION_LABEL_MACRO)


def version_label_expr(engine: pl.Expr, version: pl.Expr) -> pl.Expr:
    """The label as a Polars expression."""
    joined = pl.concat_str([engine, version], separator=" ", ignore_nulls=True)
    return pl.when(joined == "").then(None).otherwise(joined)


def version_label(engine: str | None, version: str | None) -> str | None:
    """The label of one engine and version."""
    return " ".join(p for p in (engine, version) if p is not None) or None
