"""The engine-version label ("vllm 0.20.1"): how every result, filter and cohort names an engine build. One
rule, coded for DuckDB (the `version_label` macro each analysis connection defines, used by queries/*.sql and
the dashboard's filters), for Polars and for plain values; tests/test_definitions.py checks they agree. And a
request's group label (`group_label`), one macro for the query files that group requests."""

from __future__ import annotations

from typing import Any

import polars as pl

# The label macros: name -> (parameters, body in DuckDB SQL). attribution.spark.transpile inlines them (Spark SQL
# has no macros).
MACROS: dict[str, tuple[tuple[str, ...], str]] = {
    # the engine and its version joined by a space, a missing part left out; NULL when both are missing
    "version_label": (("engine", "version"), "nullif(concat_ws(' ', engine, version), '')"),
    # a request's group under an analysis's `by` (attribution.analyses.common.GroupBy), '(none)' where the
    # source does not say: one rule for the window's requests (int_analysis_requests.sql) and the per-day
    # counts (int_length_counts.sql), which pass the day each keeps
    "group_label": (("grouping", "workload", "model", "deployment", "label", "utc_day", "engine", "version"),
                    "coalesce(case grouping when 'workload' then workload when 'model' then model "
                    "when 'deployment' then deployment when 'label' then label when 'day' then utc_day "
                    "when 'version' then version_label(engine, version) else 'all' end, '(none)')"),
}


def define_macros(con: Any) -> None:
    """Define the label macros on a new DuckDB connection (before any query file runs on it)."""
    for name, (params, body) in MACROS.items():
        con.execute(f"create or replace macro {name}({', '.join(params)}) as {body}")


def version_label_expr(engine: pl.Expr, version: pl.Expr) -> pl.Expr:
    """The label as a Polars expression."""
    joined = pl.concat_str([engine, version], separator=" ", ignore_nulls=True)
    return pl.when(joined == "").then(None).otherwise(joined)


def version_label(engine: str | None, version: str | None) -> str | None:
    """The label of one engine and version."""
    return " ".join(p for p in (engine, version) if p is not None) or None
