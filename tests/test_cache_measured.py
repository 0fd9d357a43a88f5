"""`attribution cache`: the measured cached-token shares per source (requests, SGLang prefill lines, vLLM stats
lines, Prometheus counters with resets), the potential tables on a small block-hash trace, and the economics."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl
import pytest
from conftest import run_cli

from attribution.analyses import Window
from attribution.cache import economics
from attribution.cache.analysis import Economics, cache, curve_capacities
from attribution.errors import UsageError
from attribution.labels import define_macros
from attribution.schema import conform

T0 = datetime(2026, 5, 4, 10, tzinfo=UTC)


def connection(requests=None, steps=None, counters=None, joined=None) -> duckdb.DuckDBPyConnection:
    """A connection with the relations the cache queries read, over in-memory rows."""
    con = duckdb.connect(":memory:")
    con.execute("set TimeZone = 'UTC'")
    define_macros(con)
    req = conform("requests", pl.DataFrame(requests or []))
    for view, table, df in (("requests", "requests", req), ("engine_steps", "engine_steps", steps),
                            ("metric_counters", "metric_counters", counters)):
        frame = df if isinstance(df, pl.DataFrame) else conform(table, pl.DataFrame(df or []))
        con.register(f"_{view}", frame.to_arrow())
        con.execute(f"create view {view} as select * from _{view}")
    j = joined if joined is not None else req.with_columns(
        pl.col("source").alias("engine_source"), pl.lit(None, pl.Utf8).alias("gateway_source"),
        pl.lit("engine_only").alias("matched"))
    con.register("_joined", j.to_arrow())
    con.execute("create view joined_requests as select * from _joined")
    return con


def measured(con, **kw) -> pl.DataFrame:
    return cache(con, Window(), **kw).tables["measured"]


def test_request_and_engine_step_shares_are_token_weighted():
    """Two requests 1000/100 and 10/10 cached: 110/1010, not the mean of 10% and 100%. SGLang prefill lines:
    cached / (new + cached). vLLM stats lines weight their hit rate by the prompt throughput."""
    reqs = [{"request_id": str(i), "source": "sglang_log", "source_kind": "engine", "deployment": "d",
             "workload": "w", "arrival": T0 + timedelta(seconds=i), "prompt_tokens": p, "cached_tokens": c}
            for i, (p, c) in enumerate([(1000, 100), (10, 10), (50, None)])]
    steps = [{"ts": T0, "source": "sglang_log", "deployment": "d", "kind": "prefill", "new_tokens": 300,
              "cached_tokens": 100},
             {"ts": T0, "source": "vllm_log", "deployment": "v", "kind": "stats", "prompt_tput": 100.0,
              "prefix_hit_rate": 0.5},
             {"ts": T0 + timedelta(days=1), "source": "vllm_log", "deployment": "v", "kind": "stats",
              "prompt_tput": 300.0, "prefix_hit_rate": 0.1},
             {"ts": T0, "source": "vllm_log", "deployment": "v", "kind": "stats", "prompt_tput": 0.0,
              "prefix_hit_rate": 0.9}]
    m = measured(connection(reqs, steps))
    share = dict(zip(m["measure"], m["cached_share"], strict=True))
    assert share["requests.cached_tokens"] == pytest.approx(110 / 1010)
    assert share["engine_steps.cached_tokens"] == pytest.approx(100 / 400)
    assert share["engine_steps.prefix_hit_rate"] == pytest.approx((50 + 30) / 400)
    by_day = cache(connection(reqs, steps), Window()).tables["measured_by_day"]
    assert by_day.filter(pl.col("measure") == "engine_steps.prefix_hit_rate")["day"].to_list() == \
        ["2026-05-04", "2026-05-05"]


def counter(metric, values, deployment="p", start=T0):
    return [{"ts": start + timedelta(seconds=15 * i), "source": "prometheus", "file": "f", "deployment": deployment,
             "engine": "vllm", "metric": metric, "series": "", "value": v} for i, v in enumerate(values)]


def test_counters_count_increases_across_a_reset():
    """queries 0 -> 100 -> 300, reset, 50; hits 0 -> 10 -> 110, reset, 40: increases 350 and 150."""
    rows = counter("vllm:prefix_cache_queries_total", [0, 100, 300, 50]) + \
        counter("vllm:prefix_cache_hits_total", [0, 10, 110, 40]) + \
        counter("vllm:num_requests_total", [5, 6, 7, 8])
    m = measured(connection(counters=rows))
    assert m.select("measure", "queried_tokens", "cached_tokens").row(0) == ("metric_counters", 350.0, 150.0)


def test_empty_store_relations_give_an_empty_table_and_a_note():
    res = cache(connection(), Window())
    assert res.tables["measured"].height == 0 and "savings" not in res.tables
    assert any("block hashes" in n for n in res.notes) and any("reports cached tokens" in n for n in res.notes)


def test_window_and_filters():
    reqs = [{"request_id": str(i), "source": "sglang_log", "source_kind": "engine", "deployment": f"d{i % 2}",
             "workload": "w", "arrival": T0 + timedelta(days=i), "prompt_tokens": 100, "cached_tokens": 10 * i}
            for i in range(4)]
    con = connection(reqs)
    m = cache(con, Window(T0 + timedelta(days=1), T0 + timedelta(days=3)), deployment="d1").tables["measured"]
    assert m.select("deployment", "queried_tokens", "cached_tokens").rows() == [("d1", 100.0, 10.0)]


def block_requests():
    """Two deployments; the second request repeats the first's prefix on the other pod, the third on its own."""
    hashes = [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5], [9]]
    deps = ["a", "b", "a", "b"]
    return [{"request_id": str(i), "source": "mooncake_trace", "source_kind": "trace", "deployment": d,
             "workload": "chat" if i < 3 else "batch", "arrival": T0 + timedelta(seconds=i),
             "prompt_tokens": 512 * len(h), "block_hashes": h} for i, (h, d) in enumerate(zip(hashes, deps,
                                                                                            strict=True))]


def test_potential_global_against_per_deployment():
    res = cache(connection(block_requests()), Window())
    curve = res.tables["curve"]
    unbounded = curve.filter(pl.col("capacity_blocks").is_null())
    got = dict(zip(unbounded["scope"], unbounded["block_weighted"], strict=True))
    assert got == {"global": pytest.approx(5 / 11), "per_deployment": pytest.approx(3 / 11)}
    pot = res.tables["potential"]
    assert pot["workload"].to_list() == ["(all)", "batch", "chat"]
    assert pot.filter(pl.col("workload") == "chat")["block_weighted"].item() == pytest.approx(5 / 10)
    assert any("global cache against one cache per deployment" in n for n in res.notes)
    one = cache(connection(block_requests()), Window(), capacity_blocks=2).tables["curve"]
    assert one.filter(pl.col("scope") == "global")["capacity_blocks"].to_list() == [2, None]


def test_curve_capacities_reach_every_distinct_block():
    assert curve_capacities(7) == [1.0, 2.0, 5.0, 10.0, float("inf")]
    assert curve_capacities(1) == [1.0, float("inf")]


def test_economics_gpu_time_and_api_dollars():
    """1.8M cached tokens at 20,000 tok/s: 90 s = 0.025 GPU-h, $0.05 at $2/h; at $3/MTok and reads at 0.1x:
    1.8 x 3 x 0.9 = $4.86."""
    reqs = [{"request_id": "1", "source": "sglang_log", "source_kind": "engine", "deployment": "d",
             "workload": "w", "arrival": T0, "prompt_tokens": 2_000_000, "cached_tokens": 1_800_000}]
    sav = cache(connection(reqs), Window(), econ=Economics(20_000, 2.0, 1, 3.0, "anthropic-5m")).tables["savings"]
    row = sav.row(0, named=True)
    assert row["gpu_hours_saved"] == pytest.approx(0.025) and row["usd_saved_gpu"] == pytest.approx(0.05)
    assert row["usd_saved_api"] == pytest.approx(4.86)
    assert economics.break_even_hits(economics.pricing("anthropic-5m")) == pytest.approx(0.25 / 0.9)
    assert economics.pricing("0.25").read == 0.25
    with pytest.raises(UsageError):
        economics.pricing("cheap")


def test_cli_on_a_mooncake_trace(tmp_path, capsys):
    """The command end to end on a Mooncake-format file: ingest, then the curve in JSON at one capacity."""
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 0, "input_length": 1500, "output_length": 5, "hash_ids": [0, 1, 2]},
            {"timestamp": 10, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 3]}]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = tmp_path / "s"
    assert run_cli(capsys, "ingest", str(trace), "--store", str(store))[0] == 0
    code, out, err = run_cli(capsys, "cache", "--store", str(store), "--capacity-blocks", "10", "--format", "json")
    assert code == 0, err
    res = json.loads(out)
    curve = res["tables"]["curve"]
    assert [r["capacity_blocks"] for r in curve] == [10, None]
    assert curve[0]["block_weighted"] == pytest.approx(2 / 6)
    assert curve[0]["token_weighted"] == pytest.approx(1024 / 2600)
    assert res["params"]["capacity_blocks"] == 10
    code, out, err = run_cli(capsys, "cache", "--store", str(store), "--capacity-blocks", "0")
    assert code == 2 and "--capacity-blocks" in err


def test_report_names_a_workload_whose_reuse_moved_materially():
    """The at-a-glance rule: >= 10 points with >= 100 samples and >= 100k queried tokens in both windows."""
    from attribution.report.cache_section import reuse_changes

    def rows(share_a, share_b, samples_b=500):
        return pl.DataFrame({
            "measure": ["requests.cached_tokens"] * 2, "source": ["litellm"] * 2, "workload": ["a", "b"],
            "deployment": ["d", "d"], "queried_tokens": [1e6, 1e6],
            "cached_tokens": [1e6 * share_a, 1e6 * share_b], "samples": [500, samples_b]})

    ch = reuse_changes(rows(0.50, 0.40), rows(0.30, 0.10))
    assert ch.select("workload", "share_before", "share").rows() == [("b", pytest.approx(0.1), pytest.approx(0.4)),
                                                                      ("a", pytest.approx(0.3), pytest.approx(0.5))]
    assert reuse_changes(rows(0.35, 0.40), rows(0.30, 0.35)).height == 0  # 5 points: not material
    assert reuse_changes(rows(0.30, 0.90, samples_b=50), rows(0.30, 0.10)).height == 0  # too few samples
    assert reuse_changes(rows(0.5, 0.5), pl.DataFrame()).height == 0


def test_a_matched_request_names_the_source_that_reported_its_cached_tokens():
    """Engine and gateway rows joined: vLLM logs no cached tokens, so the joined value is the gateway's
    (litellm); SGLang reports them, so the value is the engine's."""
    raw = [{"request_id": f"{e}-{k}", "request_key": k, "source": src, "source_kind": kind, "cached_tokens": c}
           for e, k in (("v", "k1"), ("s", "k2"))
           for src, kind, c in ((("vllm_log" if e == "v" else "sglang_log"), "engine", None if e == "v" else 7),
                                ("litellm", "gateway", 5))]
    joined = conform("requests", pl.DataFrame([
        {"request_id": k, "request_key": k, "source": eng, "source_kind": "engine", "workload": "w",
         "deployment": "d", "arrival": T0, "prompt_tokens": 100, "cached_tokens": c}
        for k, eng, c in (("k1", "vllm_log", 5), ("k2", "sglang_log", 7))])).with_columns(
        pl.Series("engine_source", ["vllm_log", "sglang_log"]), pl.lit("litellm").alias("gateway_source"),
        pl.lit("both").alias("matched"))
    m = measured(connection(raw, joined=joined))
    assert m.select("source", "cached_tokens").sort("source").rows() == [("litellm", 5.0), ("sglang_log", 7.0)]
