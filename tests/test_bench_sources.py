"""Benchmark results (vllm bench serve, sglang.bench_serving) and vLLM OTLP spans: rows compared with values
worked out here from the fixtures with the json module. No real vLLM OTLP export or bench file was available;
the fixtures in tests/cases/{vllm_bench,sglang_bench,otel} follow formats/engine-logs.md V-5, V-6 and S-5."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from attribution.ingest import parse_path
from attribution.sources import registry

CASES = Path(__file__).resolve().parent / "cases"
OURS = ["vllm_bench", "sglang_bench", "otel", "azure_trace", "burstgpt_trace", "mooncake_trace"]


def _requests(parsed) -> list[dict]:
    return parsed.tables["requests"].sort("line").to_dicts()


def _expected_bench_rows(run: dict) -> list[dict]:
    """Per-request values as the benchmark scripts define them, from one run object."""
    rows = []
    for i, out in enumerate(run["output_lens"]):
        failed = bool(run["errors"][i]) or out == 0
        ttft = None if failed else run["ttfts"][i]
        lat = run.get("latencies")
        e2e = None if failed else (lat[i] if lat and lat[i] > 0 else run["ttfts"][i] + sum(run["itls"][i]))
        tpot = (e2e - ttft) / (out - 1) if e2e is not None and out > 1 else None
        rows.append(
            {
                "prompt_tokens": run["input_lens"][i],
                "output_tokens": out,
                "ttft_s": ttft,
                "e2e_s": e2e,
                "tpot_s": tpot,
                "status": "failed" if failed else "ok",
            }
        )
    return rows


def _same(got: dict, want: dict) -> None:
    for k, v in want.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v, abs=1e-9), k
        else:
            assert got[k] == v, k


def test_vllm_detailed_run_against_json_module():
    path = CASES / "vllm_bench" / "new_detailed.json"
    run = json.loads(path.read_text())
    parsed = parse_path(path, tz="Europe/Berlin")
    assert parsed.source == "vllm_bench"
    assert parsed.errors.height == 0
    got = _requests(parsed)
    assert len(got) == len(run["input_lens"])
    # `date` is written when the run ends, in the client's local time: the run began `duration` earlier.
    begin = datetime.strptime(run["date"], "%Y%m%d-%H%M%S").replace(tzinfo=ZoneInfo("Europe/Berlin"))
    begin = begin - timedelta(seconds=run["duration"])
    for i, (g, w) in enumerate(zip(got, _expected_bench_rows(run), strict=True)):
        _same(g, w)
        assert g["arrival"] == begin + timedelta(seconds=run["start_times"][i] - min(run["start_times"]))
        assert g["model"] == run["model_id"]
        assert g["request_id"] == f"vllm-bench-new_detailed-1-{i}"
        assert g["line"] == i + 1
    assert got[2]["error"].startswith("Traceback")


def test_old_script_run_without_start_times_or_latencies():
    path = CASES / "vllm_bench" / "old_script.json"
    run = json.loads(path.read_text())
    assert "request_goodput:" in run
    got = _requests(parse_path(path))
    for g, w in zip(got, _expected_bench_rows(run), strict=True):
        _same(g, w)
        assert g["arrival"] is None and g["finished"] is None


def test_generated_texts_are_never_stored():
    for path in sorted((CASES / "vllm_bench").glob("*.json*")) + [CASES / "sglang_bench" / "runs.jsonl"]:
        if path.name.endswith(".expected.json"):
            continue
        texts = set()
        for line in path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]:
            texts |= {t for t in json.loads(line).get("generated_texts", []) if len(t) > 1}
        df = parse_path(path).tables["requests"]
        stored = {v for c in df.columns if df[c].dtype == pl.Utf8 for v in df[c].drop_nulls()}
        assert not any(t in v for t in texts for v in stored), path.name


def _write(tmp_path: Path, name: str, docs: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(docs))
    return p


def _run(date: str, duration: float, starts: list[float]) -> dict:
    n = len(starts)
    return {
        "date": date,
        "model_id": "m",
        "tokenizer_id": "m",
        "num_prompts": n,
        "duration": duration,
        "input_lens": [10] * n,
        "output_lens": [2] * n,
        "ttfts": [0.1] * n,
        "itls": [[0.1]] * n,
        "start_times": starts,
        "errors": [""] * n,
    }


def test_start_option_moves_first_run_and_keeps_run_spacing(tmp_path):
    p = _write(
        tmp_path,
        "sweep.jsonl",
        [
            json.dumps(_run("20250616-120010", 10.0, [5.0, 6.5])),
            json.dumps(_run("20250616-121010", 10.0, [900.0])),
        ],
    )
    without = _requests(parse_path(p, "vllm_bench", tz="UTC"))
    assert [r["arrival"] for r in without] == [
        datetime(2025, 6, 16, 12, 0, 0, tzinfo=UTC),
        datetime(2025, 6, 16, 12, 0, 1, 500000, tzinfo=UTC),
        datetime(2025, 6, 16, 12, 10, 0, tzinfo=UTC),
    ]
    moved = _requests(parse_path(p, "vllm_bench", tz="UTC", options={"start": "2025-01-01T00:00:00Z"}))
    assert [r["arrival"] for r in moved] == [
        datetime(2025, 1, 1, 0, 0, 0, tzinfo=UTC),
        datetime(2025, 1, 1, 0, 0, 1, 500000, tzinfo=UTC),
        datetime(2025, 1, 1, 0, 10, 0, tzinfo=UTC),
    ]
    assert [r["request_id"] for r in moved] == [
        "vllm-bench-sweep-1-0",
        "vllm-bench-sweep-1-1",
        "vllm-bench-sweep-2-0",
    ]


def test_bad_runs_are_errors_and_do_not_stop_the_file(tmp_path):
    unequal = _run("20250616-120010", 10.0, [1.0, 2.0])
    unequal["ttfts"] = [0.1]
    p = _write(
        tmp_path,
        "bad.jsonl",
        [
            json.dumps(_run("20250616-120010", 10.0, [1.0])),
            json.dumps(_run("20250616-120010", 1.0, [1.0]))[:40],
            json.dumps(unequal),
        ],
    )
    parsed = parse_path(p, "vllm_bench", tz="UTC")
    errs = parsed.errors.sort("line")
    assert errs["line"].to_list() == [2, 3]
    assert errs["reason"][0].startswith("not valid JSON")
    assert "differ in length" in errs["reason"][1]
    assert [r["request_id"] for r in _requests(parsed)] == ["vllm-bench-bad-1-0"]


def test_sglang_runs_against_json_module():
    path = CASES / "sglang_bench" / "runs.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    assert "input_lens" not in runs[0]
    parsed = parse_path(path)
    assert parsed.source == "sglang_bench"
    assert parsed.errors.height == 0
    got = _requests(parsed)
    for g, w, cached in zip(got, _expected_bench_rows(runs[1]), runs[1]["cached_tokens"], strict=True):
        _same(g, w)
        assert g["cached_tokens"] == cached
        assert g["arrival"] is None
        assert g["model"] == runs[1]["server_info"]["model_path"]


def test_sglang_runs_without_details_give_nothing(tmp_path):
    run = json.loads((CASES / "sglang_bench" / "runs.jsonl").read_text().splitlines()[0])
    p = _write(tmp_path, "summary.jsonl", [json.dumps(run), json.dumps(run)])
    parsed = parse_path(p)
    assert parsed.source == "sglang_bench"
    assert _requests(parsed) == [] and parsed.errors.height == 0


def _span_attrs(span: dict) -> dict:
    out = {}
    for a in span.get("attributes", []):
        (v,) = a["value"].values()
        out[a["key"]] = v
    return out


def test_otel_spans_against_json_module():
    path = CASES / "otel" / "collector.jsonl"
    want = []
    for doc in map(json.loads, path.read_text().splitlines()):
        for rs in doc.get("resourceSpans", []):
            res = _span_attrs(rs["resource"])
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        want.append((res, sp, _span_attrs(sp)))
    parsed = parse_path(path, deployment="pod-a")
    assert parsed.source == "otel"
    got = _requests(parsed)
    assert len(got) == len(want) == 2
    for g, (res, sp, a) in zip(got, want, strict=True):
        start = datetime.fromtimestamp(int(sp["startTimeUnixNano"]) // 1000 / 1e6, UTC)
        assert g["arrival"] == start
        assert g["finished"] == datetime.fromtimestamp(int(sp["endTimeUnixNano"]) // 1000 / 1e6, UTC)
        assert g["request_id"] == a["gen_ai.request.id"]
        assert g["deployment"] == res.get("k8s.pod.name", res.get("host.name"))
        assert g["prompt_tokens"] == int(a["gen_ai.usage.prompt_tokens"])
        assert g["output_tokens"] == int(a["gen_ai.usage.completion_tokens"])
        assert g["ttft_s"] == pytest.approx(a["gen_ai.latency.time_to_first_token"])
        assert g["e2e_s"] == pytest.approx(a["gen_ai.latency.e2e"])
        assert g["queue_s"] == pytest.approx(a["gen_ai.latency.time_in_queue"])
        assert g["prefill_s"] == a.get("gen_ai.latency.time_in_model_prefill")
        assert g["model"] == a.get("gen_ai.response.model")
        out = g["output_tokens"]
        if out > 1:
            assert g["tpot_s"] == pytest.approx((g["e2e_s"] - g["ttft_s"]) / (out - 1))
        assert g["status"] == ("error" if sp["status"].get("code") == 2 else "ok")
        assert g["engine"] == "vllm"


def test_otel_truncated_export_line_is_an_error(tmp_path):
    lines = (CASES / "otel" / "collector.jsonl").read_text().splitlines()
    p = _write(tmp_path, "otel.jsonl", [lines[0], lines[2][: len(lines[2]) // 2], lines[2]])
    parsed = parse_path(p, "otel")
    assert parsed.errors["line"].to_list() == [2]
    assert [r["request_id"] for r in _requests(parsed)] == ["chatcmpl-abc123-0a1b2c3d", "cmpl-xyz"]


LITELLM_LIKE = (
    '{"id": "chatcmpl-9870a859d6df402795f75dc5fca5b2e0", "call_type": "acompletion", "stream": true, '
    '"status": "success", "startTime": 1739235379.683053, "model": "my-fake-model", '
    '"total_tokens": 21, "prompt_tokens": 9, "completion_tokens": 12, "model_id": "b68d"}\n'
)


@pytest.mark.parametrize(
    "fmt", ["vllm_bench", "sglang_bench", "otel", "azure_trace", "burstgpt_trace", "mooncake_trace"]
)
def test_each_case_file_is_claimed_by_its_own_source_only(fmt):
    files = [p for p in (CASES / fmt).iterdir() if not p.name.endswith(".expected.json")]
    assert files
    for p in files:
        head = p.read_text()[: 64 * 1024]
        scores = {name: registry()[name].sniff(head, str(p)) for name in OURS}
        assert scores[fmt] >= 0.9, (p.name, scores)
        assert all(v < 0.5 for k, v in scores.items() if k != fmt), (p.name, scores)


def test_gateway_json_is_not_claimed():
    assert all(registry()[name].sniff(LITELLM_LIKE, "spend.jsonl") < 0.5 for name in OURS)


def test_tpot_definition_needs_two_tokens():
    """tpot = (e2e - ttft) / (output - 1): one output token has no inter-token time."""
    got = _requests(parse_path(CASES / "vllm_bench" / "new_detailed.json", tz="UTC"))
    assert got[1]["output_tokens"] == 1 and got[1]["tpot_s"] is None
    assert math.isclose(got[0]["tpot_s"], (0.5 - 0.25) / 3)
