"""Issue 18: `thresholds` and `lengths` on a window without per-request rows read the engines' token
histograms (attribution/thresholds/buckets.py): a threshold on a bucket edge is counted exactly, one off an
edge is a bound naming the edges around it, labelled bucket-derived, per deployment and model, apart from the
exact tables. Inputs: the /metrics snapshots of tests/fixtures/prometheus/vllm-v1-lengths (vLLM V1 names and
`build_1_2_5_buckets(32768)` edges, read from vllm/v1/metrics/loggers.py; counts constructed) and
sample_logs/prometheus. Every expected figure is read off the fixture by hand."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, run_cli

from attribution.analyses import lengths, select
from attribution.histograms.tables import Hist
from attribution.ingest import ingest
from attribution.schema import conform
from attribution.store import Store
from attribution.thresholds import load_catalogue, thresholds
from attribution.thresholds.buckets import crossed

FIX = Path(__file__).resolve().parent / "fixtures" / "prometheus" / "vllm-v1-lengths"
SPECS = ["on_edge: kv_len_at_prefill > 5000", "off_edge: kv_len_at_prefill > 8192",
         "at_least: prompt_tokens >= 5000", "short_out: output_tokens < 100", "peak: peak_kv_len > 4096"]
NAMES = [s.split(":")[0] for s in SPECS]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    root = tmp_path_factory.mktemp("buckets")
    ingest([str(FIX)], root / "store", year=2026, tz="UTC", jobs=1)
    return Store.open(root / "store")


def _rows(res) -> dict[str, dict]:
    return {r["feature"]: r for r in res.tables["histogram_requests"].iter_rows(named=True)}


def test_thresholds_from_the_prompt_histogram_exact_on_an_edge_and_a_bound_off_it(store):
    res = thresholds(select(store.connect(), by="all"), load_catalogue(specs=SPECS), features=NAMES)
    assert res.tables["requests"].is_empty()  # no per-request rows: the exact table stays empty
    rows = _rows(res)
    # the window's increase: the second scrape holds twice the first's counts, so 100 prompts, 80 of them <= 5000
    on = rows["on_edge"]
    assert (on["requests"], on["crossed_at_least"], on["crossed_at_most"], on["exact"]) == (100, 20, 20, True)
    assert on["answer"].startswith("exactly 20") and on["label"] == "bucket-derived"
    assert (on["deployment"], on["model"], on["metric"]) == ("vllm-v1-lengths", "Qwen/Qwen3-8B",
                                                              "vllm:request_prompt_tokens")
    off = rows["off_edge"]  # 8192 lies in (5000, 10000]: at least the 10 above 10000, at most the 20 above 5000
    assert (off["crossed_at_least"], off["crossed_at_most"], off["exact"]) == (10, 20, False)
    assert (off["edge_below"], off["edge_above"]) == (5000, 10000)
    assert "at least 10, at most 20" in off["answer"] and "nearest are 5000 and 10000" in off["answer"]
    # >= 5000 on whole tokens is > 4999: a prompt of exactly 5000 sits in (2000, 5000], so it is a bound
    ge = rows["at_least"]
    assert (ge["crossed_at_least"], ge["crossed_at_most"], ge["edge_below"], ge["edge_above"]) == (20, 40, 2000, 5000)
    lt = rows["short_out"]  # output < 100 = not > 99: between the 10 <= 50 and the 30 <= 100
    assert (lt["metric"], lt["crossed_at_least"], lt["crossed_at_most"]) == ("vllm:request_generation_tokens", 10, 30)
    assert "peak" not in rows  # prompt + output of one request: no histogram sees it
    notes = " | ".join(res.notes)
    assert "no per-request rows in this window" in notes and "peak (peak_kv_len)" in notes
    assert "histogram_requests" in res.definitions


def test_a_window_without_samples_gives_no_histogram_table(store):
    res = thresholds(select(store.connect(), since="2025-01-01", until="2025-01-02"),
                     load_catalogue(specs=SPECS[:1]), features=NAMES[:1])
    assert "histogram_requests" not in res.tables


def test_per_request_rows_keep_the_exact_tables_and_never_mix_in_buckets(tmp_path):
    ingest([str(FIX)], tmp_path / "store", year=2026, tz="UTC", jobs=1)
    store = Store.open(tmp_path / "store")
    reqs = [{"request_id": f"r{i}", "source_kind": "bench", "deployment": "vllm-v1-lengths", "model": "Qwen/Qwen3-8B",
             "arrival": datetime(2025, 12, 2, 0, 10, i, tzinfo=UTC), "prompt_tokens": 6000 + i, "output_tokens": 10,
             "status": "ok"} for i in range(3)]
    with store.writer() as w:
        w.commit([w.write("requests", conform("requests", pl.DataFrame(reqs)), file_key=None, sealed=True)], [], {})
    res = thresholds(select(store.connect(), by="all"), load_catalogue(specs=SPECS[:1]), features=NAMES[:1])
    assert "histogram_requests" not in res.tables
    assert res.tables["requests"].row(0, named=True)["crossed"] == 3


def test_crossed_complements_for_less_than():
    h = Hist("d", "m", "vllm", "x", "prompt", [10.0, 100.0, math.inf], [5.0, 8.0, 10.0], None, None)
    # <= 10: exactly the 5 at or below the edge; < 10 = not > 9: between 0 and 5
    assert (crossed("<=", 10, h).at_least, crossed("<=", 10, h).at_most) == (5, 5)
    assert (crossed("<", 10, h).at_least, crossed("<", 10, h).at_most) == (0, 5)
    assert (crossed(">", 50, h).at_least, crossed(">", 50, h).at_most) == (2, 5)


def test_lengths_without_per_request_rows_say_so_and_give_the_bucket_counts(store):
    res = lengths(select(store.connect()))
    assert res.tables["stats"].is_empty()
    buckets = res.tables["histogram_buckets"].filter(pl.col("counts") == "prompt")
    got = {r["hi"]: r["observations"] for r in buckets.iter_rows(named=True)}
    assert got[5000] == 20 and got[10000] == 10 and got[math.inf] == 2 and sum(got.values()) == 100
    assert buckets.filter(pl.col("hi") == 5000)["lo"].item() == 2000
    assert any("no per-request rows in this window" in n for n in res.notes)


def test_cli_report_and_json_say_bucket_derived(store, capsys, tmp_path):
    code, out, err = run_cli(capsys, "thresholds", "--store", str(store.root), "--threshold", SPECS[1],
                             "--feature", "off_edge", "--format", "json")
    assert code == 0, err
    row = json.loads(out)["tables"]["histogram_requests"][0]
    assert row["label"] == "bucket-derived" and not row["exact"]
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "report", "--store", str(store.root), "--format", "json", "--out", str(report),
                           "-q")
    assert code == 0, err
    sections = {s["id"]: s for s in json.loads(report.read_text())["sections"]}
    thr = sections["thresholds"]  # the bundled catalogue's 95,000-token feature: above the top edge 20000
    assert "bucket-derived" in thr["title"]
    assert any(line.startswith("writeup.sparse_prefill_95k on vllm-v1-lengths") and "at least 0, at most 2" in line
               for line in thr["lines"])


def test_dashboard_thresholds_and_lengths_pages_answer_from_buckets(store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTRIBUTION_STORE", str(store.root))
    at = AppTest.from_file(str(REPO / "dashboards" / "app.py"), default_timeout=240)
    at.switch_page("app_pages/thresholds.py")
    at.run()
    assert not at.exception, at.exception[0].message
    heads = [el.value for el in at.main if type(el).__name__ == "Subheader"]
    assert any("bucket-derived" in h for h in heads)
    at.switch_page("app_pages/lengths.py")
    at.run()
    assert not at.exception, at.exception[0].message
    heads = [el.value for el in at.main if type(el).__name__ == "Subheader"]
    assert any("Prometheus histograms" in h for h in heads)


@pytest.mark.slow
def test_sample_logs_prometheus_exports_alone(tmp_path):
    """The cheaper fixture test above covers the behaviour; this one runs it on the demo's query_range export."""
    ingest([str(REPO / "sample_logs" / "prometheus" / "qwen35-vllm-0.json.gz")], tmp_path / "store", year=2026,
           tz="UTC", jobs=1)
    con = Store.open(tmp_path / "store").connect()
    res = thresholds(select(con, by="all"), load_catalogue(specs=["edge: kv_len_at_prefill > 50000",
                                                                  "off: kv_len_at_prefill > 95000"]),
                     features=["edge", "off"])
    rows = _rows(res)
    assert rows["edge"]["exact"] and rows["edge"]["deployment"] == "qwen35-vllm-0"
    off = rows["off"]
    assert not off["exact"] and (off["edge_below"], off["edge_above"]) == (50000, 100000)
    assert off["crossed_at_most"] == rows["edge"]["crossed_at_least"]  # above 50000 bounds above 95000
