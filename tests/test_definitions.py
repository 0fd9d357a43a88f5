"""One definition each (issue 17): the engine-version label in DuckDB, Polars and Python agree; which result
columns are shares (the dashboard's SLO presets: tests/test_dashboard.py)."""

from __future__ import annotations

import polars as pl
import pytest

from attribution.columns import is_share
from attribution.db import fetch, scratch
from attribution.labels import define_macros, version_label, version_label_expr

CASES = [("vllm", "0.20.1"), ("sglang", None), (None, "0.4.6"), (None, None), ("vllm", "")]


def test_version_label_is_the_same_in_duckdb_polars_and_python():
    con = scratch()
    define_macros(con)
    df = pl.DataFrame(CASES, schema={"engine": pl.Utf8, "version": pl.Utf8}, orient="row")
    con.register("cases", df.to_arrow())
    sql = fetch(con, "select version_label(engine, version) as label from cases")["label"].to_list()
    polars = df.select(version_label_expr(pl.col("engine"), pl.col("version")).alias("label"))["label"].to_list()
    python = [version_label(e, v) for e, v in CASES]
    assert sql == polars == python
    assert python[:4] == ["vllm 0.20.1", "sglang", "0.4.6", None]
    con.close()


@pytest.mark.parametrize("column, share", [
    ("time_share", True), ("share_of_all_requests", True), ("prefill_token_share_of_all_requests", True),
    ("at_limit_share_of_busy_time", True), ("utilization", True), ("utilization_before", True),
    ("share_before", True), ("good_share", True), ("shared_experts_stream", False), ("goodput_per_s", False),
    ("requests", False), ("share_per_s", False),
])
def test_is_share(column, share):
    assert is_share(column) is share

