"""The report at scale (issue 21): its silences found among time buckets equal the consecutive events' gaps,
its connection's DuckDB memory is capped, and its selections are each materialised once."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import numpy as np
import polars as pl
import pytest

from attribution.analyses import Window
from attribution.db import bound_memory
from attribution.report import log_gaps
from attribution.report.build import MEMORY_MB


def _brute_gaps(events: pl.DataFrame, min_gap_s: float) -> list[tuple]:
    """Every silence between consecutive events of a stream longer than `min_gap_s`, by sorting all of them."""
    inside = (events.sort("deployment", "kind", "ts")
              .with_columns(pl.col("ts").shift(1).over("deployment", "kind").alias("prev"))
              .filter((pl.col("ts") - pl.col("prev")).dt.total_microseconds() / 1e6 > min_gap_s))
    return sorted(inside.select("deployment", "kind", "prev", "ts").rows())


@pytest.mark.parametrize("seed", range(6))
def test_log_gaps_among_buckets_are_the_consecutive_events_gaps(seed):
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 5, 11, tzinfo=UTC)
    min_gap_s = float(rng.choice([1.0, 7.5, 60.0, 1800.0]))
    frames = []
    for pod in ("a", "b", "c"):
        # clustered arrivals with silences of every length around min_gap_s, ties included
        n = int(rng.integers(1, 400))
        steps = rng.exponential(min_gap_s * rng.choice([0.05, 0.5, 1.0, 3.0]), n)
        steps[rng.random(n) < 0.1] = 0.0
        steps[rng.random(n) < 0.05] = min_gap_s  # exactly the threshold: not a silence
        us = (np.cumsum(steps) * 1e6).astype(np.int64) + int(rng.integers(0, 10**9))
        frames.append(pl.DataFrame({"deployment": pod, "us": us}))
    ev = pl.concat(frames).with_columns(
        (pl.lit(t0) + pl.duration(microseconds=pl.col("us"))).alias("ts"))
    half = ev.height // 2
    req, steps_df = ev.slice(0, half), ev.slice(half)
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    con.register("requests", req.select("deployment", pl.lit("vllm_log").alias("source"),
                                        pl.col("ts").alias("arrival"),
                                        pl.lit(None, pl.Datetime("us", "UTC")).alias("finished")).to_arrow())
    con.register("engine_steps", steps_df.select("deployment", pl.lit("vllm_log").alias("source"), "ts").to_arrow())
    got = log_gaps(con, Window(None, None), min_gap_s).filter(pl.col("edge") == "inside")
    events = pl.concat([req.with_columns(pl.lit("requests").alias("kind")),
                        steps_df.with_columns(pl.lit("steps").alias("kind"))])
    want = _brute_gaps(events.select("deployment", "kind", "ts"), min_gap_s)
    assert want, "the corpus must hold silences to find"
    assert sorted(got.select("deployment", "kind", "gap_start", "gap_end").rows()) == want


def test_the_report_connection_spills_instead_of_growing(tmp_path, monkeypatch):
    con = duckdb.connect()
    monkeypatch.setenv("ATTRIBUTION_DUCKDB_MEMORY_MB", "300")
    bound_memory(con, MEMORY_MB)
    limit = con.execute("select current_setting('memory_limit')").fetchone()[0]
    assert limit == "286.1 MiB"  # 300 MB (DuckDB's default is 80% of the machine)
    scratch = con.execute("select current_setting('temp_directory')").fetchone()[0]
    assert "attribution-spill-" in scratch
