"""The engine x gateway join (`joined_requests`): ids that match meet 1:1 whatever prefixes and suffixes each
side writes, unmatched rows stay on both sides and are counted, and workloads come from the gateway (or a
workloads.toml), falling back to the served model for engine-only rows."""

from __future__ import annotations

import hashlib
import json

from attribution import queries
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.status import store_status
from attribution.store import Store

_PARAMS = "SamplingParams(n=1, temperature=0.7, max_tokens=100, extra_args=None)"


def _vllm_line(ts: str, rid: str) -> str:
    return (f"(APIServer pid=1) INFO {ts} [logger.py:49] Received request chatcmpl-{rid}: params: {_PARAMS}, "
            f"lora_request: None.\n"
            f"(APIServer pid=1) INFO {ts} [async_llm.py:382] Added request chatcmpl-{rid}-a8a65d16.\n")


def _slp(rid: str, start: float, alias: str | None, key: str | None, prompt: int) -> str:
    meta = {"user_api_key_alias": alias, "user_api_key_hash": key}
    return json.dumps({
        "id": f"chatcmpl-{rid}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": start, "endTime": start + 2.0, "completionStartTime": start + 0.25,
        "model": "hosted_vllm/Qwen/Qwen3-8B", "model_group": "qwen", "api_base": "http://10.0.0.5:8000/v1",
        "prompt_tokens": prompt, "completion_tokens": 40, "metadata": meta}) + "\n"


def _store(tmp_path, workloads: str | None = None):
    logs = tmp_path / "logs"
    (logs / "pod-a").mkdir(parents=True)
    base = 1739446413.0  # 2025-02-13 11:33:33 UTC
    raw_key = "sk-team-b-raw-key-123456"
    (logs / "pod-a" / "vllm.log").write_text(
        _vllm_line("02-13 11:33:33", "a269fdcb7c6ce890") + _vllm_line("02-13 11:33:34", "b269fdcb7c6ce891")
        + _vllm_line("02-13 11:33:35", "c269fdcb7c6ce892"))  # the third never reached the gateway log
    (logs / "litellm.jsonl").write_text(
        _slp("a269fdcb7c6ce890", base, "search-backend", None, 812)
        + _slp("b269fdcb7c6ce891", base + 1, None, raw_key, 100)
        + _slp("d269fdcb7c6ce893", base + 3, "batch", None, 7))  # served by a pod whose log we do not have
    if workloads:
        (tmp_path / "store").mkdir()
        (tmp_path / "store" / "workloads.toml").write_text(workloads)
    ingest([str(logs)], tmp_path / "store", year=2025, tz="UTC")
    return Store.open(tmp_path / "store"), hashlib.sha256(raw_key.encode()).hexdigest()


def test_ids_meet_one_to_one_and_unmatched_rows_stay(tmp_path):
    store, key_hash = _store(tmp_path)
    con = store.connect()
    rows = fetch(con, "select request_key, matched, deployment, workload, prompt_tokens, ttft_s, max_tokens "
                      "from joined_requests order by request_key").to_dicts()
    assert [(r["request_key"], r["matched"]) for r in rows] == [
        ("a269fdcb7c6ce890", "both"), ("b269fdcb7c6ce891", "both"),
        ("c269fdcb7c6ce892", "engine_only"), ("d269fdcb7c6ce893", "gateway_only")]
    a, b, c, d = rows
    # the engine names the pod and knows max_tokens; the gateway knows who sent it and how long it took
    assert (a["deployment"], a["workload"], a["prompt_tokens"], a["ttft_s"], a["max_tokens"]) == \
        ("pod-a", "search-backend", 812, 0.25, 100)
    assert b["workload"] == "key-" + key_hash[:12]  # no alias: the hashed key, never the raw one
    assert c["workload"] == "pod-a"  # engine only and no startup lines naming the served model: the pod
    assert d["deployment"] == "10.0.0.5:8000"
    cov = {(r["side"], r["source"]): (r["matched"], r["unmatched"])
           for r in queries.run(con, "join_coverage_by_source").to_dicts()}
    assert cov == {("engine", "vllm_log"): (2, 1), ("gateway", "litellm"): (2, 1)}
    assert {(j["source"], j["matched"]) for j in store_status(store)["joins"]} == {("vllm_log", 2), ("litellm", 2)}


def test_workloads_toml_names_keys_and_aliases(tmp_path):
    _, key_hash = _store(tmp_path / "probe")
    toml = f'[workloads]\n"{key_hash}" = "team-b"\n"search-backend" = "search"\n'
    store, _ = _store(tmp_path, workloads=toml)
    got = dict(fetch(store.connect(), "select request_key, workload from joined_requests").iter_rows())
    assert got["a269fdcb7c6ce890"] == "search"
    assert got["b269fdcb7c6ce891"] == "team-b"
    assert got["d269fdcb7c6ce893"] == "batch"
