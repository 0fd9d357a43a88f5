"""Length distributions: hand-computed small cases, percentiles equal to numpy's linear method, the
token-weighted view, log-spaced bins, the time window, and the published figures of the Azure 2023 and
Mooncake traces (../shared/traces/README.md) read through the real ingest."""

from __future__ import annotations

import csv
import json
import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from conftest import shared

from attribution.analyses import lengths, select
from attribution.analyses.common import frames_connection, percentile_list, spread_percentiles
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.store import Store

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _requests(**cols) -> pl.DataFrame:
    n = len(next(iter(cols.values())))
    cols.setdefault("arrival", [T0 + timedelta(seconds=i) for i in range(n)])
    cols.setdefault("deployment", ["pod-a"] * n)
    return pl.DataFrame(cols)


def _row(df: pl.DataFrame, **match) -> dict:
    rows = df.filter(*[pl.col(k) == v for k, v in match.items()]).to_dicts()
    assert len(rows) == 1, (match, rows)
    return rows[0]


def test_hand_computed_stats_and_token_weighted_view():
    con = frames_connection(_requests(
        workload=["a"] * 5 + ["b"],
        prompt_tokens=[100, 200, 300, 400, 10_000, 7],
        output_tokens=[10, 20, 30, 40, 50, None],
        cached_tokens=[0, 0, 100, None, None, None],
    ))
    stats = lengths(select(con, by="workload")).tables["stats"]
    a = _row(stats, workload="a", metric="prompt_tokens")
    assert a["requests"] == 5 and a["tokens"] == 11_000
    assert a["mean"] == 2200 and a["p50"] == 300 and a["max"] == 10_000
    # linear: position 0.9 * 4 = 3.6 -> 400 + 0.6 * (10000 - 400)
    assert a["p90"] == pytest.approx(6160)
    assert a["p99"] == pytest.approx(400 + 0.96 * 9600)
    # cumulative tokens 100, 300, 600, 1000, 11000: half of 11000 is reached only by the 10,000 prompt
    assert a["tok_p50"] == 10_000 and a["tok_p90"] == 10_000
    assert a["top1_token_share"] == pytest.approx(10_000 / 11_000)  # ceil(5 / 100) = 1 request
    out = _row(stats, workload="a", metric="output_tokens")
    # cumulative 10, 30, 60, 100, 150: 75 (50%) first reached at 40, 135 (90%) at 50
    assert (out["tok_p50"], out["tok_p90"]) == (40, 50)
    cached = _row(stats, workload="a", metric="cached_tokens")
    assert cached["requests"] == 3 and cached["mean"] == pytest.approx(100 / 3)
    b = stats.filter(pl.col("workload") == "b")
    assert b["metric"].to_list() == ["prompt_tokens"]  # unknown counts are left out, not zero


def test_histogram_bins_are_log_spaced_with_integer_edges():
    con = frames_connection(_requests(workload=["a"] * 6, prompt_tokens=[100, 200, 300, 400, 10_000, 0]))
    hist = lengths(select(con), bins_per_decade=10).tables["histogram"].filter(pl.col("metric") == "prompt_tokens")
    # bin i holds i <= 10 * log10(L) < i + 1: 100 -> 20, 200 -> 23 (2.30), 300 -> 24 (2.48), 400 -> 26 (2.60)
    assert hist["bin"].to_list() == [-1, 20, 23, 24, 26, 40]
    assert hist.select("lo", "hi").rows() == [(0, 1), (100, 126), (200, 252), (252, 317), (399, 502),
                                              (10_000, 12_590)]
    assert hist["requests"].to_list() == [1] * 6
    assert hist["token_share"].to_list() == pytest.approx([0, 100 / 11_000, 200 / 11_000, 300 / 11_000,
                                                           400 / 11_000, 10_000 / 11_000])
    assert hist["cum_request_share"][-1] == pytest.approx(1.0)
    with pytest.raises(UsageError):
        lengths(select(con), bins_per_decade=0)


def test_percentiles_equal_numpy_linear_and_bins_equal_numpy_histogram():
    rng = np.random.default_rng(5)
    x = np.rint(rng.lognormal(7, 1.3, 3001)).astype(np.int64) + 1
    con = frames_connection(_requests(workload=["w"] * len(x), prompt_tokens=x))
    res = lengths(select(con), bins_per_decade=4)
    s = _row(res.tables["stats"], workload="w", metric="prompt_tokens")
    for col, q in (("p50", 50), ("p90", 90), ("p99", 99), ("p99_9", 99.9)):
        assert s[col] == pytest.approx(np.percentile(x, q, method="linear"), rel=1e-12), col
    assert s["mean"] == pytest.approx(x.mean()) and s["max"] == x.max()
    srt = np.sort(x)
    cum = np.cumsum(srt)
    for col, q in (("tok_p50", 0.5), ("tok_p90", 0.9), ("tok_p99", 0.99)):
        assert s[col] == srt[np.searchsorted(cum, q * cum[-1])], col
    k = math.ceil(len(x) / 100)
    assert s["top1_token_share"] == pytest.approx(srt[-k:].sum() / x.sum())
    hist = res.tables["histogram"].filter(pl.col("metric") == "prompt_tokens")
    edges = np.unique(np.ceil(10 ** (np.arange(0, 8 * 4 + 1) / 4)))
    counts, _ = np.histogram(x, bins=edges)
    got = dict(zip(hist["lo"].to_list(), hist["requests"].to_list(), strict=True))
    assert got == {int(lo): int(c) for lo, c in zip(edges[:-1], counts, strict=True) if c}


METRICS = ("prompt_tokens", "output_tokens", "cached_tokens")
ODD_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 25.0, 12.3, 77.7)


@pytest.mark.parametrize("seed", range(4))
def test_counts_give_duckdbs_avg_and_quantile_cont_over_the_requests_bit_for_bit(seed):
    """The stats from the lengths counted per (grp, metric, length) (length_stats_from_counts.sql, interpolated
    in attribution.analyses.lengths) equal DuckDB's count, sum, avg, quantile_cont and max over the requests
    themselves (tests/oracle/length_stats_per_request.sql) to the bit: skewed lengths with ties, zeros, unknown
    counts, a group of one request and requests before the window."""
    import oracle

    rng = random.Random(seed)
    workload: list[str | None] = []
    cols: dict[str, list[int | None]] = {m: [] for m in METRICS}
    for g, size in (("a", rng.randint(2, 4000)), ("b", 1), (None, rng.randint(2, 50)), ("c", 2)):
        workload += [g] * size
        for m in METRICS:
            cols[m] += [None if rng.random() < 0.05 else 0 if rng.random() < 0.05
                        else int(rng.random() * rng.random() * 40000) for _ in range(size)]
    arrival = [T0 + timedelta(minutes=rng.randint(-60, 600)) for _ in workload]
    con = frames_connection(_requests(workload=workload, arrival=arrival, **cols))
    pcts = percentile_list(ODD_PERCENTILES)
    got = lengths(select(con, since=T0), percentiles=ODD_PERCENTILES).tables["stats"]
    want = spread_percentiles(oracle.run(con, "length_stats_per_request", quantiles=[p / 100 for p in pcts]), pcts)
    want = want.rename({"grp": "workload"}).sort("workload", "metric")
    got = got.select(want.columns).sort("workload", "metric")
    assert want.height >= 6 and got.schema == want.schema
    assert got.equals(want, null_equal=True)


def test_window_filters_on_arrival_and_relative_spans_count_back_from_the_newest():
    con = frames_connection(_requests(workload=["w"] * 4, prompt_tokens=[1, 2, 3, 4],
                                      arrival=[T0 + timedelta(hours=h) for h in (0, 10, 20, 30)]))
    stats = lengths(select(con, since=T0 + timedelta(hours=10), until=T0 + timedelta(hours=30))).tables["stats"]
    assert _row(stats, workload="w", metric="prompt_tokens")["tokens"] == 2 + 3  # [since, until)
    rel = lengths(select(con, since="11h")).tables["stats"]  # newest arrival T0 + 30 h: since T0 + 19 h
    assert _row(rel, workload="w", metric="prompt_tokens")["tokens"] == 3 + 4
    naive = lengths(select(con, since="2025-06-03T04:00")).tables["stats"]  # naive = UTC: T0 + 16 h
    assert _row(naive, workload="w", metric="prompt_tokens")["tokens"] == 3 + 4
    with pytest.raises(UsageError, match="not a time"):
        select(con, since="yesterday")
    with pytest.raises(UsageError, match="before"):
        select(con, since="2025-06-03", until="2025-06-02")


@pytest.fixture(scope="module")
def trace_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    files = [shared("traces", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv"),
             shared("traces", "mooncake", "conversation_trace.jsonl")]
    ingest([str(f) for f in files], root / "store", tz="UTC")
    return Store.open(root / "store")


def test_azure_code_trace_matches_csv_module_and_published_figures(trace_store):
    with open(shared("traces", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    prompt = np.array([int(r["ContextTokens"]) for r in rows])
    output = np.array([int(r["GeneratedTokens"]) for r in rows])
    stats = lengths(select(trace_store.connect(), by="deployment")).tables["stats"]
    p = _row(stats, deployment="AzureLLMInferenceTrace_code", metric="prompt_tokens")
    o = _row(stats, deployment="AzureLLMInferenceTrace_code", metric="output_tokens")
    # traces/README.md: input median / mean / p90 / p99 / max 1469 / 2047.85 / 5187.6 / 7436 / 7437;
    # output 13 / 27.88 / 55 / 251.46 / 1899; 8,819 rows; 18,059,974 input tokens
    assert (p["requests"], p["tokens"], p["p50"], p["p99"], p["max"]) == (8819, 18_059_974, 1469, 7436, 7437)
    assert p["mean"] == pytest.approx(2047.85, abs=0.005) and p["p90"] == pytest.approx(5187.6)
    assert (o["p50"], o["p90"], o["max"]) == (13, 55, 1899) and o["p99"] == pytest.approx(251.46)
    for q, col in ((50, "p50"), (90, "p90"), (99, "p99"), (99.9, "p99_9")):
        assert p[col] == pytest.approx(np.percentile(prompt, q)) and o[col] == pytest.approx(np.percentile(output, q))


def test_mooncake_conversation_trace_matches_json_module_and_published_figures(trace_store):
    with open(shared("traces", "mooncake", "conversation_trace.jsonl")) as fh:
        recs = [json.loads(line) for line in fh]
    prompt = np.array([r["input_length"] for r in recs])
    stats = lengths(select(trace_store.connect(), by="deployment")).tables["stats"]
    p = _row(stats, deployment="conversation_trace", metric="prompt_tokens")
    o = _row(stats, deployment="conversation_trace", metric="output_tokens")
    # README: 12,031 requests; input mean / median / p90 / p99 / max 12,035.06 / 6,909 / 27,367 / 85,400.4 /
    # 126,195; output mean / median / p90 / p99 / max 342.62 / 350 / 597 / 1,118.5 / 2,000 (FAST'25 Table 2:
    # average input 12035, output 343)
    assert p["requests"] == 12_031 and p["mean"] == pytest.approx(12_035.06, abs=0.005)
    assert (p["p50"], p["p90"], p["max"]) == (6909, 27_367, 126_195) and p["p99"] == pytest.approx(85_400.4)
    assert o["mean"] == pytest.approx(342.62, abs=0.005) and (o["p50"], o["p90"], o["max"]) == (350, 597, 2000)
    assert o["p99"] == pytest.approx(1118.5)
    assert p["p99_9"] == pytest.approx(np.percentile(prompt, 99.9))
    srt = np.sort(prompt)
    assert p["top1_token_share"] == pytest.approx(srt[-math.ceil(len(srt) / 100):].sum() / srt.sum())
