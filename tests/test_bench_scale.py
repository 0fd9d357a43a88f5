"""bench/scale's generator: what its manifest says was written is what the ingest finds (every engine and
gateway request row, every step line, the access lines), and each gateway line names its engine request."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from attribution.ingest import ingest
from attribution.status import store_counts
from attribution.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not an installed package
from bench.scale.generate import generate  # noqa: E402
from bench.scale.run import check  # noqa: E402


def test_manifest_matches_ingest(tmp_path: Path) -> None:
    m = generate(tmp_path / "week", 240, seed=3, days=1)
    assert m["expect"]["engine_requests"] == 240 and m["expect"]["engine_steps"] > 240
    assert 0.3 < m["gateway_share"] < 0.7  # the gateway JSON is a large share of the bytes
    store = tmp_path / "store"
    summary = ingest([str(tmp_path / "week" / "logs")], store, tz="UTC", year=2026, jobs=1)
    assert not summary.problems and summary.errors == 0
    counts = store_counts(Store.open(store))
    assert check(m, counts) == []
    assert counts["rows"]["ingest_errors"] == 0
    # one request id per request: the gateway's `id` is the engine's response id, on both sides
    ids = duckdb.sql(f"select count(distinct request_id), count(*) from read_parquet("
                     f"'{store}/data/requests/**/*.parquet', hive_partitioning=true)").fetchall()[0]
    assert ids == (240, 480)
    # a second run with the same parameters reuses the files
    assert generate(tmp_path / "week", 240, seed=3, days=1) == m
