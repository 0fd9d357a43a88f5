"""No secret and no prompt text reaches the store, whatever the input format.

Every format that can carry them gets a file with a planted raw API key, a Bearer token and prompt/response
text (and, for vLLM, prompt token ids); after an ingest, every value of every Parquet file and every byte of
the commit log is searched for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from attribution.ingest import ingest

KEY = "sk-live-PLANTEDKEY0123456789"
BEARER = "PLANTEDBEARER0123456789xyz"
PROMPT = "PLANTED PROMPT the quick brown fox"
ANSWER = "PLANTED ANSWER jumps over"
TOKEN_ID = "987654321"
NEEDLES = [KEY, BEARER, "PLANTED PROMPT", "PLANTED ANSWER", TOKEN_ID]


def _inputs(d: Path) -> dict[str, str]:
    """File name -> the format it must be read as."""
    (d / "pod-a.log").write_text(
        "(APIServer pid=1) INFO 05-07 20:39:32 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-8B', "
        f"'api_key': ['{KEY}'], 'max_num_seqs': 8}}\n"
        f"(APIServer pid=1) INFO 05-07 20:40:00 [logger.py:39] Received request chatcmpl-a269fdcb7c6ce890: "
        f"prompt: '{PROMPT} {KEY}', params: SamplingParams(n=1, max_tokens=100), prompt_token_ids: "
        f"[{TOKEN_ID}, 11, 12], lora_request: None, prompt_adapter_request: None.\n"
        "(APIServer pid=1) INFO 05-07 20:40:00 [async_llm.py:382] Added request chatcmpl-a269fdcb7c6ce890.\n"
        f"(APIServer pid=1) INFO 05-07 20:40:01 [logger.py:49] Generated response chatcmpl-a269fdcb7c6ce890: "
        f"output: '{ANSWER}', output_token_ids: [{TOKEN_ID}], finish_reason: stop\n"
    )
    (d / "sglang-pod.log").write_text(
        f"[2025-09-03 18:33:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', api_key='{KEY}', tp_size=1)\n"
        f"[2025-09-03 18:33:18] Receive: obj=GenerateReqInput(text='{PROMPT}', input_ids=[{TOKEN_ID}, 5], "
        "rid='abc123', stream=False)\n"
        f"[2025-09-03 18:33:19] Finish: obj=GenerateReqInput(text='{PROMPT}', rid='abc123'), out={{'text': "
        f"'{ANSWER}', 'output_ids': [{TOKEN_ID}], 'meta_info': {{'id': 'abc123', 'finish_reason': {{'type': "
        "'stop', 'matched': 1}, 'prompt_tokens': 50, 'completion_tokens': 97, 'cached_tokens': 1, "
        "'e2e_latency': 0.66}}\n"
        "[2025-09-03 18:33:19] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, \n"
    )
    params = json.dumps({"text": PROMPT, "rid": "r1", "sampling_params": {"max_new_tokens": 8}})
    (d / "sglang-request-metrics-20250903_18.log").write_text(json.dumps(
        {"request_parameters": params, "id": "r1", "finish_reason": {"type": "stop"}, "prompt_tokens": 5,
         "completion_tokens": 3, "cached_tokens": 0, "e2e_latency": 0.5}) + "\n")
    slp = {
        "id": "chatcmpl-a269fdcb7c6ce890", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": 1739235379.5, "endTime": 1739235380.5, "completionStartTime": 1739235379.75,
        "model": "hosted_vllm/Qwen/Qwen3-8B", "model_group": "qwen", "api_base": "http://10.0.0.5:8000/v1",
        "prompt_tokens": 812, "completion_tokens": 64,
        "metadata": {"user_api_key_hash": KEY, "user_api_key_alias": "search-backend",
                     "requester_custom_headers": {"authorization": f"Bearer {BEARER}"}},
        "messages": [{"role": "user", "content": PROMPT}],
        "response": {"choices": [{"message": {"content": ANSWER}}]},
        "proxy_server_request": {"headers": {"authorization": f"Bearer {BEARER}"}, "body": {"messages": PROMPT}},
    }
    (d / "litellm.jsonl").write_text(json.dumps(slp) + "\n")
    (d / "litellm-array.json").write_text(json.dumps([slp]))
    header = ("request_id,call_type,api_key,spend,total_tokens,prompt_tokens,completion_tokens,startTime,endTime,"
              "completionStartTime,model,model_group,api_base,user,metadata,messages,response,status,"
              "proxy_server_request")
    meta = json.dumps({"user_api_key_alias": "search-backend"}).replace('"', '""')
    msgs = json.dumps([{"role": "user", "content": PROMPT}]).replace('"', '""')
    resp = json.dumps({"content": ANSWER}).replace('"', '""')
    proxy = json.dumps({"headers": {"authorization": f"Bearer {BEARER}"}}).replace('"', '""')
    (d / "spendlogs.csv").write_text(
        header + "\n" + f"chatcmpl-x1,acompletion,{KEY},0.0,30,10,20,2025-01-24 09:20:46.847371,"
        f"2025-01-24 09:20:47.851954,2025-01-24 09:20:46.951954,gpt-4o,qwen,http://10.0.0.5:8000/v1,u-1,"
        f'"{meta}","{msgs}","{resp}",success,"{proxy}"\n'
    )
    (d / "envoy.jsonl").write_text(json.dumps({
        ":authority": "api.example", "duration": 1526, "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 15, "gen_ai.usage.output_tokens": 7, "method": "POST", "response_code": 200,
        "start_time": "2025-08-30T16:51:37.894Z", "upstream_host": "10.0.0.5:8000",
        "x-envoy-origin-path": "/v1/chat/completions", "x-request-id": "83b63da3-45a9-4196-98b8-1a7f697d6d8d",
        "authorization": f"Bearer {BEARER}", "x-api-key": KEY, "request_body": PROMPT,
    }) + "\n")
    (d / "bench.json").write_text(json.dumps({
        "date": "20250301-090000", "backend": "vllm", "model_id": "m", "tokenizer_id": "m", "num_prompts": 1,
        "request_rate": 4.0, "duration": 1.5, "completed": 1, "total_input_tokens": 100,
        "total_output_tokens": 3, "request_goodput:": None, "input_lens": [100], "output_lens": [3],
        "ttfts": [0.1], "itls": [[0.02, 0.03]], "generated_texts": [ANSWER], "errors": [""],
    }))
    span_attrs = [
        {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-q1"}},
        {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "20"}},
        {"key": "gen_ai.prompt", "value": {"stringValue": PROMPT}},
        {"key": "gen_ai.completion", "value": {"stringValue": ANSWER}},
        {"key": "http.request.header.authorization", "value": {"stringValue": f"Bearer {BEARER}"}},
    ]
    (d / "otel.json").write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "vllm"}, "spans": [{
            "traceId": "7d", "spanId": "27", "name": "llm_request", "kind": 2,
            "startTimeUnixNano": "1750068420250000000", "endTimeUnixNano": "1750068422250000000",
            "attributes": span_attrs}]}]}]}))
    return {
        "pod-a.log": "vllm_log", "sglang-pod.log": "sglang_log",
        "sglang-request-metrics-20250903_18.log": "sglang_metrics", "litellm.jsonl": "litellm",
        "litellm-array.json": "litellm_json", "spendlogs.csv": "litellm_spendlogs", "envoy.jsonl": "access_log",
        "bench.json": "vllm_bench", "otel.json": "otel",
    }


def _store_text(store: Path) -> list[tuple[str, str]]:
    """(where, text) for every value of every data file and the raw bytes of every other store file."""
    out = []
    for f in sorted(store.rglob("*")):
        if not f.is_file():
            continue
        if f.suffix == ".parquet":
            df = pl.read_parquet(f)
            for c in df.columns:
                vals = df[c] if df[c].dtype == pl.Utf8 else df[c].cast(pl.Utf8, strict=False) \
                    if not df[c].dtype.is_nested() else pl.Series([str(v) for v in df[c].to_list()])
                out.append((f"{f.name}:{c}", "\n".join(v for v in vals.to_list() if v is not None)))
        out.append((f.name, f.read_bytes().decode("utf-8", errors="replace")))
    return out


def test_no_secret_or_prompt_text_anywhere_in_the_store(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    expected = _inputs(src)
    summary = ingest([str(src)], tmp_path / "store", year=2025, tz="UTC")
    formats = {Path(f.path).name: f.format for f in summary.files}
    assert formats == expected  # every planted file was read by the format that knows its fields
    assert summary.rows["requests"] >= 9
    texts = _store_text(tmp_path / "store")
    assert len(texts) > 20
    for needle in NEEDLES:
        hits = [where for where, text in texts if needle in text]
        assert not hits, f"{needle!r} found in {hits}"
