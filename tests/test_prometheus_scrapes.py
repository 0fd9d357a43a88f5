"""Issue 18 item 2: Prometheus scrape rows next to a deployment's own log step lines. The `engine_steps` view
keeps a scrape only where the deployment's logs print no step line within 120 s of it, so concurrency, KV
usage and the threshold/memsplit step rows never count one window twice; figures from scrapes say they are
sampled at the scrape interval. The vLLM stats lines are built from the V1 format in
../shared/formats/engine-logs.md V-1; the snapshots are Prometheus text as in tests/fixtures/prometheus."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from attribution.analyses import GroupBy, select
from attribution.analyses.concurrency import concurrency
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.store import Store
from attribution.thresholds import load_catalogue, thresholds

T0 = 1796083200  # 2026-12-01T00:00:00Z


def _stats_line(sec: int, running: int, kv_pct: float) -> str:
    return (f"INFO 12-01 00:{sec // 60:02d}:{sec % 60:02d} [loggers.py:118] Engine 000: Avg prompt throughput: "
            f"10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: {kv_pct:.1f}%, Prefix cache hit rate: 0.0%")


def _snapshot(folder: Path, ts: int, running: int) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"metrics-{ts}.prom").write_text(
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.9\n')


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    tmp_path = tmp_path_factory.mktemp("scrapes")
    pod = tmp_path / "pod-a"
    pod.mkdir()
    # log step lines every 10 s from 00:00:00 to 00:01:00 (running 4)
    (pod / "vllm.log").write_text("".join(_stats_line(s, 4, 10.0) + "\n" for s in range(0, 61, 10)))
    # scrapes every 60 s from 00:00 to 00:10 (running 50): the first three overlap the log's lines
    for i in range(11):
        _snapshot(pod, T0 + 60 * i, 50)
    # a pod with scrapes only
    for i in range(3):
        _snapshot(tmp_path / "pod-b", T0 + 30 * i, 7 + i)
    ingest([str(pod), str(tmp_path / "pod-b")], tmp_path / "store", year=2026, tz="UTC", jobs=1)
    return Store.open(tmp_path / "store")


def test_scrapes_stand_only_where_the_logs_have_no_step_lines(store):
    con = store.connect()
    raw = fetch(con, "select deployment, kind, count(*) as n from raw_engine_steps group by all order by all")
    assert raw.rows() == [("pod-a", "scrape", 11), ("pod-a", "stats", 7), ("pod-b", "scrape", 3)]
    seen = fetch(con, "select deployment, kind, count(*) as n, max(running) as peak from engine_steps "
                      "group by all order by all")
    # pod-a: the scrapes at 00:00, 00:01 and 00:02 lie within 120 s of a log line (the last at 00:01:00);
    # 00:03 is 120 s after it: kept only when more than 120 s away, so 00:04 ... 00:10 (7) stay
    assert seen.rows() == [("pod-a", "scrape", 7, 50), ("pod-a", "stats", 7, 4), ("pod-b", "scrape", 3, 9)]


def test_concurrency_counts_each_window_once_and_labels_the_scrapes(store):
    con = store.connect()
    sel = select(con, by=GroupBy.deployment)
    res = concurrency(sel, per_group=False)
    pods = res.tables["pods"].filter(pl.col("metric") == "running")
    peaks = dict(pods.select("deployment", "peak").iter_rows())
    assert peaks == {"pod-a": 50.0, "pod-b": 9.0}
    notes = " | ".join(res.notes)
    assert "pod-b: running/waiting/KV sampled at the scrape interval (30 s) from 3 Prometheus scrapes;" in notes
    assert ("pod-a: running/waiting/KV sampled at the scrape interval (60 s) from 7 Prometheus scrapes where its "
            "logs have no step lines") in notes
    # the log's minute (7 lines, running 4) is counted once: its overlapping scrapes (running 50) are not in it
    lines = fetch(con, "select count(*) from engine_steps where deployment = 'pod-a' and running = 50 "
                       f"and ts < to_timestamp({T0 + 180})").item()
    assert lines == 0


def test_thresholds_say_their_step_rows_are_scrapes(store):
    con = store.connect()
    res = thresholds(select(con, by=GroupBy.deployment), load_catalogue(specs=["busy: running_requests > 5"]))
    notes = " | ".join(res.notes)
    assert "pod-a (every 60 s), pod-b (every 30 s) are Prometheus scrapes, sampled at the scrape interval" in notes
    # a window without scrapes says nothing of them
    res = thresholds(select(con, since="2026-11-30T00:00:00Z", until="2026-11-30T01:00:00Z"),
                     load_catalogue(specs=["busy: running_requests > 5"]))
    assert not any("Prometheus" in n for n in res.notes)


def test_two_exports_of_one_series_are_one_scrape(tmp_path):
    fix = Path(__file__).resolve().parent / "fixtures" / "prometheus" / "api"
    ingest([str(fix / "query_range-vllm.json"), str(fix / "promtool-range.json")], tmp_path / "s", tz="UTC", jobs=1)
    con = Store.open(tmp_path / "s").connect()
    assert fetch(con, "select count(*) from raw_engine_steps where deployment = 'vllm-a'").item() == 6
    df = fetch(con, "select running, waiting, kv_usage from engine_steps where deployment = 'vllm-a' order by ts")
    assert df.rows() == [(0, 0, 0.0), (4, 1, 0.125), (7, None, 0.5)]


# An SGLang start (the sample SGLang pod's, as in tests/test_memsplit_logged.py) whose logs print no step line:
# its running / queued / KV figures come from /metrics scrapes every 15 s (names as in sglang's
# python/sglang/srt/metrics/collector.py: num_running_reqs, num_queue_reqs, token_usage).
SGLANG_START = [
    "[2026-05-07 23:59:00] server_args=ServerArgs(model_path='Qwen/Qwen3.5-35B-A3B', tp_size=1, "
    "disable_radix_cache=False, mamba_full_memory_ratio=0.9)",
    "[2026-05-07 23:59:03] Mamba Cache is allocated. max_mamba_cache_size: 18, conv_state size: 0.03GB, "
    "ssm_state size: 1.11GB ",
    "[2026-05-07 23:59:04] KV Cache is allocated. #tokens: 65478, K size: 0.62 GB, V size: 0.62 GB",
    "[2026-05-07 23:59:06] max_total_num_tokens=65478, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=6, context_len=32768, available_gpu_mem=7.40 GB",
]
MAY8 = 1778198400  # 2026-05-08T00:00:00Z


def test_memsplit_on_scrape_gauges_says_sampled_at_the_scrape_interval(tmp_path):
    from attribution.memsplit import memsplit

    pod = tmp_path / "pod"
    pod.mkdir()
    (pod / "sglang.log").write_text("\n".join(SGLANG_START) + "\n")
    for i in range(8):
        (pod / f"metrics-{MAY8 + 15 * i}.prom").write_text(
            "# TYPE sglang:num_running_reqs gauge\n"
            f'sglang:num_running_reqs{{model_name="Qwen/Qwen3.5-35B-A3B",pod="pod"}} {6 if i % 2 else 4}\n'
            "# TYPE sglang:num_queue_reqs gauge\n"
            f'sglang:num_queue_reqs{{model_name="Qwen/Qwen3.5-35B-A3B",pod="pod"}} {i}\n'
            "# TYPE sglang:token_usage gauge\n"
            'sglang:token_usage{model_name="Qwen/Qwen3.5-35B-A3B",pod="pod"} 0.2\n')
    ingest([str(pod)], tmp_path / "store", tz="UTC", deployment="pod", jobs=1)
    res = memsplit(Store.open(tmp_path / "store").connect(), "qwen3.5-35b-a3b", run_whatif=False)
    (summary,) = res.tables["summary"].to_dicts()
    assert summary["scrape_interval_s"] == 15
    assert res.tables["demand"].row(0, named=True)["running_peak"] == 6  # the scrapes are the demand here
    notes = " | ".join(res.notes)
    assert "pod: running/waiting/KV sampled at the scrape interval (15 s) from 8 Prometheus scrapes" in notes
    assert "a lower bound of the true peak" in notes
    assert "scrape_interval_s" in res.definitions


def test_report_memsplit_line_says_sampled_at_the_scrape_interval():
    from datetime import UTC, datetime

    from attribution.analyses.common import Analysis
    from attribution.report.review_sections import memsplit_section

    row = {"deployment": "pod", "engine": "sglang", "started": datetime(2026, 5, 7, 23, 59, tzinfo=UTC),
           "status": "ok", "limit": "none", "scrape_interval_s": 15.0}

    class Inp:
        memsplit = Analysis("memsplit", {}, {"summary": pl.DataFrame([row]), "flags": pl.DataFrame(
            schema={"deployment": pl.Utf8, "flag": pl.Utf8, "value": pl.Utf8, "meaning": pl.Utf8}),
            "whatif": pl.DataFrame()}, {"summary": "s", "flags": "f", "whatif": "w"}, {}, [])

    (line,) = memsplit_section(Inp()).lines  # type: ignore[arg-type]
    assert "demand sampled at the scrape interval (15 s): its peak is a lower bound of the true peak" in line
