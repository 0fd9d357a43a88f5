"""Threshold features: the catalogue covers Part B of memory-and-thresholds.md, effective settings follow
flags, startup facts and version/GPU defaults, and crossings counted from simulated vLLM, LiteLLM and SGLang
logs equal what the simulator knows (counted here from its own requests and from the log lines by regex)."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import sample_store_at, shared
from typer.testing import CliRunner

from attribution.analyses import select
from attribution.cli import app
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.simulate import simulate
from attribution.simulate.writers import write_litellm, write_sglang_logs, write_vllm_logs
from attribution.store import Store
from attribution.thresholds import effective_settings, load_catalogue, parse_threshold, thresholds
from attribution.thresholds.settings import evaluate_expression

ENGINES = {"vLLM": {"vllm"}, "SGLang": {"sglang"}, "both": {"vllm", "sglang"}}


def test_catalogue_covers_every_part_b_row():
    doc = shared("formats", "memory-and-thresholds.md").read_text()
    part_b = doc[doc.index("## Part B"):doc.index("### Items from the write-up")]
    rows = re.findall(r"^\| (\d+[a-z]?) \| ([^|]+?) \|", part_b, re.M)
    assert len(rows) == 35
    cat = load_catalogue()
    for num, engine in rows:
        feats = [f for f in cat if f.ref == f"Part B #{num}"]
        assert feats, f"Part B #{num} has no catalogue feature"
        want = next((v for k, v in ENGINES.items() if engine.startswith(k)), None) or ENGINES["both"]
        have = set().union(*(set(f.engines) for f in feats))
        assert want <= have, f"Part B #{num} ({engine}): features for {have}"
        for f in feats:
            assert f.source and f.count_from and f.quantity
    # The write-up's two kernels, with the thresholds the write-up gives.
    assert cat.features["writeup.sparse_prefill_95k"].default[0].value == 95000
    assert cat.features["writeup.compact_attention_8k"].default[0].value == 8192


def test_threshold_specs():
    known = load_catalogue().features
    f = parse_threshold("sparse_prefill: kv_len_at_prefill > 95,000", known)
    assert (f.id, f.quantity, f.op, f.override, f.scope, f.engines) == (
        "sparse_prefill", "kv_len_at_prefill", ">", 95000.0, "request", ("any",))
    g = parse_threshold("busy: running_requests >= 8")
    assert (g.scope, g.override) == ("step", 8.0)
    h = parse_threshold("vllm.chunked_prefill = 16384", known)
    assert (h.quantity, h.op, h.override) == ("uncached_prompt_tokens", ">", 16384.0)
    for bad in ("x: tokens > 5", "nope = 3", "vllm.chunked_prefill: prompt_tokens > 5", "just words"):
        with pytest.raises(UsageError):
            parse_threshold(bad, known)


def test_user_catalogue_file_adds_and_replaces(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('[assume]\ngpu_mem_gib = 40\n\n[[feature]]\nid = "inhouse.long"\nengine = "vllm"\n'
                 'quantity = "peak_kv_len"\nop = ">="\ndefault = 50000\nenabled = "unknown"\n\n'
                 '[[feature]]\nid = "vllm.max_num_seqs"\nquantity = "running_requests"\nop = ">"\ndefault = 7\n')
    cat = load_catalogue([p])
    assert cat.assume["gpu_mem_gib"] == 40 and cat.features["inhouse.long"].scope == "request"
    assert cat.features["vllm.max_num_seqs"].op == ">" and cat.features["vllm.max_num_seqs"].engines == ("any",)
    p.write_text('[[feature]]\nid = "x"\nquantity = "prompt_tokens"\nscope = "step"\n')
    with pytest.raises(UsageError, match="request-scoped"):
        load_catalogue([p])


def _starts(*rows: dict) -> pl.DataFrame:
    base = {"config_id": None, "deployment": "pod", "engine": None, "version": None, "model": None,
            "ts": datetime(2025, 6, 1), "flags": {}, "max_model_len": None, "max_running_requests": None,
            "chunked_prefill_size": None, "max_prefill_tokens": None, "block_size": None, "kv_pool_tokens": None,
            "state_pool_slots": None, "mamba_page_padding": None, "tp_size": None}
    return pl.DataFrame([{**base, "config_id": f"c{i}", **r} for i, r in enumerate(rows)], infer_schema_length=None)


def _setting(df: pl.DataFrame, config: str, feature: str) -> dict:
    return df.filter(pl.col("config_id") == config, pl.col("feature") == feature).row(0, named=True)


def test_effective_settings_flags_facts_and_defaults():
    cat = load_catalogue()
    starts = _starts(
        {"engine": "vllm", "version": "0.20.1", "max_model_len": 32768,
         "flags": {"max_num_batched_tokens": "16384", "max_num_seqs": "128",
                   "compilation_config": '{"max_cudagraph_capture_size": 256}'}},
        {"engine": "vllm", "version": "0.20.1", "max_model_len": 32768},
        {"engine": "vllm", "version": "0.10.1", "max_model_len": 100000, "flags": {"max_num_partial_prefills": "2"}},
        {"engine": "sglang", "max_running_requests": 157, "state_pool_slots": 473,
         "flags": {"max_running_requests": "None", "cuda_graph_max_bs": "None", "disable_radix_cache": "True"}},
    )
    s = effective_settings(starts, cat)
    assert _setting(s, "c0", "vllm.chunked_prefill")["threshold"] == 16384
    assert _setting(s, "c0", "vllm.max_num_seqs")["threshold"] == 128
    assert _setting(s, "c0", "vllm.cuda_graph")["threshold"] == 256  # compilation_config.max_cudagraph_capture_size
    # Defaults on an assumed 80 GiB (H100-class) GPU: 8192 tokens, 1024 seqs, min(2 x 1024, 512) graph sizes.
    c1 = {f: _setting(s, "c1", f) for f in ("vllm.chunked_prefill", "vllm.max_num_seqs", "vllm.cuda_graph")}
    assert [c1[f]["threshold"] for f in c1] == [8192, 1024, 512]
    assert "GPU memory 80 GiB" in c1["vllm.chunked_prefill"]["assumed"]
    assert _setting(s, "c1", "vllm.partial_prefills")["status"] == "not in version"  # V0 only (< 0.11)
    v0 = _setting(s, "c2", "vllm.partial_prefills")
    assert (v0["status"], v0["threshold"]) == ("on", 4000)  # 4% of max_model_len
    assert _setting(s, "c1", "vllm.long_prefill")["status"] == "off"  # threshold 0 = off
    sg = _setting(s, "c3", "sglang.max_running_requests")
    assert (sg["threshold"], sg["status"]) == (157, "on") and "printed by the engine" in sg["threshold_source"]
    assert _setting(s, "c3", "sglang.cuda_graph_max_bs")["threshold"] == 256  # H100, tp < 4
    assert _setting(s, "c3", "sglang.state_pool")["status"] == "on"  # a state pool: hybrid
    assert _setting(s, "c3", "sglang.page_size")["status"] == "off"  # --disable-radix-cache
    assert _setting(s, "c1", "hybrid.linear_attention_prefill")["status"] == "not applicable"
    small = effective_settings(starts, cat, gpu_mem_gib=40, tp_size=4)
    assert _setting(small, "c1", "vllm.chunked_prefill")["threshold"] == 2048
    assert _setting(small, "c1", "vllm.max_num_seqs")["threshold"] == 256
    assert _setting(small, "c3", "sglang.cuda_graph_max_bs")["threshold"] == 160  # < 60 GB, tp >= 4
    # Requests without a start get their engine's defaults; an unknown engine only the any-engine features.
    fallback = s.filter(pl.col("config_id") == "default:unknown")
    assert set(fallback["feature"]) == {f.id for f in cat if "any" in f.engines}


def test_expressions_are_arithmetic_only():
    assert evaluate_expression("min(2 * max_num_seqs, 512)", {"max_num_seqs": 13}) == 26
    with pytest.raises(ValueError):
        evaluate_expression("__import__('os').getcwd()", {})


@pytest.fixture(scope="module")
def vllm_store(tmp_path_factory):
    """vLLM engine logs and LiteLLM gateway logs of one simulated hour with prefix-cache hits."""
    res = simulate("vllm-chat-small", requests=1500, workers=1)
    out = tmp_path_factory.mktemp("vllm")
    write_vllm_logs(res, out / "logs" / "vllm")
    write_litellm(res, out / "logs" / "litellm.jsonl")
    ingest([str(out / "logs")], out / "store", year=2025, tz="UTC")
    return res, out / "store"


def test_request_crossings_equal_the_simulators_requests(vllm_store):
    res, store = vllm_store
    truth = res.requests.to_dicts()
    cat = load_catalogue(specs=["long: kv_len_at_prefill > 3000", "peak: peak_kv_len >= 4000"])
    out = thresholds(select(Store.open(store).connect()), cat, features=["long", "peak", "vllm.chunked_prefill"])
    main = {r["feature"]: r for r in out.tables["requests"].to_dicts()}

    def uncached(r: dict) -> int:
        return r["prompt_tokens"] - r["cached_tokens"]

    rules = {"long": lambda r: r["kv_len_at_prefill"] > 3000,
             "peak": lambda r: r["prompt_tokens"] + r["output_tokens"] >= 4000,
             "vllm.chunked_prefill": lambda r: uncached(r) > 8192}
    total_prefill = sum(uncached(r) for r in truth)
    for fid, rule in rules.items():
        hit = [r for r in truth if rule(r)]
        assert main[fid]["requests"] == main[fid]["all_requests"] == len(truth)
        assert main[fid]["crossed"] == len(hit) > 0
        assert main[fid]["prefill_token_share_of_all_requests"] == pytest.approx(sum(uncached(r) for r in hit) / total_prefill)
        assert main[fid]["crossed_estimated"] == 0  # the gateway gives cached tokens
        by_wl = {r["workload"]: r["crossed"] for r in out.tables["by_workload"].to_dicts() if r["feature"] == fid}
        assert by_wl == {a: sum(1 for r in hit if r["key_alias"] == a) for a in {r["key_alias"] for r in truth}}
    # the prefix cache matters: counting the whole prompt would give more chunked prefills
    assert sum(1 for r in truth if r["prompt_tokens"] > 8192) > main["vllm.chunked_prefill"]["crossed"]
    assert main["vllm.chunked_prefill"]["threshold"] == "8192" and main["vllm.chunked_prefill"]["status"] == "on (1 start)"
    assert main["long"]["method"] == "exact (request logs)"


@pytest.fixture(scope="module")
def sglang_store(tmp_path_factory):
    res = simulate("sglang-hybrid-small", requests=1500, steps=True, workers=1)
    out = tmp_path_factory.mktemp("sglang")
    (log,) = write_sglang_logs(res, out / "logs")
    ingest([str(out / "logs")], out / "store", year=2025, tz="UTC")
    return log, out / "store"


BATCH = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (Prefill|Decode) batch, .*?#running-req: (\d+)")


def test_step_crossings_follow_the_batch_lines(sglang_store):
    log, store = sglang_store
    lines = [m for m in map(BATCH.match, log.read_text().splitlines()) if m]
    running = [int(m.group(3)) for m in lines]
    limit = sorted(running)[int(len(running) * 0.9)]  # crossed by about a tenth of the lines
    out = thresholds(select(Store.open(store).connect()), load_catalogue(specs=[f"busy: running_requests >= {limit}"]),
                     features=["busy", "sglang.max_running_requests", "sglang.state_pool"])
    steps = {r["feature"]: r for r in out.tables["steps"].to_dicts()}
    crossed = [n >= limit for n in running]
    t = [datetime.fromisoformat(m.group(1)).timestamp() for m in lines]
    dt = [min(b - a, 60.0) for a, b in zip(t, t[1:], strict=False)] + [0.0]
    episodes = sum(1 for i, c in enumerate(crossed) if c and (i == 0 or not crossed[i - 1]))
    busy = steps["busy"]
    assert (busy["rows"], busy["crossed_rows"], busy["episodes"]) == (len(lines), sum(crossed), episodes)
    assert busy["time_share"] == pytest.approx(sum(d for d, c in zip(dt, crossed, strict=True) if c) / sum(dt))
    assert busy["max_value"] == max(running)
    # The engine printed its cap: 96 state slots / 3 per request = 32 running requests.
    cap = steps["sglang.max_running_requests"]
    assert (cap["threshold"], cap["crossed_rows"]) == ("32", sum(n >= 32 for n in running))
    settings = out.tables["settings"].filter(pl.col("feature") == "sglang.max_running_requests").row(0, named=True)
    assert settings["threshold_source"] == "printed by the engine at startup (max_running_requests)"
    assert "sglang version 0.5.9" in settings["assumed"]  # the log names no version


def test_cli_thresholds(vllm_store):
    _, store = vllm_store
    runner = CliRunner()
    r = runner.invoke(app, ["thresholds", "--store", str(store), "--threshold", "long: kv_len_at_prefill > 3000",
                            "--feature", "long", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (row,) = doc["tables"]["requests"]
    assert (row["feature"], row["threshold"], row["method"]) == ("long", "3000", "exact (request logs)")
    r = runner.invoke(app, ["thresholds", "--store", str(store), "--feature", "vllm.", "--format", "csv",
                            "--table", "by_day"])
    assert r.exit_code == 0 and r.stdout.splitlines()[0].startswith("feature,day,requests,crossed")
    r = runner.invoke(app, ["thresholds", "--list", "--format", "csv"])
    assert r.exit_code == 0 and "writeup.sparse_prefill_95k" in r.stdout
    r = runner.invoke(app, ["thresholds", "--store", str(store), "--threshold", "bad spec"])
    assert isinstance(r.exception, UsageError) and UsageError.exit_code == 2  # main() prints it, exits 2


SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs"


def sample_store(tmp_path_factory) -> Path:
    """The session's store of sample_logs/ (conftest.sample_store_at), for modules that call it directly."""
    return sample_store_at(tmp_path_factory.getbasetemp())


def test_sample_logs_long_prompt_crossings_are_exact(tmp_path_factory):
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    con = Store.open(sample_store(tmp_path_factory)).connect()
    out = thresholds(select(con), load_catalogue(specs=["sparse_prefill: kv_len_at_prefill > 95000"]),
                     features=["sparse_prefill", "writeup.sparse_prefill_95k", "vllm.max_num_seqs"])
    assert truth["kv_len_threshold"] == 95000
    main = {r["feature"]: r for r in out.tables["requests"].to_dicts()}
    # Every gateway row counts (the SGLang pod's rows too: its engine log is left out here, so they carry no
    # engine, and a feature of any engine still applies).
    for fid in ("sparse_prefill", "writeup.sparse_prefill_95k"):
        assert main[fid]["crossed"] == truth["totals"]["kv_len_over_threshold"] == 9
        assert main[fid]["requests"] == truth["totals"]["requests"]
        by_wl = {r["workload"]: r["crossed"] for r in out.tables["by_workload"].to_dicts() if r["feature"] == fid}
        assert by_wl == {w["key_alias"]: w["kv_len_over_threshold"] for w in truth["workloads"]}
        by_day = out.tables["by_day"].filter(pl.col("feature") == fid)
        assert by_day["crossed"].sum() == 9 and by_day.height == 6
    # Running requests at the state pool's cap (max_num_seqs 13), per pod: the simulator's stats intervals.
    # The rows are the periodic lines the logs hold (vLLM skips idle intervals), counted here from the files.
    at_cap: dict[str, int] = {}
    lines: dict[str, int] = {}
    for d in truth["deployments"]:
        if d["engine"] == "vllm":
            at_cap[d["deployment"]] = at_cap.get(d["deployment"], 0) + d["stats"]["intervals_at_cap"]
    for f in truth["files"]:
        if f["format"] == "vllm_log":
            with gzip.open(SAMPLE / f["path"], "rt") as fh:
                n = sum(1 for ln in fh if "Avg prompt throughput" in ln)
            lines[f["deployment"]] = lines.get(f["deployment"], 0) + n
    steps = {r["deployment"]: r for r in out.tables["steps"].to_dicts() if r["feature"] == "vllm.max_num_seqs"}
    assert {k: (v["crossed_rows"], v["rows"], v["threshold"]) for k, v in steps.items()} == {
        k: (at_cap[k], lines[k], "13") for k in at_cap}


def test_unknown_cached_tokens_make_an_estimate(tmp_path):
    """A gateway that logs no cached tokens: uncached prompt tokens fall back to the whole prompt, labelled."""
    rows = [(500, None), (3000, None), (5000, None), (4000, 3500)]  # (prompt, cached)
    lines = []
    for i, (prompt, cached) in enumerate(rows):
        usage = {"prompt_tokens_details": {"cached_tokens": cached}} if cached is not None else {}
        lines.append(json.dumps({
            "id": f"chatcmpl-{i:016x}", "call_type": "acompletion", "status": "success", "stream": False,
            "startTime": 1751356800.0 + i, "endTime": 1751356801.0 + i, "model": "m", "prompt_tokens": prompt,
            "completion_tokens": 5, "metadata": {"user_api_key_alias": "team", "usage_object": usage}}))
    (tmp_path / "gw.jsonl").write_text("\n".join(lines) + "\n")
    ingest([str(tmp_path / "gw.jsonl")], tmp_path / "store", fmt="litellm", tz="UTC")
    out = thresholds(select(Store.open(tmp_path / "store").connect()),
                     load_catalogue(specs=["u: uncached_prompt_tokens > 1000"]), features=["u"])
    (row,) = out.tables["requests"].to_dicts()
    assert (row["crossed"], row["crossed_estimated"]) == (2, 2)  # 3000 and 5000; 4000 - 3500 is below
    assert row["method"].startswith("estimated: 2 crossings assume no cached tokens")


def _same_frames(ref: pl.DataFrame, got: pl.DataFrame) -> None:
    """Equal rows: exact, except floating sums (their order differs) to 1e-9."""
    assert ref.schema == got.schema and ref.height == got.height
    for c in ref.columns:
        a, b = ref[c], got[c]
        if a.dtype.is_float():
            assert a.is_null().equals(b.is_null()), c
            assert a.fill_null(0).to_list() == pytest.approx(b.fill_null(0).to_list(), rel=1e-9, abs=1e-12), c
        else:
            assert a.equals(b), c


def test_step_kernel_equals_the_sql(tmp_path_factory, sglang_store):
    """attribution.thresholds.steps gives the rows of the test oracle tests/oracle/threshold_steps.sql (over
    threshold_step_values.sql) and the crossings of threshold_arrivals.sql, on the sample logs (vLLM and SGLang)
    and simulated SGLang logs; both resolve lines logged at one instant by steps.ARRIVAL_TIE_RULE."""
    import oracle

    from attribution.db import fetch
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import mark_requests, prepare

    crossings = 0
    # The simulated SGLang store whole and in a window; the sample week (vLLM and SGLang pods, an upgrade) in two
    # slices of a few hours (vLLM lines with crossings; the hours where both engines log): the SQL reference's
    # ASOF joins over the whole week took minutes, the kernel a second.
    for store, slices in ((sample_store(tmp_path_factory), ((0.40, 0.43), (0.63, 0.67))),
                          (sglang_store[1], (None, (1 / 3, 3 / 4)))):
        con = Store.open(store).connect()
        first, last = fetch(con, "select min(ts), max(ts) from engine_steps").row(0)
        for part in slices:
            since, until = (None, None) if part is None else (first + (last - first) * part[0],
                                                              first + (last - first) * part[1])
            select(con, since=since, until=until, by="all")
            prepare(con, load_catalogue())
            mark_requests(con)
            oracle.materialize(con, "threshold_step_values", "thr_step_values", since=since, until=until)
            ref = oracle.run(con, "threshold_steps", max_gap_s=60.0)
            rows = steps.step_rows(con, since, until)
            assert ref.height and rows.size
            _same_frames(ref, steps.steps_table(con, rows, 60.0))
            # arrivals: the same crossings, ties at one instant included (one rule for both)
            oracle.materialize(con, "threshold_arrivals", "thr_arrival_flags", max_gap_s=60.0)
            key = ["rid", "feature"]
            ref_a = fetch(con, "select rid, feature, value from thr_arrival_flags where crossed").sort(key)
            got_a = steps.arrival_flags(con, rows, 60.0).sort(key)
            assert got_a.select(ref_a.columns).equals(ref_a)
            crossings += ref_a.height
    assert crossings


def test_arrivals_at_a_tied_instant_take_the_last_file_then_line():
    """Two lines of one deployment logged at the same instant, one over the threshold: the kernel and the
    oracle both take the line of steps.ARRIVAL_TIE_RULE (the last file by name, then its last line)."""
    import duckdb
    import oracle

    from attribution.thresholds import steps

    t0 = datetime(2026, 3, 2, 12, 0, 0)
    for over_in, expect in (("b.log", True), ("a.log", False)):
        con = duckdb.connect()
        con.execute("set TimeZone = 'UTC'")
        con.execute("""create table engine_steps as
            select * from (values
                ('a.log', 7, 'pod', 'vllm', $t::timestamptz, 'stats', $ra),
                ('b.log', 3, 'pod', 'vllm', $t::timestamptz, 'stats', $rb)
            ) as v(file, line, deployment, engine, ts, kind, running)""",
                    {"t": t0, "ra": 9 if over_in == "a.log" else 1, "rb": 9 if over_in == "b.log" else 1})
        con.execute("""alter table engine_steps add column waiting integer;
            alter table engine_steps add column preemptions integer;
            alter table engine_steps add column kv_usage double;
            alter table engine_steps add column state_usage double;
            alter table engine_steps add column new_tokens integer;
            alter table engine_steps add column batch_tokens integer;
            alter table engine_steps add column cuda_graph boolean""")
        con.execute("create table thr_starts as select 'c1' as config_id, 'pod' as deployment, 'vllm' as engine, "
                    "$t::timestamptz - interval 1 hour as ts", {"t": t0})
        con.execute("""create table thr_settings as select 'c1' as config_id, 'cap' as feature,
            'running_requests' as quantity, '>=' as op, 5.0 as threshold, true as evaluate, 'step' as scope""")
        con.execute("create table int_threshold_requests as select 1::bigint as rid, 'pod' as deployment, "
                    "$t::timestamptz + interval 1 second as arrival", {"t": t0})
        oracle.materialize(con, "threshold_step_values", "thr_step_values", since=None, until=None)
        oracle.materialize(con, "threshold_arrivals", "thr_arrival_flags", max_gap_s=60.0)
        ref = con.execute("select rid from thr_arrival_flags where crossed").fetchall()
        got = steps.arrival_flags(con, steps.step_rows(con), 60.0)
        assert (ref == [(1,)]) is expect and (got.height == 1) is expect, over_in


def test_step_rows_streamed_in_small_batches_are_those_read_in_one(tmp_path_factory, monkeypatch):
    """_read_step_rows folds DuckDB's streamed batches into NumPy columns: batches of 4,099 lines, ~60 of them (deployments
    and kinds coded per batch, then as one column) give every array and list that one batch gives."""
    import numpy as np

    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare

    con = Store.open(sample_store(tmp_path_factory)).connect()
    select(con, by="all")
    prepare(con, load_catalogue())
    steps.keep_step_rows(con, False)
    monkeypatch.setattr(steps, "STEP_BATCH_ROWS", 10_000_000)
    one = steps.step_rows(con)
    monkeypatch.setattr(steps, "STEP_BATCH_ROWS", 4099)
    small = steps.step_rows(con)
    assert small is not one and one.size > 4099 * 20
    assert (small.deployments, small.kinds) == (one.deployments, one.kinds) and len(one.deployments) > 2
    for f in ("file", "t", "day", "deployment", "kind", "cuda_graph_off", "config"):
        a, b = getattr(small, f), getattr(one, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f
    assert small.values.keys() == one.values.keys()
    for q, (v, present) in one.values.items():
        assert np.array_equal(small.values[q][0], v) and np.array_equal(small.values[q][1], present), q


def test_step_rows_are_kept_for_the_same_window_starts_and_lines(tmp_path_factory):
    """The last step rows read on a store connection are given again only for the same window, engine starts
    and engine_steps view (the thresholds and compare pages of one dashboard view share them)."""
    import numpy as np

    from attribution.dashboard import Filters, narrow
    from attribution.db import fetch
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare, register
    from attribution.thresholds.settings import engine_starts

    def same(a, b):
        assert a.size == b.size and a.values.keys() == b.values.keys()
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("file", "t", "deployment", "config"))
        assert all(np.array_equal(a.values[q][0], b.values[q][0]) for q in a.values)

    con = Store.open(sample_store(tmp_path_factory)).connect()
    select(con, by="all")  # reads the commit's cached join: rows may be kept
    settings = prepare(con, load_catalogue())
    whole = steps.step_rows(con)
    assert steps.step_rows(con) is whole
    first, last = fetch(con, "select min(ts), max(ts) from engine_steps").row(0)
    half = steps.step_rows(con, first + (last - first) / 2)
    assert half is not whole and 0 < half.size < whole.size
    again = steps.step_rows(con)
    assert again is not whole
    same(again, whole)
    starts = engine_starts(con)
    register(con, starts.head(starts.height - 1), settings)
    assert steps.step_rows(con) is not again
    register(con, starts, settings)
    dep = fetch(con, "select min(deployment) from engine_steps").item()
    narrow(con, Filters(deployments=(dep,)))
    one = steps.step_rows(con)
    assert one.size < whole.size and set(one.deployments) == {dep, None}


@pytest.mark.parametrize("on_disk", [False, True])
def test_threshold_requests_are_made_once_per_selection_and_starts(tmp_path_factory, monkeypatch, on_disk):
    """mark_requests keeps an int_threshold_requests made from the same selection and engine starts (a report's
    thresholds and its changes' compare of the window's cohorts), and makes it again after a new select(), new
    engine starts, or a release() that dropped it; release(keep=...) keeps it. The report connection's
    keep_step_rows(con, False) reads the step rows anew each time and keeps none. With the selections in a
    database file (the report's), the table is made there (compressed), read through a temporary view of its
    name, and release() drops both."""
    from attribution.analyses import release
    from attribution.analyses.common import selections_on_disk
    from attribution.db import fetch
    from attribution.thresholds import crossings, steps
    from attribution.thresholds.crossings import mark_requests, prepare, register
    from attribution.thresholds.settings import engine_starts

    made: list[str] = []
    materialize = crossings.materialize
    monkeypatch.setattr(crossings, "materialize", lambda con, name, *a, **kw: made.append(name)
                        or materialize(con, name, *a, **kw))
    con = Store.open(sample_store(tmp_path_factory)).connect()
    if on_disk:
        selections_on_disk(con, tmp_path_factory.mktemp("selections"))
    rows = "select count(*), sum(rid), min(config_id) from int_threshold_requests"
    where = ("select temporary, database_name from duckdb_tables() where table_name = 'int_threshold_requests' "
             "union all select temporary, 'view' from duckdb_views() where view_name = 'int_threshold_requests'")
    select(con, by="all")
    settings = prepare(con, load_catalogue())
    mark_requests(con)
    first = fetch(con, rows).row(0)
    held = sorted(fetch(con, where).rows())
    if on_disk:  # a table of the selections' database (not temporary) and the temporary view over it
        assert len(held) == 2 and held[0][0] is False and held[0][1].startswith("selections_")
        assert held[1] == (True, "view")
    else:
        assert held == [(True, "temp")]
    mark_requests(con, flags=False)
    assert len(made) == 1 and fetch(con, rows).row(0) == first
    starts = engine_starts(con)
    register(con, starts.head(starts.height - 1), settings)  # other starts: other config ids
    mark_requests(con)
    register(con, starts, settings)
    mark_requests(con)
    assert len(made) == 3 and fetch(con, rows).row(0) == first
    release(con, keep=("int_threshold_requests",))
    mark_requests(con)
    assert len(made) == 3
    release(con)
    assert not fetch(con, where).height  # (table and view)
    mark_requests(con)
    assert len(made) == 4 and fetch(con, rows).row(0) == first
    select(con, by="all")  # the same window again (a kept selection), but a new select()
    mark_requests(con)
    assert len(made) == 5
    steps.keep_step_rows(con, False)
    assert steps.step_rows(con) is not steps.step_rows(con)
    steps.keep_step_rows(con, True)
    assert steps.step_rows(con) is steps.step_rows(con)


def test_a_window_holding_every_step_line_gives_its_rows_once_to_the_read_of_every_day(tmp_path_factory):
    """keep_step_rows(con, False, whole=True), the report's connection: the rows of a window holding every step
    line are every day's rows (equal to a read of every day) and are given once to the next read of every day
    (the report's compare), then dropped; a window that leaves lines out keeps nothing."""
    import numpy as np

    from attribution.db import fetch
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare

    def same(a, b):
        assert a.size == b.size and a.values.keys() == b.values.keys() and a.deployments == b.deployments
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("file", "t", "deployment", "kind",
                                                                          "config", "cuda_graph_off"))
        assert all(np.array_equal(a.values[q][0], b.values[q][0]) and np.array_equal(a.values[q][1], b.values[q][1])
                   for q in a.values)

    con = Store.open(sample_store(tmp_path_factory)).connect()
    select(con, by="all")  # reads the commit's cached join: rows may be kept
    prepare(con, load_catalogue())
    steps.keep_step_rows(con, False)
    every = steps.step_rows(con)  # read, not kept
    first, last = fetch(con, "select min(ts), max(ts) from engine_steps").row(0)
    steps.keep_step_rows(con, False, whole=True)
    window = steps.step_rows(con, first, last + timedelta(seconds=1))  # holds every line
    same(window, every)
    assert steps.step_rows(con) is window  # given to the read of every day ...
    assert steps.step_rows(con) is not window  # ... once
    half = steps.step_rows(con, first + (last - first) / 2)  # leaves lines out: nothing kept
    assert 0 < half.size < every.size
    again = steps.step_rows(con)
    assert again is not half and again is not window
    same(again, every)
    steps.keep_step_rows(con, False)
    window = steps.step_rows(con, first, last + timedelta(seconds=1))
    assert steps.step_rows(con) is not window  # without `whole`, kept never


def test_file_order_is_the_three_key_sort():
    """steps.file_order (the rows' permutation into file, time, line order, skipping the full sort where the
    rows are in file order already or sort by file and line alone) is always the stable sort by file, time
    and line: on rows already in order, on rows whose time never goes back within a file, and on rows with
    ties, repeated lines and time going back."""
    import numpy as np

    from attribution.thresholds.steps import file_order

    rng = np.random.default_rng(7)
    paths = set()
    for case in range(600):
        n = int(rng.integers(1, 40))
        file = rng.integers(1, 4, n).astype(np.int32)
        line = rng.permutation(n) if case % 3 else rng.integers(0, 6, n)
        t = line * 10 + rng.integers(0, 3, n) if case % 2 else rng.integers(0, 5, n)
        if case % 4 == 0:  # already in order
            o = np.lexsort((line, t, file))
            file, t, line = file[o], t[o], line[o]
        got = file_order(file, t, line)
        paths.add(type(got).__name__ if isinstance(got, slice) else "sorted")
        assert np.array_equal(np.arange(n)[got], np.lexsort((line, t, file)))
    assert paths == {"slice", "sorted"}


def test_the_step_settings_are_read_once_per_registration(monkeypatch):
    """queries/threshold_step_settings.sql runs once per registration of thr_settings by crossings.register
    (step_rows, features and arrival_flags each ask for it; on Spark each query is a job); a new registration
    is read again, and a thr_settings made otherwise each time it is asked for."""
    import duckdb

    from attribution import queries
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import register

    t0 = datetime(2026, 3, 2, 12, 0, 0)
    starts = pl.DataFrame({"config_id": ["c1"], "deployment": ["pod"], "engine": ["vllm"], "ts": [t0]})

    def settings(threshold: float) -> pl.DataFrame:
        return pl.DataFrame({"config_id": ["c1"], "feature": ["cap"], "quantity": ["running_requests"],
                             "op": [">="], "threshold": [threshold], "evaluate": [True], "scope": ["step"]})

    names: list[str] = []
    run = queries.run
    monkeypatch.setattr(queries, "run", lambda con, name, **kw: names.append(name) or run(con, name, **kw))
    con = duckdb.connect()
    register(con, starts, settings(5.0))
    assert [steps.step_settings(con)["threshold"].to_list() for _ in range(3)] == [[5.0]] * 3
    assert names.count("threshold_step_settings") == 1
    register(con, starts, settings(7.0))
    assert steps.step_settings(con)["threshold"].to_list() == [7.0] and len(names) == 2
    other = duckdb.connect()
    other.register("thr_settings", settings(3.0).to_arrow())
    assert [steps.step_settings(other)["threshold"].to_list() for _ in range(2)] == [[3.0]] * 2
    assert names.count("threshold_step_settings") == 4


def _same_rows(a, b) -> None:
    """Equal step rows: the same lines in the same order with the same values (file numbers may differ: they
    only tell files apart), deployments and kinds by name."""
    import numpy as np

    assert a.size == b.size and a.values.keys() == b.values.keys()
    assert np.array_equal(np.diff(a.file) != 0, np.diff(b.file) != 0)
    for f in ("t", "day", "config", "cuda_graph_off"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for codes, names in (("deployment", "deployments"), ("kind", "kinds")):
        named = [np.array(getattr(r, names), dtype=object)[getattr(r, codes)] for r in (a, b)]
        assert np.array_equal(*named), codes
    for q in a.values:
        assert np.array_equal(a.values[q][0], b.values[q][0]) and np.array_equal(a.values[q][1], b.values[q][1]), q


def test_a_windows_step_rows_cut_from_every_lines_equal_its_read():
    """steps._window_rows: a window's rows cut from every line's equal the window's read
    (queries/threshold_step_rows.sql), decode_batch_size included: a stats line carries it when its file has no
    decode line in the window, so a file whose decode lines lie outside the window counts its stats lines."""
    import duckdb

    from attribution.thresholds import steps

    t0 = datetime(2026, 3, 2, 12, 0, 0)
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    lines = [("a.log", i + 1, "pod", "sglang", t0 + timedelta(minutes=i), "decode", 3 + i) for i in range(10)]
    lines += [("a.log", 20 + i, "pod", "sglang", t0 + timedelta(hours=1, minutes=i), "stats", 9 - i) for i in range(10)]
    lines += [("b.log", i + 1, "pod2", "vllm", t0 + timedelta(minutes=7 * i), "stats", i) for i in range(12)]
    con.execute("create table engine_steps (file varchar, line integer, deployment varchar, engine varchar, "
                "ts timestamptz, kind varchar, running integer, waiting integer, preemptions integer, "
                "kv_usage double, state_usage double, new_tokens integer, batch_tokens integer, cuda_graph boolean)")
    con.executemany("insert into engine_steps (file, line, deployment, engine, ts, kind, running) values "
                    "(?, ?, ?, ?, ?, ?, ?)", [list(r) for r in lines])
    con.execute("create table thr_starts as select * from (values ('c1', 'pod', 'sglang', $t::timestamptz), "
                "('c2', 'pod2', 'vllm', $t::timestamptz)) as v(config_id, deployment, engine, ts)",
                {"t": t0 - timedelta(hours=1)})
    needed = ["decode_batch_size", "running_requests"]
    whole = steps._read_step_rows(con, None, None, ["running_requests"])
    windows = [(None, None), (t0 + timedelta(minutes=30), None), (None, t0 + timedelta(minutes=30)),
               (t0 + timedelta(minutes=5), t0 + timedelta(hours=1, minutes=5)), (t0 + timedelta(hours=3), None)]
    for since, until in windows:
        got, want = steps._window_rows(whole, since, until, needed), steps._read_step_rows(con, since, until, needed)
        _same_rows(got, want)
    # the rule (steps.decode_batch_sizes, for both): every line's rows count a.log's decode lines, not its stats
    # lines (a.log logs decode lines), and b.log's stats lines (it logs none) ...
    every = steps._read_step_rows(con, None, None, needed)
    assert int(every.values["decode_batch_size"][1].sum()) == 10 + 12
    # ... and the window after a.log's decode lines counts its stats lines' running requests as decode batches
    after = steps._window_rows(whole, t0 + timedelta(minutes=30), None, needed)
    assert int(after.values["decode_batch_size"][1].sum()) == 10 + 7  # (and b.log's 7 lines: it has none)


def test_a_dashboards_cursors_cut_their_step_rows_from_the_commits_lines(tmp_path_factory, monkeypatch):
    """On a dashboard's views of one commit, the first window, however few step lines it holds, reads every line
    once (per engine_steps narrowing) and each window's rows, of any view whose filters leave the lines whole (a
    workload), are cut from them: equal to the window's read. Above SHARED_LINES_MAX lines a window is read
    alone; the lines are counted once per narrowing."""
    from attribution.dashboard import Filters, View
    from attribution.db import fetch
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare

    store = sample_store_at(tmp_path_factory.getbasetemp())
    views = [View(store, Filters()), View(store, Filters(workloads=("key-agents-dev",)))]
    view = views[0]
    shared = view.commit.step_rows
    for v in views:
        select(v.con, by="all")
        prepare(v.con, load_catalogue())
    needed = [q for q in steps.QUANTITIES if q in set(steps.step_settings(view.con)["quantity"].to_list())]
    first, last = fetch(view.con, "select min(ts), max(ts) from engine_steps").row(0)
    early = first + (last - first) / 20
    small = steps.step_rows(view.con, None, early)
    (whole,) = shared.rows.values()
    assert 0 < small.size < whole.size / 4
    _same_rows(small, steps._read_step_rows(view.con, None, early, needed))
    big = steps.step_rows(view.con, early)
    assert 0 < big.size < whole.size
    _same_rows(big, steps._read_step_rows(view.con, early, None, needed))
    middle = (first + (last - first) / 3, first + (last - first) * 2 / 3)
    for v in views:
        for since, until in ((None, None), (None, early), middle):
            _same_rows(steps.step_rows(v.con, since, until), steps._read_step_rows(v.con, since, until, needed))
    assert [id(r) for r in shared.rows.values()] == [id(whole)]  # (read once)
    # a narrowing to deployments, or to engine versions, is cut from every line's too (its engine starts narrowed
    # as well); one to a label reads its own lines
    deps = fetch(view.con, "select distinct deployment from engine_steps order by 1").to_series().to_list()
    versions = view.choices().versions
    assert len(deps) > 1 and len(versions) > 2
    for flt in (Filters(deployments=(deps[0],)), Filters(deployments=tuple(deps[1:]), workloads=("key-agents-dev",)),
                Filters(deployments=(deps[0], "(none)")), Filters(versions=versions[:1]),
                Filters(versions=versions[1:], workloads=("key-agents-dev",))):
        one = View(store, flt)
        select(one.con, by="all")
        prepare(one.con, load_catalogue())
        own = [q for q in steps.QUANTITIES if q in set(steps.step_settings(one.con)["quantity"].to_list())]
        for since, until in ((None, None), middle):
            cut = steps.step_rows(one.con, since, until)
            assert (0 if since else 1) <= cut.size < whole.size
            _same_rows(cut, steps._read_step_rows(one.con, since, until, own))
    assert [id(r) for r in shared.rows.values()] == [id(whole)]  # (not read again)
    labelled = View(store, Filters(labels=view.choices().labels[:1]))
    select(labelled.con, by="all")
    prepare(labelled.con, load_catalogue())
    own = [q for q in steps.QUANTITIES if q in set(steps.step_settings(labelled.con)["quantity"].to_list())]
    _same_rows(steps.step_rows(labelled.con), steps._read_step_rows(labelled.con, None, None, own))
    assert all(r is not whole for r in shared.rows.values()) and len(shared.rows) == steps.SHARED_KEEP
    # more lines than the cap: a window is read alone, and the lines are not counted again
    counted = dict(shared.lines)
    assert len(counted) == 2
    monkeypatch.setattr(steps, "SHARED_LINES_MAX", 0)
    shared.rows.clear()
    alone = steps.step_rows(view.con, None, early)
    assert not shared.rows and shared.lines == counted
    _same_rows(alone, steps._read_step_rows(view.con, None, early, needed))


def test_a_commits_every_line_rows_are_kept_on_disk_for_the_next_process(tmp_path_factory, monkeypatch):
    """The step rows of every line a dashboard cursor of the commit's own lines reads are kept for the commit
    (attribution.kept): the next process's first window (its preparation read them) loads them, neither
    counting nor reading a line, and cuts the same rows; above SHARED_LINES_MAX a window is read alone still."""
    import numpy as np

    from attribution.dashboard import Filters, View
    from attribution.db import fetch
    from attribution.joincache import cache_dir
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare

    store = sample_store_at(tmp_path_factory.getbasetemp())
    view = View(store, Filters())
    select(view.con, by="all")
    prepare(view.con, load_catalogue())
    needed = [q for q in steps.QUANTITIES if q in set(steps.step_settings(view.con)["quantity"].to_list())]
    first, last = fetch(view.con, "select min(ts), max(ts) from engine_steps").row(0)
    early = first + (last - first) / 20
    made = steps.SharedStepRows()  # (a process of its own: the preparation's)
    steps.share_step_rows(view.con, made, every_line=True)
    steps.step_rows(view.con)
    assert list(cache_dir(Path(store)).glob("threshold_step_rows-*.arrow"))
    (every,) = made.rows.values()
    reads = []
    real_read, real_run = steps._read_step_rows, steps.queries.run
    monkeypatch.setattr(steps, "_read_step_rows", lambda *a: reads.append(a) or real_read(*a))
    monkeypatch.setattr(steps.queries, "run", lambda con, name, **kw: reads.append(name) or real_run(con, name, **kw))
    later = steps.SharedStepRows()  # (the next process: a reader's first filter change)
    steps.share_step_rows(view.con, later, every_line=True)
    got = {w: steps.step_rows(view.con, *w) for w in ((None, early), (early, None), (None, None))}
    assert [r for r in reads if r != "threshold_step_settings"] == [] and later.lines == made.lines
    (loaded,) = later.rows.values()
    _same_rows(loaded, every)
    assert (loaded.deployments, loaded.kinds) == (every.deployments, every.kinds)
    for f in ("file", "t", "day", "deployment", "kind", "cuda_graph_off", "config"):
        a, b = getattr(loaded, f), getattr(every, f)
        assert a.dtype == b.dtype and np.array_equal(a, b) and a.flags.writeable, f
    monkeypatch.setattr(steps, "_read_step_rows", real_read)
    monkeypatch.setattr(steps.queries, "run", real_run)
    for (since, until), rows in got.items():
        _same_rows(rows, steps._read_step_rows(view.con, since, until, needed))
    monkeypatch.setattr(steps, "SHARED_LINES_MAX", 0)
    capped = steps.SharedStepRows()
    steps.share_step_rows(view.con, capped, every_line=True)
    _same_rows(steps.step_rows(view.con, None, early), steps._read_step_rows(view.con, None, early, needed))
    assert not capped.rows


def _scrape_store(root: Path, gauges: bool) -> Path:
    """A vLLM pod's stats lines (00:00-00:01, 2026-12-01) and Prometheus snapshots every 60 s to 00:10, each with
    a latency histogram, and (`gauges`) its running/KV gauges: engine_steps scrape rows where the log has no line
    within 120 s (tests/test_prometheus_scrapes.py)."""
    t0 = 1796083200
    pod = root / "pod-a"
    pod.mkdir(parents=True)
    (pod / "vllm.log").write_text("".join(
        f"INFO 12-01 00:{s // 60:02d}:{s % 60:02d} [loggers.py:118] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
        "Avg generation throughput: 20.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 10.0%, "
        "Prefix cache hit rate: 0.0%\n" for s in range(0, 61, 10)))
    for i in range(11):
        text = ("# TYPE vllm:e2e_request_latency_seconds histogram\n"
                f'vllm:e2e_request_latency_seconds_bucket{{le="1.0",model_name="m"}} {i}\n'
                f'vllm:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="m"}} {2 * i}\n'
                f'vllm:e2e_request_latency_seconds_sum{{model_name="m"}} {3.0 * i}\n'
                f'vllm:e2e_request_latency_seconds_count{{model_name="m"}} {2 * i}\n')
        if gauges:
            text += ("# TYPE vllm:num_requests_running gauge\n"
                     'vllm:num_requests_running{engine="0",model_name="m"} 50\n'
                     "# TYPE vllm:kv_cache_usage_perc gauge\n"
                     'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.9\n')
        (pod / f"metrics-{t0 + 60 * i}.prom").write_text(text)
    ingest([str(pod)], root / "store", year=2026, tz="UTC", jobs=1)
    return root / "store"


def test_a_dashboards_thresholds_ask_scrape_intervals_only_where_its_commit_has_scrape_rows(tmp_path, monkeypatch):
    """The thresholds page of a dashboard view asks a window's scrape intervals (a scan of every step line) only
    where its commit's engine_steps hold a scrape row (asked once per commit): a store of Prometheus histograms
    without gauges asks none and says nothing of scrapes; one with gauge scrapes says so under every filter set,
    as the analysis on a plain connection does."""
    from attribution.dashboard import Filters, View
    from attribution.thresholds import crossings

    asked = []
    real = crossings.scrape_intervals
    monkeypatch.setattr(crossings, "scrape_intervals", lambda con, since, until: asked.append((since, until))
                        or real(con, since, until))
    spec = ("busy: running_requests > 5",)
    sets = [Filters(), Filters(since=datetime(2026, 12, 1, 0, 2), until=datetime(2026, 12, 1, 0, 9)),
            Filters(deployments=("pod-a",))]
    for gauges in (False, True):
        store = _scrape_store(tmp_path / f"gauges-{gauges}", gauges)
        con = Store.open(store).connect()
        assert fetch_kinds(con) == ({"stats", "scrape"} if gauges else {"stats"})
        asked.clear()
        for flt in sets:
            res = View(store, flt).thresholds(specs=spec)
            said = [n for n in res.notes if "Prometheus scrapes" in n]
            assert said == (["step rows of pod-a (every 60 s) are Prometheus scrapes, sampled at the scrape "
                             "interval where the logs print no step lines: a crossing between two scrapes is "
                             "missed"] if gauges else []), flt
        assert len(asked) == (len(sets) if gauges else 0)
    plain = thresholds(select(con, by="all"), load_catalogue(specs=list(spec)))
    assert [n for n in plain.notes if "Prometheus scrapes" in n] == said


def fetch_kinds(con) -> set[str]:
    return {k for (k,) in con.execute("select distinct kind from engine_steps").fetchall()}


def test_a_dashboards_cursors_give_a_windows_rows_and_steps_table_again(tmp_path_factory):
    """On a dashboard's views of one commit, a window asked again (another workload: the same lines) gets the
    same rows and the same steps table, equal to the table computed afresh; other step settings or another
    window get their own."""
    from attribution.dashboard import Filters, View
    from attribution.db import fetch
    from attribution.thresholds import steps
    from attribution.thresholds.crossings import prepare

    store = sample_store_at(tmp_path_factory.getbasetemp())
    views = [View(store, Filters()), View(store, Filters(workloads=("key-agents-dev",)))]
    for v in views:
        select(v.con, by="all")
        prepare(v.con, load_catalogue())
    first, last = fetch(views[0].con, "select min(ts), max(ts) from engine_steps").row(0)
    window = (first + (last - first) / 3, first + (last - first) * 2 / 3)
    rows = [steps.step_rows(v.con, *window) for v in views]
    assert rows[0] is rows[1]
    tables = [steps.steps_table(v.con, r, 30.0) for v, r in zip(views, rows, strict=True)]
    assert tables[0] is tables[1] and tables[0].height
    assert tables[0].equals(steps._steps_table(views[1].con, rows[1], 30.0))
    assert steps.steps_table(views[1].con, rows[1], 10.0) is not tables[0]
    other = steps.step_rows(views[1].con, window[0], None)
    assert other is not rows[0] and steps.steps_table(views[1].con, other, 30.0) is not tables[0]
    prepare(views[1].con, load_catalogue(specs=["busy: running_requests > 1"]))  # (other step settings)
    again = steps.steps_table(views[1].con, steps.step_rows(views[1].con, *window), 30.0)
    assert again is not tables[0]
    assert again.equals(steps._steps_table(views[1].con, steps.step_rows(views[1].con, *window), 30.0))
