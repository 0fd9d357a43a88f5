"""`attribution replay`: the store's requests as load-generator traces. The Mooncake conversation trace (read
from ../shared) goes in through the ingest and comes out with every request's lengths and block ids, in order,
its span divided by --speed; sample_logs/ exports in every format, each checked against the fields and types
its reader takes (the loaders' sources are named in attribution/replay/formats.py) and read back by the
ingest's own Mooncake and BurstGPT parsers."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import run_cli, shared

from attribution.ingest import ingest, parse_path
from attribution.replay import FORMATS, read_trace, replay_requests, write
from attribution.store import Store

TRACE = ("traces", "mooncake", "conversation_trace.jsonl")
# The keys each reader takes, with their types (ai-dynamo/aiperf MooncakeTrace; sglang mooncake.py reads
# timestamp / hash_ids / output_length; vLLM timed_trace's default labels).
MOONCAKE_KEYS = {"timestamp": int, "input_length": int, "output_length": int, "hash_ids": list}
AIPERF_KEYS = {**MOONCAKE_KEYS, "session_id": str, "context_mode": str}
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
# The verbatim first line of Mooncake's conversation_trace.jsonl (kvcache-ai/Mooncake FAST25-release), the
# shape every Mooncake-format export must have.
VERBATIM = ('{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, '
            '8, 9, 10, 11, 12, 13]}')


def _source_rows(n: int | None = None) -> list[dict]:
    with shared(*TRACE).open() as f:
        lines = [json.loads(x) for x, _ in zip(f, range(n) if n else iter(int, 1), strict=False)]
    return lines


def _trace_store(tmp_path, n: int | None):
    """The first `n` lines of the conversation trace (all with None) ingested under its own name."""
    src = shared(*TRACE)
    path = tmp_path / "conversation_trace.jsonl"
    with src.open() as f, path.open("w") as out:
        for i, line in enumerate(f):
            if n is not None and i >= n:
                break
            out.write(line)
    store = tmp_path / "mc-store"
    ingest([str(path)], store)
    return store


def _check_mooncake_export(tmp_path, n: int | None, speed: float = 2.5) -> None:
    store = _trace_store(tmp_path, n)
    rep = replay_requests(Store.open(store).connect(), speed=speed)
    out = tmp_path / "export.jsonl"
    write(rep, "mooncake", out)
    got = [json.loads(x) for x in out.read_text().splitlines()]
    want = _source_rows(n)
    assert len(got) == len(want) == (n or 12_031)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(MOONCAKE_KEYS)
        assert (g["input_length"], g["output_length"], g["hash_ids"]) == (
            w["input_length"], w["output_length"], w["hash_ids"])
        # the trace's own ms divided by the speed-up, rounded to whole ms
        assert g["timestamp"] == round(w["timestamp"] / speed)
    span = max(w["timestamp"] for w in want) - min(w["timestamp"] for w in want)
    assert rep.summary()["replay_span_s"] == pytest.approx(span / 1000 / speed)
    assert rep.summary()["with_hash_ids"] == len(want)


def test_mooncake_slice_comes_out_with_its_lengths_block_ids_and_order_at_speed(tmp_path):
    _check_mooncake_export(tmp_path, 1500)


def test_a_window_inside_the_trace_renumbers_block_ids_keeping_which_are_equal(tmp_path):
    store = _trace_store(tmp_path, 1500)
    con = Store.open(store).connect()
    first = replay_requests(con).rows["arrival"].min()
    since = first + (replay_requests(con).rows["arrival"].max() - first) / 2
    rep = replay_requests(con, since=since.isoformat())
    src = [w for w in _source_rows(1500) if w["timestamp"] * 1000 >= (since - first).total_seconds() * 1e6 - 1]
    got = rep.rows["hash_ids"].to_list()
    assert len(got) == len(src) and min(min(g) for g in got) == 0
    mapping: dict[int, int] = {}
    for g, w in zip(got, src, strict=True):
        assert len(g) == len(w["hash_ids"])
        for a, b in zip(w["hash_ids"], g, strict=True):
            assert mapping.setdefault(a, b) == b  # one source id, one exported id
    assert len(set(mapping.values())) == len(mapping)  # and distinct ids stay distinct
    assert rep.rows["t_ms"].min() == 0


@pytest.mark.slow
def test_the_whole_conversation_trace_exports_all_12031_requests(tmp_path):
    _check_mooncake_export(tmp_path, None)


def test_cli_summary_states_requests_span_workloads_and_commands(tmp_path, capsys):
    store = _trace_store(tmp_path, 300)
    out = tmp_path / "t.jsonl"
    code, stdout, err = run_cli(capsys, "replay", "--store", str(store), "--format", "mooncake", "--speed", "2.5",
                                "--out", str(out))
    assert code == 0 and stdout == ""
    ts = [json.loads(x)["timestamp"] for x in out.read_text().splitlines()]
    span = (max(ts) - min(ts)) * 2.5 / 1000
    assert "300 requests" in err and f"span {span:,.3f} s" in err.replace(",", ",")
    assert "conversation" in err  # the per-workload table (the trace's workload, from its file name)
    for knob in ("--custom-dataset-type mooncake_trace", "--mooncake-slowdown-factor 0.4",
                 "--timed-trace-sec-multiplier 0.0004", "--timed-trace-chunk-hash-size 512", "--num-prompts 300"):
        assert knob in err


def _valid_mooncake_row(row: dict, keys: dict) -> None:
    assert set(row) <= set(keys) and {"timestamp", "input_length", "output_length", "hash_ids"} <= set(row)
    for k, v in row.items():
        assert isinstance(v, keys[k]) and not isinstance(v, bool)
    assert row["timestamp"] >= 0 and row["input_length"] >= 0 and row["output_length"] > 0
    assert all(isinstance(h, int) for h in row["hash_ids"])
    # one id per 512-token block (GuideLLM rejects rows where they differ; vLLM/AIPerf build blocks from them)
    assert len(row["hash_ids"]) == max(1, math.ceil(row["input_length"] / 512))


def test_verbatim_mooncake_line_fits_the_checked_schema():
    _valid_mooncake_row(json.loads(VERBATIM), MOONCAKE_KEYS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_sample_logs_export_in_every_format(fmt, sample_store, tmp_path, capsys):
    out = tmp_path / f"trace.{fmt}"
    code, _, err = run_cli(capsys, "replay", "--store", str(sample_store), "--since", "2026-05-05",
                           "--until", "2026-05-05T06:00", "--format", fmt, "--speed", "4", "--out", str(out))
    assert code == 0, err
    rep = replay_requests(Store.open(sample_store).connect(), since="2026-05-05", until="2026-05-05T06:00", speed=4)
    n = rep.rows.height
    assert n > 100 and f"{n:,} requests" in err
    text = out.read_text()
    if fmt in ("mooncake", "sglang", "vllm", "aiperf"):
        rows = [json.loads(x) for x in text.splitlines()]
        assert len(rows) == n
        for r in rows:
            _valid_mooncake_row(r, AIPERF_KEYS if fmt == "aiperf" else MOONCAKE_KEYS)
        assert [r["timestamp"] for r in rows] == sorted(r["timestamp"] for r in rows)
        assert [r["input_length"] for r in rows] == rep.rows["input_length"].to_list()
        # the ingest's Mooncake parser reads the export back: same lengths, same relative times
        back = parse_path(out, "mooncake_trace").tables["requests"]
        assert back.height == n and back["prompt_tokens"].to_list() == rep.rows["input_length"].to_list()
    elif fmt == "burstgpt":
        assert text.splitlines()[0] == BURSTGPT_HEADER
        back = parse_path(out).tables["requests"]
        assert parse_path(out).source == "burstgpt_trace" and back.height == n
        offs = (back["arrival"] - back["arrival"].min()).dt.total_milliseconds() / 1000
        assert offs.to_list() == pytest.approx((rep.rows["t_ms"] / 1000).round(3).to_list(), abs=1e-3)
    else:
        df, _ = read_trace(out)
        assert df.height == n and df["prompt_tokens"].to_list() == rep.rows["input_length"].to_list()
        assert df["arrival"].to_list() == pytest.approx((rep.rows["t_ms"] / 1000).to_list(), abs=1e-6)


def test_filters_and_window_select_requests(sample_store, capsys, tmp_path):
    out = tmp_path / "f.csv"
    code, _, err = run_cli(capsys, "replay", "--store", str(sample_store), "--format", "csv", "--workload",
                           "key-agents-dev", "--since", "2026-05-08T00:00", "--until", "2026-05-08T01:00",
                           "--out", str(out))
    assert code == 0, err
    df = pl.read_csv(out)
    assert df.height > 0 and set(df["workload"]) == {"key-agents-dev"} and set(df["deployment"]) == {
        "qwen35-sglang-0"}
    assert df["arrival_s"].max() < 3600 and df["arrival_s"].min() == 0
    code, stdout, err = run_cli(capsys, "replay", "--store", str(sample_store), "--deployment", "nope")
    assert code == 0 and stdout == "" and "the trace is empty" in err


def test_bad_speed_or_out_is_a_usage_error(sample_store, capsys, tmp_path):
    code, _, err = run_cli(capsys, "replay", "--store", str(sample_store), "--speed", "0")
    assert code == 2 and "--speed" in err
    code, _, err = run_cli(capsys, "replay", "--store", str(sample_store), "--out", str(tmp_path / "no" / "t.jsonl"))
    assert code == 2 and "does not exist" in err


def test_sessions_by_user_keep_turn_order(tmp_path):
    """Gateway rows with a key's user id (LiteLLM `user_api_key_user_id`, the store's `user`): each user's
    requests form one session, turns in arrival order."""
    from conftest import litellm_line

    lines = []
    for i in range(6):
        d = json.loads(litellm_line(i, "app", start=10.0 * i, first=10.0 * i + 0.5, end=10.0 * i + 2, prompt=100 + i,
                                    out=5))
        d["metadata"]["user_api_key_user_id"] = f"user-{i % 2}"
        lines.append(json.dumps(d))
    log = tmp_path / "litellm.jsonl"
    log.write_text("\n".join(lines) + "\n")
    ingest([str(log)], tmp_path / "s")
    rep = replay_requests(Store.open(tmp_path / "s").connect(), sessions="user")
    if rep.rows["session"].n_unique() == 6:
        pytest.fail("the gateway source did not keep the user id")
    assert rep.rows["session"].to_list() == ["s0", "s1"] * 3
    assert rep.rows["turn"].to_list() == [0, 0, 1, 1, 2, 2]
    rows = [json.loads(x) for x in (write(rep, "aiperf") or "").splitlines()]
    assert [r["session_id"] for r in rows] == ["s0", "s1"] * 3
    # each turn's input_length is the whole prompt: AIPerf must send it as it is, not accumulate it
    assert {r["context_mode"] for r in rows} == {"message_array_with_responses"}
