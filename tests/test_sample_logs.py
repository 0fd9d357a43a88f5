"""sample_logs/, the committed demo: every log ingests without a problem, every gateway row joins one engine row,
and what the store then says (workload means, the long tail, engine versions, the state-pool cap) equals
ground_truth.json, which the simulator wrote from its own requests. Targets the scenario was built for (mean
prompts, versions, the cap) are worked out here from the scenario files, not read from the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attribution.store import Store

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs"
TRUTH = json.loads((SAMPLE / "ground_truth.json").read_text())
# scenarios/sample-hybrid.toml: the three workloads' mean prompts; the two engine versions.
TARGET_MEANS = {"key-assistant-prod": 10_159, "key-extraction-batch": 8_714, "key-documents-prod": 14_272}
VLLM_VERSIONS = {"before": "0.15.1", "after": "0.20.1"}
# 5 GiB * 0.9 / 1.9 // 64,389,120 B = 39 state slots; 3 per running request -> 13 running requests at most.
VLLM_CAP = int(5 * 2**30 * 0.9 / 1.9 // 64_389_120) // 3


@pytest.fixture(scope="module")
def ingested(sample_store):
    con = Store.open(sample_store).connect()
    return rows(con, "select file, status, errors from ingest_files"), con


def rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_size_budget_and_listing():
    on_disk = {p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("*") if p.is_file()}
    assert on_disk == {f["path"] for f in TRUTH["files"]} | {"README.md", "ground_truth.json", ".attributionignore"}
    assert sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file()) < 20e6
    for f in TRUTH["files"]:
        assert (SAMPLE / f["path"]).stat().st_size == f["bytes"]


def test_every_log_is_read_without_a_problem(ingested):
    files, con = ingested
    status = {Path(f).relative_to(SAMPLE.resolve()).as_posix(): (st, n) for f, st, n in files}
    # README.md and ground_truth.json are passed over (documentation; .attributionignore), not reported
    assert status == {f["path"]: ("read", 0) for f in TRUTH["files"]}
    assert rows(con, "select file, reason from ingest_errors") == []
    formats = dict(rows(con, "select file, format from ingest_files"))
    for f in TRUTH["files"]:
        assert formats[str((SAMPLE / f["path"]).resolve())] == f["format"]


def test_gateway_and_engine_rows_join_one_to_one(ingested):
    _, con = ingested
    n = TRUTH["totals"]["requests"]
    assert rows(con, "select matched, count(*) from joined_requests group by 1") == [("both", n)]
    per_side = rows(con, "select source_kind, count(*), count(distinct request_key) from requests group by 1 "
                         "order by 1")
    assert per_side == [("engine", n, n), ("gateway", n, n)]
    per_file = dict(rows(con, "select file, count(*) from requests where source_kind = 'engine' group by 1"))
    for f in TRUTH["files"]:
        if f["format"] not in ("litellm", "prometheus_api"):  # gateway rows; metrics have no request rows
            assert per_file[str((SAMPLE / f["path"]).resolve())] == f["requests"]


def test_workload_mean_prompts(ingested):
    _, con = ingested
    got = {w: (n, total, mean, model, h) for w, n, total, mean, model, h in rows(con, """
        select workload, count(*), sum(prompt_tokens), avg(prompt_tokens), any_value(model), any_value(key_hash)
        from joined_requests group by 1""")}
    truth = {w["key_alias"]: w for w in TRUTH["workloads"]}
    assert set(got) == set(truth)
    for alias, w in truth.items():
        n, total, mean, _, key_hash = got[alias]
        assert (n, int(total), key_hash) == (w["requests"], w["prompt_tokens_sum"], w["key_hash"])
        assert mean == pytest.approx(w["prompt_tokens_mean"], rel=1e-12)
    for alias, target in TARGET_MEANS.items():
        assert got[alias][2] == pytest.approx(target, rel=0.02)
    # One served model name for the three: only the API key tells them apart.
    assert len({got[a][3] for a in TARGET_MEANS}) == 1


def test_long_tail_over_95k_tokens(ingested):
    _, con = ingested
    total, with_cached = rows(con, """
        select count(*) filter (where prompt_tokens > 95000),
               count(*) filter (where cached_tokens is not null
                                  and cached_tokens + (prompt_tokens - cached_tokens) > 95000)
        from joined_requests""")[0]
    assert total == with_cached == TRUTH["totals"]["kv_len_over_threshold"]
    assert 5 <= total <= 20
    by_workload = dict(rows(con, "select workload, count(*) filter (where prompt_tokens > 95000) "
                                 "from joined_requests group by 1"))
    assert by_workload == {w["key_alias"]: w["kv_len_over_threshold"] for w in TRUTH["workloads"]}
    by_pod = dict(rows(con, """
        select deployment || '/' || coalesce(engine_version, engine), count(*) filter (where prompt_tokens > 95000)
        from joined_requests group by 1"""))
    truth = {}
    for d in TRUTH["deployments"]:
        key = f"{d['deployment']}/{d['engine_version'] if d['engine'] == 'vllm' else 'sglang'}"
        truth[key] = truth.get(key, 0) + d["kv_len_over_threshold"]
    assert by_pod == truth


def test_engine_versions_per_deployment(ingested):
    _, con = ingested
    starts = rows(con, "select deployment, engine, version from engine_config order by 1, 3")
    vllm = {d["deployment"] for d in TRUTH["deployments"] if d["engine"] == "vllm"}
    assert len(vllm) == 2
    assert [(d, v) for d, e, v in starts if e == "vllm"] == [
        (dep, v) for dep in sorted(vllm) for v in sorted(VLLM_VERSIONS.values())]
    assert {(d, e) for d, e, _ in starts if e == "sglang"} == {("qwen35-sglang-0", "sglang")}
    # The upgrade: every old-engine request arrives before every new-engine one, on both pods.
    last_old, first_new = rows(con, """
        select max(arrival) filter (where engine_version = '0.15.1'), min(arrival) filter (where engine_version = '0.20.1')
        from joined_requests""")[0]
    assert last_old < first_new
    counts = dict(rows(con, "select deployment || '/' || engine_version, count(*) from joined_requests "
                            "where engine = 'vllm' group by 1"))
    assert counts == {f"{d['deployment']}/{VLLM_VERSIONS[d['label']]}": d["requests"]
                      for d in TRUTH["deployments"] if d["engine"] == "vllm"}


def test_state_pool_caps_the_old_engine_while_kv_has_room(ingested):
    _, con = ingested
    cfg = rows(con, "select distinct kv_pool_tokens, max_running_requests from engine_config where engine = 'vllm'")
    assert cfg == [(279_056, VLLM_CAP)]  # 5 GiB - 39 slots x 64,389,120 B, over 10,240 B per KV token
    truth = {(d["deployment"], d["engine_version"]): d for d in TRUTH["deployments"] if d["engine"] == "vllm"}
    got = rows(con, f"""
        select c.deployment, c.version, max(s.running),
               count(*) filter (where s.running = {VLLM_CAP} and s.waiting > 0),
               count(*) filter (where s.waiting > 0), avg(s.kv_usage) filter (where s.waiting > 0)
        from engine_steps s join engine_config c on s.file = c.file
        where s.kind = 'stats' group by 1, 2""")
    assert len(got) == 4
    for dep, version, peak, cap_wait, waiting, kv_waiting in got:
        t = truth[(dep, version)]
        assert peak == t["stats"]["peak_running"] <= t["peak_running"] <= VLLM_CAP
        assert cap_wait == t["stats"]["intervals_at_cap_waiting"]
        assert waiting == t["stats"]["intervals_waiting"]
        assert kv_waiting == pytest.approx(t["stats"]["kv_usage_mean_while_waiting"], abs=0.001)  # 0.1% rounding
        if version == VLLM_VERSIONS["before"]:
            assert peak == VLLM_CAP and cap_wait > 100 and kv_waiting < 0.5
        else:
            assert peak < VLLM_CAP and cap_wait == 0


def test_sglang_steps_show_the_state_pool(ingested):
    _, con = ingested
    (t,) = [d for d in TRUTH["deployments"] if d["engine"] == "sglang"]
    cfg = rows(con, "select kv_pool_tokens, state_pool_slots, max_running_requests from engine_config "
                    "where engine = 'sglang'")
    assert cfg == [(t["kv_pool_tokens"], t["state_pool_slots"], t["max_running_requests"])]
    kinds = rows(con, f"""
        select kind, count(*), count(state_usage), max(state_usage), max(running)
        from engine_steps where deployment = '{t["deployment"]}' group by 1 order by 1""")
    assert [k[0] for k in kinds] == ["decode", "prefill"]
    for _, n, with_state, max_state, max_running in kinds:
        assert n == with_state > 0
        assert 0 < max_state <= t["peak_state_usage"] + 0.005  # two decimals in the log
        assert max_running <= t["peak_running"]
