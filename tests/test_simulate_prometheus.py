"""The simulator's Prometheus writer: a range-query export of vLLM's metrics that the `prometheus_api` source
reads back, whose histogram counts equal the simulated requests (per bucket, by hand from the request rows)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import polars as pl
import pytest

from attribution.ingest import parse_path
from attribution.simulate import simulate
from attribution.simulate.writers.prometheus import PHASES, TTFT, tokens_1_2_5, write_prometheus

STEP = 600


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    res = simulate("vllm-chat-small", requests=1500, workers=1)
    out = tmp_path_factory.mktemp("prom")
    (path,) = write_prometheus(res, out, STEP, gz=True)
    return res, path


def test_vllm_token_edges():
    assert tokens_1_2_5(131072)[-3:] == (20000.0, 50000.0, 100000.0)
    assert tokens_1_2_5(32768)[-1] == 20000.0 and 95000.0 not in tokens_1_2_5(131072)


def test_export_is_a_query_range_matrix_on_the_step_grid(run):
    _, path = run
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["status"] == "success" and doc["data"]["resultType"] == "matrix"
    series = doc["data"]["result"]
    names = {s["metric"]["__name__"] for s in series}
    assert {"vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_running",
            "vllm:prefix_cache_hits_total"} <= names
    ttft = [s for s in series if s["metric"]["__name__"] == "vllm:time_to_first_token_seconds_bucket"]
    assert [s["metric"]["le"] for s in ttft] == [repr(e) for e in TTFT] + ["+Inf"]
    ts = [t for t, _ in series[0]["values"]]
    assert all(t % STEP == 0 for t in ts) and ts == sorted(ts)


def test_histograms_read_back_equal_the_requests(run, tmp_path):
    res, path = run
    parsed = parse_path(str(path), deployment="pod-00")
    h = parsed.tables["metric_histograms"]
    assert parsed.source == "prometheus_api" and h.height > 0 and parsed.errors.height == 0
    last = h["ts"].max()
    req = res.requests.filter(pl.col("finished") <= last)
    e2e = req["e2e_s"].to_numpy()
    got = (h.filter((pl.col("ts") == last) & (pl.col("metric") == "vllm:e2e_request_latency_seconds")
                    & (pl.col("part") == "bucket")).sort("le"))
    want = [int((e2e <= le).sum()) for le in PHASES] + [len(e2e)]
    assert got["value"].cast(pl.Int64).to_list() == want
    total = h.filter((pl.col("ts") == last) & (pl.col("metric") == "vllm:e2e_request_latency_seconds")
                     & (pl.col("part") == "sum"))["value"].item()
    assert total == pytest.approx(float(np.sum(e2e)), rel=1e-9)
    steps = parsed.tables["engine_steps"]
    assert steps["kind"].unique().to_list() == ["scrape"] and steps["running"].max() >= 1
