"""The analysis commands in-process: `analyze PATH` ingests and summarises; lengths, concurrency, latency and
capacity print the library's numbers in table, CSV and JSON form (hand-computed from six LiteLLM lines
written here), and errors become one message on stderr with the documented exit code."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from conftest import REPO, litellm_line
from typer.testing import CliRunner

from attribution import render
from attribution.analyses import analyze, parse_slo
from attribution.cli import app
from attribution.store import Store

BASE = 1739235379.0  # 2025-02-11T00:56:19Z
# (alias, start, first token, end, prompt, completion), seconds after BASE
REQUESTS = [
    ("search-backend", 0.0, 0.2, 1.2, 100, 11),
    ("chat-web", 0.5, 1.5, 3.5, 1000, 21),
    ("search-backend", 1.0, 1.4, 2.0, 300, 6),
    ("chat-web", 2.0, 2.1, 2.6, 2000, 1),
    ("chat-web", 3.0, 3.3, 4.0, 3000, 8),
    ("chat-web", 4.0, 4.2, 6.0, 4000, 10),
]
SLO = ["--slo", "ttft=0.5", "--slo", "tpot=150ms"]


def _litellm_line(i: int, *r) -> str:
    return litellm_line(i, *r, base=BASE)


@pytest.fixture
def logs(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "litellm.jsonl").write_text("\n".join(_litellm_line(i, *r) for i, r in enumerate(REQUESTS)) + "\n")
    return d


def cli(*args: str):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def cli_json(*args: str) -> dict:
    return json.loads(cli(*args, "--format", "json").stdout)


def same(a, b) -> bool:
    """Equal, floats to 1e-12 (parallel aggregation may sum in another order from run to run)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12, nan_ok=True)
    return a == b


def rows(doc: dict, table: str, **match) -> list[dict]:
    return [r for r in doc["tables"][table] if all(r.get(k) == v for k, v in match.items())]


def test_analyze_ingests_and_summarises(logs, store_dir):
    res = cli("analyze", str(logs), "--store", str(store_dir), *SLO, "--gpu-hour-cost", "2")
    out = res.stdout
    for title in ("worth a look", "token lengths by workload", "concurrency per pod", "latency by workload",
                  "goodput for ttft <= 0.5 s and tpot <= 0.15 s", "capacity per pod per day"):
        assert title in out
    assert "2,500" in out  # chat-web's mean prompt
    doc = cli_json("analyze", "--store", str(store_dir), *SLO, "--gpu-hour-cost", "2")
    (chat,) = rows(doc, "lengths", workload="chat-web", metric="prompt")
    assert (chat["requests"], chat["mean"], chat["p50"], chat["max"]) == (4, 2500, 2500, 4000)
    assert chat["p90"] == pytest.approx(3700)  # linear: 3000 + 0.7 * 1000
    assert chat["top1_share"] == pytest.approx(0.4)
    (search,) = rows(doc, "goodput", workload="search-backend")
    assert search["good_share_of_judged_requests"] == 1.0 and search["goodput_per_s"] == pytest.approx(0.5)  # 2 good / 4 s
    (pod,) = doc["tables"]["concurrency"]
    assert (pod["deployment"], pod["counted"], pod["peak"]) == ("10.0.0.5:8000", "in_system", 3)
    kinds = [f["kind"] for f in doc["tables"]["findings"]]
    assert kinds == ["long_prompts", "slo"]  # one prompt holds 40% (chat) or 75% (search) of the tokens; chat meets 50%
    assert any("queue time unknown for all 6" in n for n in doc["notes"])
    # the JSON holds the library's numbers
    lib = analyze(Store.open(store_dir).connect(), slo=parse_slo(SLO[1::2]), gpu_hour_cost=2.0).to_dict()
    assert same(json.loads(render.to_json(lib))["tables"], doc["tables"])


def test_lengths_table_csv_and_json_agree(logs, store_dir):
    cli("analyze", str(logs), "--store", str(store_dir), "--format", "json")
    doc = cli_json("lengths", "--store", str(store_dir))
    (search,) = rows(doc, "stats", workload="search-backend", metric="prompt_tokens")
    assert (search["mean"], search["tokens"], search["tok_p50"]) == (200, 400, 300)
    got = list(csv.DictReader(io.StringIO(cli("lengths", "--store", str(store_dir), "--format", "csv").stdout)))
    (row,) = [r for r in got if r["workload"] == "search-backend" and r["metric"] == "prompt_tokens"]
    assert float(row["mean"]) == 200 and int(row["tokens"]) == 400
    hist = list(csv.DictReader(io.StringIO(cli("lengths", "--store", str(store_dir), "--format", "csv", "--table",
                                               "histogram").stdout)))
    assert {(r["workload"], r["lo"]) for r in hist if r["metric"] == "prompt_tokens"} == {
        ("search-backend", "100"), ("search-backend", "252"), ("chat-web", "1000"), ("chat-web", "1996"),
        ("chat-web", "2512"), ("chat-web", "3982")}
    table = cli("lengths", "--store", str(store_dir), "--histogram").stdout
    assert "log-spaced histogram" in table and "prompt_tokens" in table
    by_all = cli_json("lengths", "--store", str(store_dir), "--by", "all")
    assert {r["group"] for r in by_all["tables"]["stats"]} == {"all"}


def test_concurrency_latency_and_capacity_commands(logs, store_dir):
    cli("analyze", str(logs), "--store", str(store_dir), "--format", "json")
    conc = cli_json("concurrency", "--store", str(store_dir), "--by", "all")
    stats = {r["metric"]: r for r in conc["tables"]["pods"]}
    assert set(stats) == {"in_system", "seen_at_arrival"}  # the gateway does not know the queue time
    assert stats["in_system"]["peak"] == 3 and stats["in_system"]["mean"] == pytest.approx(8.8 / 6, rel=1e-5)
    assert stats["seen_at_arrival"]["mean"] == pytest.approx(5 / 6)  # 0, 1, 2, 1, 1, 0
    lat = cli_json("latency", "--store", str(store_dir), *SLO)
    (chat,) = rows(lat, "goodput", workload="chat-web")
    assert (chat["requests"], chat["good"], chat["span_s"]) == (4, 2, 4.0)
    (ttft,) = rows(lat, "percentiles", workload="chat-web", metric="ttft_s")
    assert ttft["p50"] == pytest.approx(0.25, abs=1e-5)  # 1.0, 0.1, 0.3, 0.2
    (tpot,) = rows(lat, "percentiles", workload="chat-web", metric="tpot_s")
    assert tpot["requests"] == 3  # the one-token answer has no TPOT
    cap = cli_json("capacity", "--store", str(store_dir), "--gpu-hour-cost", "2")
    (c,) = cap["tables"]["capacity"]
    assert c["completed_per_day"] == pytest.approx(86400) and c["observed_peak"] == 3
    assert (c["running_limit"], c["limit_source"]) == (3, "observed peak")  # a gateway log states no limit
    assert c["capacity_per_day"] == pytest.approx(3 / (8.8 / 6) * 86400, rel=1e-5)
    (cost,) = cap["tables"]["cost"]
    assert cost["usd_per_m_output"] == pytest.approx(2 / (57 / 6 * 3600) * 1e6, rel=1e-5)
    day = cli_json("latency", "--store", str(store_dir), "--by", "day")
    assert {r["day"] for r in day["tables"]["percentiles"]} == {"2025-02-11"}
    window = cli_json("lengths", "--store", str(store_dir), "--since", "2.5s")  # newest arrival at 4 s
    assert {r["workload"] for r in window["tables"]["stats"]} == {"chat-web"}
    assert sum(r["requests"] for r in window["tables"]["stats"] if r["metric"] == "prompt_tokens") == 3


def test_errors_are_one_line_with_an_exit_code(logs, store_dir):
    cli("analyze", str(logs), "--store", str(store_dir), "--format", "json")
    bad = CliRunner().invoke(app, ["lengths", "--store", str(store_dir), "--format", "csv", "--table", "nope"])
    assert bad.exit_code != 0
    proc = subprocess.run([sys.executable, "-c", "from attribution.cli import main; main()", "latency", "--store",
                           str(store_dir), "--since", "yesterday"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    # one message, no traceback (Rich may wrap it at the console width)
    assert proc.stderr.startswith("error: 'yesterday' is not a time") and "Traceback" not in proc.stderr


def test_readme_command_on_sample_logs_matches_the_ground_truth(sample_store):
    """`attribution analyze sample_logs/` (the README's main command) against what the simulator that made the
    logs knows (sample_logs/ground_truth.json). On the session's store of sample_logs/: its ingest finds every
    file read already (ingesting into an empty store is test_analyze_ingests_and_summarises)."""
    logs = REPO / "sample_logs"
    truth = json.loads((logs / "ground_truth.json").read_text())
    store = str(sample_store)
    doc = cli_json("analyze", str(logs), "--store", store, "--year", "2026", "--tz", "UTC")
    for w in truth["workloads"]:
        (got,) = rows(doc, "lengths", workload=w["key_alias"], metric="prompt")
        assert got["requests"] == w["requests"] and got["mean"] == pytest.approx(w["prompt_tokens_mean"], rel=1e-12)
        for q in ("p50", "p90", "p99", "max"):
            assert got[q] == pytest.approx(w["prompt_tokens"][q], rel=1e-9), (w["key_alias"], q)
    # latency per engine version: vLLM logs carry no timings, so they come from the gateway, which measures
    # 6 ms more than the engine (4 ms before, 2 ms after it: README of sample_logs); SGLang's are the engine's
    for c in truth["cohorts"]:
        overhead = 0.006 if c["engine"] == "vllm" else 0.0
        # the SGLang log names no version: its cohort is the engine alone
        version = f"{c['engine']} {c['engine_version']}" if c["engine"] == "vllm" else c["engine"]
        (ttft,) = rows(doc, "latency", version=version, metric="ttft_s")
        (tpot,) = rows(doc, "latency", version=version, metric="tpot_s")
        for q in ("p50", "p90", "p99"):
            assert ttft[q] == pytest.approx(c["ttft_s"][q] + overhead, abs=2e-4), (version, q)
            assert tpot[q] == pytest.approx(c["tpot_s"][q], rel=1e-3), (version, q)
    conc = cli_json("concurrency", "--store", store, "--by", "all")
    for dep in {d["deployment"] for d in truth["deployments"]}:
        starts = [d for d in truth["deployments"] if d["deployment"] == dep]
        (in_flight,) = rows(conc, "pods", deployment=dep, metric="in_system")
        assert in_flight["peak"] == max(d["peak_in_flight"] for d in starts) and in_flight["source"] == "exact"
        (running,) = rows(conc, "pods", deployment=dep, metric="running")
        if running["source"] == "exact":  # SGLang logs say when each request was admitted
            assert running["peak"] == max(d["peak_running"] for d in starts)
        else:  # vLLM's are counted from its ten-second stats lines
            assert running["peak"] == max(d["stats"]["peak_running"] for d in starts)
            (waiting,) = rows(conc, "pods", deployment=dep, metric="waiting")
            assert waiting["peak"] == max(d["stats"]["peak_waiting"] for d in starts)
    assert {f["kind"] for f in doc["tables"]["findings"]} >= {"ceiling", "change"}


def test_empty_length_and_latency_tables_say_why(tmp_path, store_dir):
    """A vLLM log whose requests carry neither token ids (`prompt_token_ids: None`) nor an end: the lengths and
    latency tables are empty, and each command (and `analyze`) says how many requests there were and why,
    instead of an empty table alone (a real log, real_logs/vllm_repo-jayashan10-..., is of this kind); capacity
    names the pod without ended requests and the pod with step lines only."""
    case = REPO / "tests" / "cases" / "vllm_log" / "received_v08_added.log"
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "pod.log").write_bytes(case.read_bytes())
    stats = REPO / "tests" / "cases" / "vllm_log" / "v1_082_no_engine_prefix.log"  # engine step lines only
    (logs / "steps.log").write_bytes(stats.read_bytes())
    doc = cli_json("analyze", str(logs), "--store", str(store_dir), "--year", "2025", "--tz", "UTC")
    assert doc["tables"]["lengths"] == [] and doc["tables"]["latency"] == []
    for cmd, says in (("lengths", "1 request in the window, none with a known prompt, output or cached token"),
                      ("latency", "1 request in the window, none with a known queue, TTFT, TPOT or end-to-end")):
        assert any(says in n for n in doc["notes"]), (cmd, doc["notes"])
        alone = cli_json(cmd, "--store", str(store_dir))
        assert [n for n in alone["notes"] if says in n], (cmd, alone["notes"])
    capacity = cli_json("capacity", "--store", str(store_dir))["notes"]
    assert "no completed requests with an end time (e.g. arrival-only traces), so no capacity: pod" in capacity
    assert "no requests logged in the window (engine step lines only), so no capacity: steps" in capacity
