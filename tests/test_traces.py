"""Public traces (Azure 2023, Mooncake, BurstGPT): the real files under ../shared/traces are read through the
ingest's own path and compared with values computed here by the csv/json modules, and with the figures
published for them (../shared/traces/README.md)."""

from __future__ import annotations

import csv
import json
import math
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import shared

from attribution.errors import UsageError
from attribution.ingest import parse_path
from attribution.sources import registry
from attribution.sources.base import ParseContext
from attribution.sources.traces import DEFAULT_TRACE_START, file_stem, iso_to_utc, trace_start

CASES = Path(__file__).resolve().parent / "cases"

# Published: Splitwise (ISCA'24) medians as quoted in traces/README.md (coding prompt: the released sample's
# 1469, which the README reports beside the paper's rounded "~1500").
AZURE_2023 = {
    "AzureLLMInferenceTrace_code.csv": {"rows": 8819, "median_prompt": 1469, "median_output": 13},
    "AzureLLMInferenceTrace_conv.csv": {"rows": 19366, "median_prompt": 1020, "median_output": 129},
}


def _azure_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", sorted(AZURE_2023))
def test_azure_2023_matches_csv_module_and_published_figures(name):
    path = shared("traces", "azure_llm_2023", name)
    want = AZURE_2023[name]
    rows = _azure_csv(path)
    prompts = [int(r["ContextTokens"]) for r in rows]
    outputs = [int(r["GeneratedTokens"]) for r in rows]
    assert len(rows) == want["rows"]
    assert statistics.median(prompts) == want["median_prompt"]
    assert statistics.median(outputs) == want["median_output"]

    parsed = parse_path(path)  # sniffed, not forced
    assert parsed.source == "azure_trace"
    assert parsed.errors.height == 0
    req = parsed.tables["requests"].sort("line")
    assert req.height == want["rows"]
    assert req["prompt_tokens"].to_list() == prompts
    assert req["output_tokens"].to_list() == outputs
    # Naive 2023 times are stored as UTC; fromisoformat truncates the 7th fractional digit as we do.
    assert req["arrival"].to_list() == [
        datetime.fromisoformat(r["TIMESTAMP"]).replace(tzinfo=UTC) for r in rows
    ]
    assert req["line"].to_list() == list(range(2, len(rows) + 2))
    assert req["request_id"].n_unique() == req.height
    assert req["request_id"][0] == f"azure-{path.stem}-2"
    assert set(req["source_kind"]) == {"trace"}


def test_azure_chunked_read_gives_identical_rows():
    path = shared("traces", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv")
    whole = parse_path(path, "azure_trace").tables["requests"]
    pieces = parse_path(path, "azure_trace", chunk_bytes=4096).tables["requests"]
    assert pieces.height == whole.height
    assert pieces.sort("line").equals(whole.sort("line"))


def test_mooncake_conversation_matches_json_module_and_table_2():
    path = shared("traces", "mooncake", "conversation_trace.jsonl")
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    assert len(recs) == 12031
    assert round(statistics.fmean(r["input_length"] for r in recs)) == 12035
    assert round(statistics.fmean(r["output_length"] for r in recs)) == 343
    assert all(len(r["hash_ids"]) == math.ceil(r["input_length"] / 512) for r in recs)

    parsed = parse_path(path)
    assert parsed.source == "mooncake_trace"
    assert parsed.errors.height == 0
    req = parsed.tables["requests"].sort("line")
    assert req.height == 12031
    assert req["prompt_tokens"].to_list() == [r["input_length"] for r in recs]
    assert req["output_tokens"].to_list() == [r["output_length"] for r in recs]
    assert req["block_hashes"].to_list() == [r["hash_ids"] for r in recs]
    assert req["arrival"].to_list() == [
        DEFAULT_TRACE_START + timedelta(milliseconds=r["timestamp"]) for r in recs
    ]
    assert set(req["workload"]) == {"conversation"}


def test_mooncake_start_option_moves_time_zero():
    path = shared("traces", "mooncake", "synthetic_trace.jsonl")
    with open(path, encoding="utf-8") as fh:
        last_ms = [json.loads(line)["timestamp"] for line in fh if line.strip()][-1]
    req = parse_path(path, "mooncake_trace", options={"start": "2025-03-01T08:00:00+01:00"}).tables[
        "requests"
    ]
    req = req.sort("line")
    start = datetime(2025, 3, 1, 7, 0, tzinfo=UTC)
    assert req["arrival"][0] == start
    assert req["arrival"][-1] == start + timedelta(milliseconds=last_ms)


def test_burstgpt_fixture_against_csv_module():
    path = CASES / "burstgpt_trace" / "BurstGPT_1_head.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    start = datetime(2023, 5, 1, 0, 0, tzinfo=UTC)
    req = parse_path(path, "burstgpt_trace", options={"start": start}).tables["requests"].sort("line")
    assert req.height == len(rows) == 4
    assert req["arrival"].to_list() == [start + timedelta(seconds=float(r["Timestamp"])) for r in rows]
    assert req["model"].to_list() == [r["Model"] for r in rows]
    assert req["prompt_tokens"].to_list() == [int(r["Request tokens"]) for r in rows]
    assert req["output_tokens"].to_list() == [int(r["Response tokens"]) for r in rows]
    assert req["workload"].to_list() == [r["Log Type"] for r in rows]
    assert req["status"].to_list() == ["failed" if r["Response tokens"] == "0" else "ok" for r in rows]


def _ctx(**options) -> ParseContext:
    return ParseContext("t.csv", "d", None, None, "America/New_York", 0.0, options, {})


def test_trace_start_option_forms():
    assert trace_start(_ctx()) == DEFAULT_TRACE_START
    assert trace_start(_ctx(start="2024-05-10T00:00:00Z")) == datetime(2024, 5, 10, tzinfo=UTC)
    # A naive start is local time in --tz (EDT, UTC-4, in May).
    assert trace_start(_ctx(start="2024-05-10 00:00:00")) == datetime(2024, 5, 10, 4, tzinfo=UTC)
    assert trace_start(_ctx(start=datetime(2024, 5, 10, 1, tzinfo=UTC))) == datetime(
        2024, 5, 10, 1, tzinfo=UTC
    )
    with pytest.raises(UsageError):
        trace_start(_ctx(start="last tuesday"))


def test_iso_to_utc_forms():
    texts = [
        "2023-11-16 18:17:03.9799600",
        "2024-05-12 00:00:00+00:00",
        "2024-10-15T12:00:00.269Z",
        "2024-05-10 02:00:00.5-01:30",
        "2024-02-30 00:00:00",
        "yesterday",
    ]
    got = pl.select(iso_to_utc(pl.Series(texts))).to_series().to_list()
    assert got == [
        datetime(2023, 11, 16, 18, 17, 3, 979960, tzinfo=UTC),
        datetime(2024, 5, 12, tzinfo=UTC),
        datetime(2024, 10, 15, 12, 0, 0, 269000, tzinfo=UTC),
        datetime(2024, 5, 10, 3, 30, 0, 500000, tzinfo=UTC),
        None,
        None,
    ]


def test_file_stem_drops_compression_and_type():
    assert file_stem("/x/AzureLLMInferenceTrace_code.csv.gz") == "AzureLLMInferenceTrace_code"
    assert file_stem("conversation_trace.jsonl.zst") == "conversation_trace"
    assert file_stem("trace") == "trace"


def test_azure_header_only_in_first_chunk_is_remembered():
    """A 2025 file whose header sits in an earlier chunk: the 4-column layout must still be applied."""
    src = registry()["azure_trace"]
    ctx = ParseContext("AzureLMMInferenceTrace_multimodal.csv", "d", None, None, "UTC", 0.0, {}, {})
    first = pl.DataFrame({"line": [1], "text": ["TIMESTAMP,NumImages,ContextTokens,GeneratedTokens"]})
    assert src.parse(first, ctx).tables == {}
    second = pl.DataFrame({"line": [2], "text": ["2024-10-15T12:00:05.819Z,1,949,126"]})
    rows = src.parse(second, ctx).tables["requests"]
    assert rows.select("prompt_tokens", "output_tokens").row(0) == (949, 126)


def test_trace_sniffers_do_not_claim_each_other():
    ours = ["azure_trace", "burstgpt_trace", "mooncake_trace"]
    heads = {
        "azure_trace": "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n",
        "burstgpt_trace": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,x\n",
        "mooncake_trace": '{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]}\n',
    }
    qwen = (
        '{"chat_id": 1, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 9, "output_length": 3, '
        '"type": "text", "turn": 1, "hash_ids": [1]}\n'
    )
    for fmt, head in heads.items():
        scores = {name: registry()[name].sniff(head, "x") for name in ours}
        assert scores[fmt] >= 0.9
        assert all(v == 0 for k, v in scores.items() if k != fmt), scores
    assert registry()["mooncake_trace"].sniff(qwen, "qwen_traceA_blksz_16.jsonl") == 0
