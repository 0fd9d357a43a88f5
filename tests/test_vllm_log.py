"""Parser-level tests of the vLLM console-log source: golden cases, the real logs in ../shared/traces, a 5 MB
Received line, chunk invariance, the request-key rule and flag privacy.

Real-log figures come from ../shared/traces/README.md or are counted here with `re`, independently of
the parser. The real logs are read in place, never copied (they carry no license).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from chunked_parse import parse_in_chunks

from attribution.keys import gateway_request_key, request_key
from attribution.sources import registry
from attribution.sources.vllm_config import parse_args_text, render_flag
from attribution.sources.vllm_log import SOURCES

SRC = SOURCES[0]
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
CASES = ROOT / "tests" / "cases" / "vllm_log"
DUMP = SHARED / "vllm_server_logs" / "01_2026_05_09_vllm_log_dump.txt"
REAL = SHARED / "real_logs"
REAL_VERSIONS = {
    "vllm_repo-jayashan10-Deepseek-qwen-deployment.log": "0.8.5.post1",
    "vllm_repo-abinavChandar-demo_env_l4.log": "0.11.0",
    "vllm_repo-2215860382-VedioSifter.log": "0.12.0",
    "vllm_repo-NnamdiOdozi-mlops-assignment.log": "0.22.1",
    "vllm_repo-sostrowsk-dgx-spark-local-llm.log": "0.25.1",
}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

needs_shared = pytest.mark.skipif(not DUMP.exists(), reason="../shared/traces not present")


def lines_of(data: bytes) -> pl.DataFrame:
    texts = data.decode("utf-8", errors="replace").split("\n")
    if texts and texts[-1] == "":
        texts.pop()
    return pl.DataFrame(
        {"line": range(1, len(texts) + 1), "text": texts}, schema={"line": pl.Int64, "text": pl.Utf8}
    )


def parse(data: bytes, *, year: int | None = 2025, tz: str = "UTC", chunk: int | None = None):
    """Parse like the ingest: chunks of complete lines sharing one ctx; tables conformed."""
    out, errors, _, ctx = parse_in_chunks(SRC, lines_of(data), year=year, tz=tz, chunk=chunk)
    errs = (
        pl.concat(errors)
        if errors
        else pl.DataFrame(schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8})
    )
    return out, errs, ctx


# --- golden cases -------------------------------------------------------------------------------------


def _same(actual, expected) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(actual, datetime):
        return actual == datetime.fromisoformat(expected).astimezone(UTC)
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=0, abs_tol=1e-9)
    return actual == expected


@pytest.mark.parametrize(
    "case", sorted(p.name.removesuffix(".expected.json") for p in CASES.glob("*.expected.json"))
)
def test_golden_case(case: str) -> None:
    spec = json.loads((CASES / f"{case}.expected.json").read_text())
    assert spec["format"] == "vllm_log"
    data = next(p for p in CASES.glob(f"{case}.*") if not p.name.endswith(".expected.json")).read_bytes()
    opts = spec["options"]
    tables, errors, _ = parse(data, year=opts.get("year"), tz=opts.get("tz", "UTC"))
    tables["ingest_errors"] = errors
    for table, want in spec["expect"].items():
        got = tables.get(table, pl.DataFrame(schema={"line": pl.Int64}))
        assert got.height == want["count"], f"{table}: {got.height} rows\n{got}"
        for row in want.get("rows", []):
            cands = got.filter(pl.col("line") == row["line"]).to_dicts()
            ok = any(all(_same(c.get(k), v) for k, v in row.items()) for c in cands)
            assert ok, f"{table}: no row matches {row}\ncandidates: {cands}"


# --- the real 0.20.1 console log ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def dump():
    data = DUMP.read_bytes()
    tables, errors, ctx = parse(data, year=2026)
    return data.decode("utf-8"), tables, errors


@needs_shared
def test_dump_stats(dump) -> None:
    text, tables, errors = dump
    all_steps = tables["engine_steps"].sort("line")
    steps = all_steps.filter(pl.col("kind") == "stats")
    n_stats = len(re.findall(r"\[loggers\.py:\d+\] Engine \d{3}: Avg prompt throughput", text))
    assert n_stats == 392
    assert steps.height == n_stats and set(all_steps["kind"]) == {"stats", "spec_decode"}
    assert errors.height == 0
    assert steps["running"].max() == 1 and steps["waiting"].max() == 0
    assert steps["prefix_hit_rate"][-1] == pytest.approx(0.88)
    assert steps["prefix_hit_rate"].max() == pytest.approx(0.882)
    assert steps["kv_usage"].max() == pytest.approx(0.019)
    assert steps["ts"][0] == datetime(2026, 5, 7, 20, 49, 53, tzinfo=UTC)
    assert steps["ts"][-1] == datetime(2026, 5, 9, 16, 26, 24, tzinfo=UTC)
    assert (steps["engine_index"] == 0).all()


@needs_shared
def test_dump_spec_decode(dump) -> None:
    """The 0.20 `SpecDecoding metrics` lines (320 in the dump); values of the first and last checked by hand."""
    text, tables, errors = dump
    spec = tables["engine_steps"].filter(pl.col("kind") == "spec_decode").sort("line")
    assert spec.height == text.count("] SpecDecoding metrics: ") == 320
    assert errors.height == 0
    first = spec.row(0, named=True)
    assert first["ts"] == datetime(2026, 5, 7, 20, 50, 3, tzinfo=UTC)
    assert first["accept_len"] == pytest.approx(2.40)
    assert (first["spec_accepted_tokens"], first["spec_drafted_tokens"]) == (133, 190)
    assert first["spec_accept_rate"] == pytest.approx(0.70)
    assert first["spec_accepted_tput"] == pytest.approx(0.44)
    assert first["spec_drafted_tput"] == pytest.approx(0.63)
    assert first["spec_position_rates"] == pytest.approx([0.779, 0.621])
    assert spec["spec_position_rates"].list.len().unique().to_list() == [2]  # num_speculative_tokens=2
    # accepted / drafted agrees with the printed rate to its one decimal
    ratio = spec["spec_accepted_tokens"] / spec["spec_drafted_tokens"]
    assert ((ratio - spec["spec_accept_rate"]).abs() <= 0.0005 + 1e-9).all()
    assert spec["running"].null_count() == spec.height  # no stats interval counts these rows
    assert (spec["engine_index"] == 0).all()  # from the `Engine 000:` stats line printed just before


@needs_shared
def test_dump_config_and_privacy(dump) -> None:
    _, tables, _ = dump
    cfg = tables["engine_config"]
    assert cfg["start_line"].n_unique() == 1
    assert set(cfg["version"].drop_nulls()) == {"0.20.1"}
    assert set(cfg["served_model"].drop_nulls()) == {"qwen3.6-35b"}
    assert cfg["kv_pool_tokens"].drop_nulls().to_list() == [5_745_965]
    assert cfg["max_running_requests"].drop_nulls().to_list() == [8]
    flags = {f["key"]: f["value"] for f in cfg["flags"].drop_nulls()[0]}
    assert flags["max_num_seqs"] == "8"
    assert flags["max_num_batched_tokens"] == "65536"
    assert flags["enable_prefix_caching"] == "true"
    assert json.loads(flags["speculative_config"]) == {
        "method": "qwen3_next_mtp",
        "num_speculative_tokens": 2,
    }
    assert json.loads(flags["api_key"]) == [hashlib.sha256(b"dummy-key").hexdigest()]
    for name, df in tables.items():
        dumped = df.select(
            pl.col(c).cast(pl.Utf8, strict=False) for c, t in df.schema.items() if not isinstance(t, pl.List)
        )
        assert "dummy-key" not in dumped.write_csv(), name
    assert "dummy-key" not in json.dumps(cfg["flags"].to_list())


@needs_shared
def test_dump_access_lines(dump) -> None:
    text, tables, _ = dump
    acc = tables["access_log"]
    assert acc.height == len(re.findall(r'INFO:\s+\S+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}', text)) == 283
    chat = acc.filter((pl.col("method") == "POST") & (pl.col("path") == "/v1/chat/completions"))
    assert chat.height == 257
    assert chat["http_status"].value_counts().sort("http_status").rows() == [(200, 256), (401, 1)]
    assert acc["ts"].null_count() == 0
    assert acc.sort("line")["ts"][-1] == datetime(2026, 5, 9, 16, 26, 24, tzinfo=UTC)


@needs_shared
def test_dump_chunk_invariant(dump) -> None:
    whole = dump[1]
    tables, errors, _ = parse(DUMP.read_bytes(), year=2026, chunk=37)
    assert errors.height == 0
    for name, df in whole.items():
        assert tables[name].sort("line").equals(df.sort("line")), name


# --- real logs from public repositories --------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", sorted(REAL_VERSIONS))
def test_real_log(name: str) -> None:
    data = (REAL / name).read_bytes()
    tables, errors, _ = parse(data, year=2025)
    assert errors.height == 0, errors
    assert set(tables["engine_config"]["version"].drop_nulls()) == {REAL_VERSIONS[name]}
    text = ANSI.sub("", data.decode("utf-8", errors="replace"))
    n_stats = len(re.findall(r"\] (?:Engine \d{3}: )?Avg prompt throughput: [\d.]+ tokens/s", text))
    assert n_stats > 0
    assert tables["engine_steps"].filter(pl.col("kind") == "stats").height == n_stats
    n_access = len(re.findall(r'INFO:\s+\S+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}', text))
    assert tables["access_log"].height == n_access


@needs_shared
def test_real_log_received_requests() -> None:
    data = (REAL / "vllm_repo-jayashan10-Deepseek-qwen-deployment.log").read_bytes()
    tables, _, _ = parse(data, year=2025)
    ids = re.findall(r"Received request (chatcmpl-[0-9a-f]{32}):", data.decode())
    req = tables["requests"].sort("line")
    assert len(ids) == 5 and req["request_id"].to_list() == ids
    assert req["request_key"].to_list() == [i.removeprefix("chatcmpl-") for i in ids]
    assert req["max_tokens"].to_list() == [128] * 5
    assert req["prompt_tokens"].null_count() == 5  # logged as `prompt_token_ids: None`
    assert set(req["engine_version"]) == {"0.8.5.post1"} and set(req["status"]) == {"received"}
    assert req["arrival"][0] == datetime(2025, 5, 12, 2, 47, 26, tzinfo=UTC)
    ev = tables["request_events"]
    assert sorted(ev["request_key"]) == sorted(req["request_key"]) and set(ev["event"]) == {"added"}
    assert not any("Solve" in str(v) for v in req.rows())  # never the prompt


@needs_shared
def test_real_log_v011_saturation() -> None:
    data = (REAL / "vllm_repo-abinavChandar-demo_env_l4.log").read_bytes()
    steps = parse(data, year=2025)[0]["engine_steps"]
    assert steps["waiting"].max() == 27
    assert steps["kv_usage"].max() == pytest.approx(1.0)


@needs_shared
def test_sniff() -> None:
    for path in [DUMP, *(REAL / n for n in REAL_VERSIONS)]:
        assert SRC.sniff(path.read_bytes()[:65536].decode("utf-8", errors="replace"), str(path)) >= 0.9, path
    sglang = next(REAL.glob("sglang_*.log")).read_bytes()[:65536].decode("utf-8", errors="replace")
    assert SRC.sniff(sglang, "sglang.log") == 0.0
    assert SRC.sniff("[2025-11-11 04:27:58] Prefill batch, #new-seq: 1, #new-token: 9", "x.log") == 0.0
    assert (
        SRC.sniff("INFO 02-01 06:36:05 llm_engine.py:921] Avg prompt throughput: 3.0 tokens/s", "x.log")
        >= 0.9
    )
    assert (
        SRC.sniff("INFO 02-01 06:36:05 async_llm_engine.py:110] Finished request cmpl-1-0.", "x.log") == 0.8
    )
    assert SRC.sniff("hello\nworld\n", "x.log") == 0.0
    assert registry()["vllm_log"] is SRC


# --- synthetic ---------------------------------------------------------------------------------------


def test_five_megabyte_received_line() -> None:
    n = 700_000
    ids = ", ".join(str(i % 151_000) for i in range(n))
    prompt = "fake: params: SamplingParams(max_tokens=3), prompt_token_ids: [1, 2] " * 50
    line = (
        f"INFO 05-11 12:04:17 [logger.py:39] Received request chatcmpl-{'ab' * 16}: prompt: '{prompt}', "
        f"params: SamplingParams(n=1, temperature=0.7, max_tokens=512, min_tokens=0), prompt_token_ids: [{ids}], "
        "lora_request: None, prompt_adapter_request: None."
    )
    assert len(line) > 5_000_000
    tables, errors, _ = parse(line.encode() + b"\nINFO 05-11 12:04:18 [engine.py:310] Added request x.\n")
    req = tables["requests"]
    assert errors.height == 0 and req.height == 1
    assert req["prompt_tokens"][0] == n and req["max_tokens"][0] == 512
    assert req["request_key"][0] == "ab" * 16
    assert all(len(str(v)) < 200 for v in req.row(0))


def test_cut_off_token_list_leaves_prompt_tokens_null() -> None:
    line = (
        "INFO 05-11 12:04:17 [logger.py:39] Received request cmpl-1-0: prompt: 'x', params: "
        "SamplingParams(n=1, max_tokens=5), prompt_token_ids: [1, 2, 3"
    )
    req = parse(line.encode())[0]["requests"]
    assert req["prompt_tokens"][0] is None and req["max_tokens"][0] == 5 and req["request_key"][0] == "1"


def test_received_without_id_is_an_error_without_the_prompt() -> None:
    line = "INFO 05-11 12:04:17 [logger.py:39] Received request : prompt: 'my secret prompt', params: x"
    tables, errors, _ = parse(line.encode())
    assert "requests" not in tables and errors["line"].to_list() == [1]
    assert "secret" not in errors["sample"][0]


def test_request_key_rule() -> None:
    df = pl.DataFrame(
        {
            "id": [
                "chatcmpl-a269fdcb7c6ce890-a8a65d16",
                "chatcmpl-a269fdcb7c6ce890",
                "cmpl-50c3-0",
                "cmpl-50c3-12",
                "cmpl-9c0e-0-1b2c3d4e",
                "my-req-deadbeef",
                "chatcmpl-x-DEADBEEF",
            ],
            "engine": [True, False, False, False, True, False, True],
        }
    )
    got = df.select(k=request_key(pl.col("id"), pl.col("engine")))["k"].to_list()
    assert got == [
        "a269fdcb7c6ce890",
        "a269fdcb7c6ce890",
        "50c3",
        "50c3",
        "9c0e",
        "my-req-deadbeef",
        "x-DEADBEEF",
    ]
    assert df.select(k=request_key(pl.col("id")))["k"][0] == "a269fdcb7c6ce890-a8a65d16"
    # a gateway's response id gets rule 3 only: one `cmpl-<id>` for every prompt of the call, so a client id
    # ending in `-<digits>` stays whole (the engine's `cmpl-<id>-<n>` folds to the same key)
    gw = pl.DataFrame({"id": ["cmpl-my-req-7", "chatcmpl-a269fdcb7c6ce890", "plain-1"]})
    assert gw.select(k=gateway_request_key(pl.col("id")))["k"].to_list() == ["my-req-7", "a269fdcb7c6ce890", "plain-1"]
    eng = pl.DataFrame({"id": ["cmpl-my-req-7-0"]})
    assert eng.select(k=request_key(pl.col("id")))["k"].to_list() == ["my-req-7"]


def test_args_parsing_and_secret_flags() -> None:
    ns = parse_args_text(
        "Namespace(model='m', port=8000, config_format=<ConfigFormat.AUTO: 'auto'>, chat_template='<think>', "
        "dispatch_function=<function ServeSubcommand.cmd at 0x7f66bd946950>, stop='', hf_token='hf_abc')"
    )
    assert ns == {
        "model": "m",
        "port": 8000,
        "config_format": "ConfigFormat.AUTO",
        "chat_template": "<think>",
        "dispatch_function": "function",
        "stop": "",
        "hf_token": "hf_abc",
    }
    assert render_flag("hf_token", "hf_abc") == hashlib.sha256(b"hf_abc").hexdigest()
    assert render_flag("max_num_batched_tokens", 8192) == "8192"
    assert render_flag("tokenizer", "org/tok") == "org/tok"
    assert render_flag("api_key", None) is None
    assert render_flag("served_model_name", ["a", "b"]) == '["a", "b"]'
    with pytest.raises(ValueError):
        parse_args_text("{'a': ")


def test_unparseable_args_line_is_an_error() -> None:
    line = "(APIServer pid=1) INFO 03-02 10:00:00 [utils.py:233] non-default args: {'api_key': 'sk-zzzzzzzzzz', 'x': "
    tables, errors, _ = parse(line.encode())
    assert errors["line"].to_list() == [1] and "sk-zzzz" not in errors["sample"][0]
