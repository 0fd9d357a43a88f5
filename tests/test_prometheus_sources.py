"""Issue 18 inputs: Prometheus /metrics snapshots (`prometheus_text`: text 0.0.4 and OpenMetrics) and HTTP API
exports (`prometheus_api`) into metric_histograms, metric_counters and engine_steps kind `scrape`. The
fixtures (tests/fixtures/prometheus, README there) hold real vLLM V1 and SGLang /metrics output and
constructed exports; every expected figure below is read off the fixture by hand."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution import config, formats, reader, sources
from attribution.db import fetch
from attribution.errors import UsageError
from attribution.ingest import ingest, parse_path
from attribution.sources import prometheus_api
from attribution.store import Store

FIX = Path(__file__).resolve().parent / "fixtures" / "prometheus"
TESTS = Path(__file__).resolve().parent
ROWS = ("metric_histograms", "metric_counters", "engine_steps")


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


def _counts(pf) -> dict[str, int]:
    return {t: pf.tables[t].height for t in ROWS}


@pytest.mark.parametrize("rel,fmt,counts,deployment,ts", [
    # vLLM 0.10 (V1): 23 TTFT buckets + _count + _sum; 3 counters (the `_created` gauges make none); one
    # scrape row from running, waiting and kv_cache_usage_perc; time from the file name
    ("vllm-v1/metrics-1753795400.prom", "prometheus_text", (25, 3, 1), "vllm-v1", "2025-07-29T13:23:20"),
    ("sglang-r1/metrics-2025-07-10T08-00-00Z.prom", "prometheus_text", (0, 3, 1), "sglang-r1", "2025-07-10T08:00:00"),
    ("sglang-llama/metrics-1741996800.prom", "prometheus_text", (23, 0, 0), "sglang-llama", "2025-03-15T00:00:00"),
    # OpenMetrics: own timestamps (seconds); 2 engines -> 2 scrape rows; the summary and info make none
    ("openmetrics/vllm-om.txt", "prometheus_text", (5, 3, 2), "vllm-0", "2025-12-02T00:00:00"),
    # 2 pods x (23 buckets + count + sum) x 3 steps; 2 counters x 2 pods x 3 steps; 3 scrapes x 2 pods
    ("api/query_range-vllm.json", "prometheus_api", (150, 12, 6), "vllm-a", "2025-12-02T00:00:00"),
    ("api/promtool-range.json", "prometheus_api", (0, 6, 6), "vllm-a", "2025-12-02T00:00:00"),
    ("api/query-sglang.json", "prometheus_api", (4, 0, 1), "10.0.0.21:30000", "2025-12-02T00:00:01.500000"),
])
def test_each_fixture_gives_its_rows(rel, fmt, counts, deployment, ts):
    path = FIX / rel
    assert formats.sniff(reader.read_head(path).decode(), str(path)).name == fmt
    pf = parse_path(path)
    assert pf.source == fmt
    assert tuple(_counts(pf).values()) == counts
    assert pf.census["unrecognised"] == 0
    frames = [pf.tables[t] for t in ROWS if pf.tables[t].height]
    assert deployment in set(pl.concat([f.select("deployment") for f in frames])["deployment"])
    assert _ts(ts) in set(pl.concat([f.select("ts") for f in frames])["ts"])


def test_vllm_v1_snapshot_values():
    pf = parse_path(FIX / "vllm-v1/metrics-1753795400.prom")
    h = pf.tables["metric_histograms"]
    assert set(h["metric"]) == {"vllm:time_to_first_token_seconds"}
    assert set(h["model"]) == {"zai-org/GLM-4.5"} and set(h["series"]) == {"engine=0"}
    assert set(h["engine"]) == {"vllm"}
    b = h.filter(pl.col("part") == "bucket").sort("le")
    assert b["le"].to_list()[:3] == [0.001, 0.005, 0.01] and b["le"][-1] == float("inf")
    assert b.filter(pl.col("le") == 0.25)["value"].item() == 3.0
    assert h.filter(pl.col("part") == "sum")["value"].item() == 0.8875
    assert h.filter(pl.col("part") == "count")["le"].item() is None
    c = dict(pf.tables["metric_counters"].select("metric", "value").iter_rows())
    assert c == {"vllm:gpu_prefix_cache_hits_total": 0.0, "vllm:prefix_cache_queries_total": 32.0,
                 "vllm:prefix_cache_hits_total": 16.0}
    s = pf.tables["engine_steps"].row(0, named=True)
    assert (s["kind"], s["engine_index"], s["running"], s["waiting"]) == ("scrape", 0, 3, 1)
    assert s["kv_usage"] == pytest.approx(9.75010481363281e-06)
    # every line is counted: samples parsed (gauges folded into the scrape row), the rest skipped
    assert pf.census == {"parsed": 31, "skipped": 23, "unrecognised": 0}


def test_sglang_snapshot_maps_its_gauges():
    pf = parse_path(FIX / "sglang-r1/metrics-2025-07-10T08-00-00Z.prom")
    s = pf.tables["engine_steps"].row(0, named=True)
    assert (s["engine"], s["running"], s["waiting"], s["kv_usage"], s["kv_tokens"], s["gen_tput"]) == \
        ("sglang", 0, 0, 0.0, 0, 0.0)
    shapes = pf.tables["ingest_line_shapes"]
    unmapped = shapes.filter(pl.col("shape").str.starts_with("sglang:utilization{"))
    assert unmapped["class"].to_list() == ["skipped"]  # an unknown gauge is counted, by name, not dropped


def test_openmetrics_counters_exemplars_escapes_and_created():
    pf = parse_path(FIX / "openmetrics/vllm-om.txt")
    c = pf.tables["metric_counters"].sort("line")
    assert c["metric"].to_list() == ["vllm:prompt_tokens_total", "vllm:request_success_total",
                                     "vllm:request_success_total"]
    assert c["series"].to_list() == ["engine=0", "engine=0,finished_reason=stop", "engine=0,finished_reason=length"]
    assert set(c["deployment"]) == {"vllm-0"}  # the pod label
    h = pf.tables["metric_histograms"]
    assert h.filter(pl.col("le") == 1.0)["value"].item() == 10.0  # the exemplar after ` # ` ignored
    steps = pf.tables["engine_steps"].sort("engine_index")
    assert steps["engine_index"].to_list() == [0, 1] and steps["running"].to_list() == [5, 2]


def test_escaped_label_values_are_unescaped(tmp_path):
    p = tmp_path / "metrics-1764633600.prom"
    p.write_text('# TYPE vllm:request_success_total counter\n'
                 'vllm:request_success_total{model_name="a\\"b\\\\c\\nd",pod="p-1"} 3\n')
    pf = parse_path(p)
    assert pf.tables["metric_counters"]["model"].item() == 'a"b\\c\nd'


def test_bad_lines_are_errors_and_the_rest_is_kept():
    pf = parse_path(FIX / "broken/metrics-1764633600.prom")
    errs = dict(pf.errors.select("line", "reason").iter_rows())
    assert errs == {
        4: "sample value is not a finite number: dropped",  # NaN gauge
        5: "not a Prometheus sample line",
        7: "negative counter or bucket value: dropped",
        9: "histogram sample without a part (_bucket with le, _sum, _count): dropped",  # a bucket without le
        12: "sample value is not a number",
    }
    assert pf.tables["engine_steps"]["running"].to_list() == [3]
    assert pf.tables["metric_counters"]["metric"].to_list() == ["vllm:generation_tokens_total"]
    assert pf.tables["metric_histograms"]["line"].to_list() == [10, 11]
    assert set(pf.errors["file"]) == {str(FIX / "broken/metrics-1764633600.prom")}


def test_scrape_time_sample_then_file_name_then_mtime(tmp_path):
    body = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{pod=\"a\"}} 1{}\n"
    own = tmp_path / "metrics-1764633600.prom"
    own.write_text(body.format(" 1764637200000"))  # milliseconds in the 0.0.4 text format
    assert parse_path(own).tables["engine_steps"]["ts"].item() == _ts("2025-12-02T01:00:00")
    named = tmp_path / "snap" / "metrics-2025-12-02T02-30-00Z.prom.gz"
    named.parent.mkdir()
    named.write_bytes(gzip.compress(body.format("").encode()))
    assert parse_path(named).tables["engine_steps"]["ts"].item() == _ts("2025-12-02T02:30:00")
    bare = tmp_path / "pod-x.prom"
    bare.write_text(body.format(""))
    os.utime(bare, (1764640800, 1764640800))
    pf = parse_path(bare)
    assert pf.tables["engine_steps"]["ts"].item() == _ts("2025-12-02T02:00:00")
    assert "the scrape time is the file's mtime" in pf.errors["reason"].item()


def test_a_directory_of_snapshots_is_a_series_of_one_deployment(tmp_path):
    pod = tmp_path / "vllm-pod-7"
    pod.mkdir()
    for i, running in enumerate([2, 5, 3]):
        (pod / f"metrics-{1764633600 + 15 * i}.prom").write_text(
            f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n")
    ingest([str(pod)], tmp_path / "store", year=2026, tz="UTC", jobs=1)
    df = fetch(Store.open(tmp_path / "store").connect(), "select deployment, kind, running from engine_steps order by ts")
    assert df.rows() == [("vllm-pod-7", "scrape", 2), ("vllm-pod-7", "scrape", 5), ("vllm-pod-7", "scrape", 3)]


def test_deployment_labels_setting_chooses_the_label():
    path = FIX / "api/query_range-vllm.json"
    pf = parse_path(path, options={"deployment_labels": ["instance"]})
    h = pf.tables["metric_histograms"]
    assert set(h["deployment"]) == {"10.0.0.11:8000", "10.0.0.12:8000"}
    assert "pod=vllm-a" in h["series"][0] and "instance=" not in h["series"][0]
    # no label present: the ingest's file naming
    pf = parse_path(path, options={"deployment_labels": ["region"]})
    assert set(pf.tables["engine_steps"]["deployment"]) == {"query_range-vllm"}


def test_deployment_labels_from_the_config_file(tmp_path):
    (tmp_path / "attribution.toml").write_text('[prometheus]\ndeployment_labels = ["job", "pod"]\n')
    assert config.load_settings(cwd=tmp_path, env={}).deployment_labels == ("job", "pod")
    assert config.load_settings(cwd=tmp_path, env={"ATTRIBUTION_DEPLOYMENT_LABELS": "instance"}
                                ).deployment_labels == ("instance",)
    (tmp_path / "attribution.toml").write_text('[prometheus]\ndeployment_label = ["job"]\n')
    with pytest.raises(UsageError, match="prometheus.deployment_label"):
        config.load_settings(cwd=tmp_path, env={})
    (tmp_path / "attribution.toml").write_text('deployment_labels = ["not a label"]\n')
    with pytest.raises(UsageError, match="deployment_labels"):
        config.load_settings(cwd=tmp_path, env={})


def test_api_export_counter_reset_nan_and_unnamed_series():
    pf = parse_path(FIX / "api/query_range-vllm.json")
    c = pf.tables["metric_counters"].filter((pl.col("deployment") == "vllm-b")
                                            & (pl.col("metric") == "vllm:prefix_cache_hits_total")).sort("ts")
    assert c["value"].to_list() == [2000.0, 4800.0, 1200.0]  # raw, the reset kept for increase() to handle
    errs = pf.errors.sort("line")
    assert errs["line"].to_list() == [27, 57, 61]  # series indexes: two NaN samples, one series without a name
    assert errs["reason"][2].startswith("series without __name__")
    steps = pf.tables["engine_steps"].filter(pl.col("deployment") == "vllm-a").sort("ts")
    assert steps["waiting"].to_list() == [0, 1, None]
    assert steps["kv_usage"].to_list() == [0.0, 0.125, 0.5]
    # the unmapped gauge series is counted in the census by its name
    shapes = pf.tables["ingest_line_shapes"]
    assert shapes.filter(pl.col("shape") == "vllm:engine_sleep_state")["class"].to_list() == ["skipped"]


def test_api_sum_and_count_before_their_buckets_are_histogram_parts(monkeypatch):
    whole = parse_path(FIX / "api/query_range-vllm.json")
    # batches of 1 sample: `_sum`/`_count` series come before any `_bucket` and must wait for the end
    monkeypatch.setattr(prometheus_api, "BATCH_SAMPLES", 1)
    pf = parse_path(FIX / "api/query-sglang.json")
    h = pf.tables["metric_histograms"].sort("line")
    assert h["part"].to_list() == ["sum", "count", "bucket", "bucket"]
    assert pf.census == {"parsed": 6, "skipped": 0, "unrecognised": 0}
    monkeypatch.setattr(prometheus_api, "BATCH_SAMPLES", 7)
    small = parse_path(FIX / "api/query_range-vllm.json")
    for t in ("metric_histograms", "metric_counters"):
        cols = [c for c in whole.tables[t].columns if c != "line"]
        assert small.tables[t].select(cols).sort(cols).equals(whole.tables[t].select(cols).sort(cols))
    # a scrape's gauges split across batches are partial rows, folded into one by the store's view
    assert small.tables["engine_steps"].height > whole.tables["engine_steps"].height


def test_a_truncated_export_keeps_the_series_before_the_break(tmp_path):
    data = (FIX / "api/query_range-vllm.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    pf = parse_path(p)
    assert 0 < pf.tables["metric_histograms"].height < 150
    last = pf.errors.filter(pl.col("reason").str.contains("cut off"))
    assert last.height == 1 and last["line"].item() > 1


def test_text_read_in_small_chunks_gives_the_same_rows(tmp_path, monkeypatch):
    path = FIX / "vllm-v1/metrics-1753795400.prom"
    whole, chunked = parse_path(path), parse_path(path, chunk_bytes=512)
    for t in ("metric_histograms", "metric_counters"):
        assert chunked.tables[t].sort("line").equals(whole.tables[t].sort("line"))
    assert chunked.tables["engine_steps"].height == 2  # running in one chunk, waiting and KV in the next
    steps = "select deployment, engine_index, ts, running, waiting, kv_usage from engine_steps"
    ingest([str(path)], tmp_path / "one", tz="UTC", jobs=1)
    monkeypatch.setenv("ATTRIBUTION_CHUNK_BYTES", "512")
    ingest([str(path)], tmp_path / "chunked", tz="UTC", jobs=1)
    one, two = (fetch(Store.open(tmp_path / d).connect(), steps) for d in ("one", "chunked"))
    assert one.height == 1 and two.equals(one)
    assert one.row(0)[3:5] == (3, 1)


def test_the_prometheus_sources_claim_no_other_fixture():
    others = [p for d in ("cases", "fixtures") for p in (TESTS / d).rglob("*")
              if p.is_file() and "prometheus" not in p.parts and p.suffix not in (".md", ".py")
              and not p.name.endswith(".expected.json")]
    assert len(others) > 20
    reg = sources.registry()
    for p in others:
        head = reader.read_head(p).decode("utf-8", errors="replace")
        for name in ("prometheus_text", "prometheus_api"):
            assert reg[name].sniff(head, str(p)) < 0.5, f"{name} claims {p}"


def test_json_of_other_shapes_is_not_an_api_export():
    api = sources.registry()["prometheus_api"]
    assert api.sniff(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), "x") > 0.5
    assert api.sniff(json.dumps([{"model": "m", "startTime": 1}]), "x") == 0.0
    assert api.sniff(json.dumps({"data": [{"metric": 1}]}), "x") == 0.0


_FUZZ_LINES = [ln for rel in ("vllm-v1/metrics-1753795400.prom", "openmetrics/vllm-om.txt",
                              "broken/metrics-1764633600.prom")
               for ln in (FIX / rel).read_text().splitlines()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, len(_FUZZ_LINES) - 1), st.integers(0, 200),
                                st.sampled_from(["", "{", "}", '"', "\\", " # ", "NaN", "-", "\t", "é"])),
                      min_size=1, max_size=40))
def test_mutated_snapshots_never_crash_and_every_line_is_counted(tmp_path, picks):
    lines = []
    for i, cut, junk in picks:
        ln = _FUZZ_LINES[i]
        lines.append(ln[:cut] + junk + ln[cut:])
    p = tmp_path / "metrics-1764633600.prom"
    p.write_text("# TYPE vllm:num_requests_running gauge\n" + "\n".join(lines) + "\n")
    pf = parse_path(p, "prometheus_text")
    assert sum(pf.census.values()) == len(lines) + 1


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, 16970), junk=st.sampled_from([b"", b"}", b"]", b"x", b'"', b",,", b"[[1,"]))
def test_damaged_api_exports_never_crash(tmp_path, cut, junk):
    data = (FIX / "api/query_range-vllm.json").read_bytes()
    p = tmp_path / "export.json"
    p.write_bytes(data[:cut] + junk + data[cut:])
    pf = parse_path(p, "prometheus_api")
    assert pf.tables["metric_histograms"].height <= 150
