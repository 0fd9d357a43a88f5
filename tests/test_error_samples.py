"""Samples never carry content (issue 16, finding 3): an `ingest_errors.sample` keeps the part of a line before
its content (a prompt, messages, token ids) and masks keys; a line whose content cannot be located keeps its
shape. Planted prompts, token ids, keys and bearer tokens go through every error path: month-13 timestamps,
local times in the DST gap of `--tz Europe/Berlin`, bad numbers, truncated and incomplete JSON."""

from __future__ import annotations

import json

import polars as pl
import pytest

from attribution.db import fetch
from attribution.ingest import ingest
from attribution.schema import TABLES
from attribution.store import Store

PLANTED = ("PLANTED", "sk-PLANTEDKEY", "PLANTEDBEARER", "4711, 4712")


def received(stamp: str, n: int, extra: str = "max_tokens=32") -> str:
    return (f"INFO {stamp} [logger.py:39] Received request cmpl-{n:032x}-0: prompt: 'PLANTED prompt {n} "
            f"sk-PLANTEDKEY{n:020d}', params: SamplingParams(n=1, {extra}), prompt_token_ids: [4711, 4712], "
            "lora_request: None.")


def sglang_receive(stamp: str, n: int) -> str:
    return (f"[{stamp}] Receive: obj=GenerateReqInput(text='PLANTED sglang prompt {n}', input_ids=[4711, 4712], "
            f"rid='r{n}', stream=False)")


def litellm(n: int, **over) -> str:
    rec = {"id": f"chatcmpl-{n}", "call_type": "acompletion", "status": "success", "startTime": 1764500000.0 + n,
           "endTime": 1764500001.0 + n, "model": "m", "prompt_tokens": 9, "completion_tokens": 12,
           "messages": [{"role": "user", "content": f"PLANTED gateway prompt {n}"}],
           "metadata": {"user_api_key_alias": "a", "headers": {"Authorization": "Bearer PLANTEDBEARER0123456789"}}}
    rec.update(over)
    return json.dumps(rec)


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "vllm.log").write_text("\n".join([
        received("06-16 10:00:00", 1),
        received("13-16 10:00:01", 2),  # month 13
        received("03-29 02:30:00", 3),  # 2026-03-29 02:30 does not exist in Europe/Berlin
        received("06-16 10:00:02", 4, "max_tokens=99999999999999999999"),  # a number out of range
        received("06-16 10:00:03", 5, "max_tokens=1\u0665"),  # a non-ASCII digit
    ]) + "\n")
    (d / "sglang.log").write_text("\n".join([
        sglang_receive("2026-06-16 10:00:00", 1),
        sglang_receive("2026-13-16 10:00:01", 2),
        sglang_receive("0000-06-16 10:00:02", 3),
        "[2026-06-16 10:00:03] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.01, "
        "#running-req: 0, #queue-req: 99999999999999999999",
    ]) + "\n")
    full = litellm(3)
    (d / "litellm.jsonl").write_text("\n".join([
        litellm(1),
        full[: full.index("PLANTED") + 12],  # truncated inside the prompt
        litellm(2, startTime="yesterday"),  # a time that does not read
        litellm(4, startTime=1764500000000.0, endTime=1764500001000.0),  # epoch milliseconds
        litellm(5, api_key="sk-PLANTEDKEY0123456789", completion_tokens=-3),
    ]) + "\n")
    return d


def test_no_planted_content_anywhere_in_the_store(corpus, tmp_path):
    summary = ingest([str(corpus / "vllm.log"), str(corpus / "sglang.log")], tmp_path / "store", year=2026,
                     tz="Europe/Berlin")
    summary2 = ingest([str(corpus / "litellm.jsonl")], tmp_path / "store", fmt="litellm", tz="UTC")
    assert all(f.status == "read" for f in summary.files + summary2.files)
    con = Store.open(tmp_path / "store").connect()
    errors = fetch(con, "select file, line, reason, sample from ingest_errors order by file, line")
    # every error path above was taken (the line numbers of the planted lines)
    by_file = {f.rsplit("/", 1)[1]: set(g["line"].to_list()) for (f,), g in errors.group_by("file")}
    assert {2, 3}.issubset(by_file["vllm.log"])
    assert {2, 3, 4}.issubset(by_file["sglang.log"])
    assert {2, 3, 4, 5}.issubset(by_file["litellm.jsonl"])
    for table, schema in TABLES.items():
        text_cols = [c for c, t in schema.items() if t == pl.Utf8]
        df = fetch(con, f"select {', '.join(text_cols)} from {table}")
        for col in text_cols:
            for value in df[col].drop_nulls().to_list():
                assert not any(p in value for p in PLANTED), (table, col, value)
    # a located prompt: the sample keeps what comes before it (the request id, the reason is findable)
    vllm = errors.filter(pl.col("file").str.ends_with("vllm.log") & (pl.col("line") == 2))
    assert vllm["sample"][0].endswith("prompt: <removed>") and f"cmpl-{2:032x}" in vllm["sample"][0]
