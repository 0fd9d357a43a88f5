"""Values at the boundary (issue 16, findings 1, 2 and 12): every parsed value is checked against its column's
domain where the ingest hands a parser's rows to the store. A value out of its domain is null in its row and
one `ingest_errors` row (file, line, reason) says so; the rest of the line and of the file are kept, and the
readers (status, query, report, analyze, concurrency, capacity) work on the store afterwards. Each case is a
small corpus generated here, as the issue's adversarial pass built it."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from conftest import REPO, run_cli

from attribution.analyses.common import resolve_window
from attribution.db import fetch
from attribution.ingest import ingest, parse_path
from attribution.status import store_status
from attribution.store import Store

N = 200
STATS = ("INFO 06-16 10:05:00 [loggers.py:87] Engine 000: Avg prompt throughput: 1254.4 tokens/s, Avg generation "
         "throughput: 29.2 tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: 57.9%, "
         "Prefix cache hit rate: {hit}%")


def vllm_log(running: str = "10", waiting: str = "4", hit: str = "40.5") -> str:
    """N requests (Received + Added, V1 0.8 form) and one stats line, the last line of the file."""
    lines = []
    for i in range(N):
        t = f"06-16 10:{i // 60:02d}:{i % 60:02d}"
        lines.append(f"INFO {t} [logger.py:39] Received request cmpl-{i:032x}-0: prompt: 'hello {i}', params: "
                     "SamplingParams(n=1, max_tokens=32), prompt_token_ids: [1, 2], lora_request: None.")
        lines.append(f"INFO {t} [engine.py:310] Added request cmpl-{i:032x}-0.")
    lines.append(STATS.format(running=running, waiting=waiting, hit=hit))
    return "\n".join(lines) + "\n"


def litellm_line(i: int, start: float) -> str:
    return json.dumps({
        "id": f"chatcmpl-{i:032x}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": start, "completionStartTime": start + 0.2 * (1000 if start > 1e11 else 1),
        "endTime": start + 1.5 * (1000 if start > 1e11 else 1), "model": "m", "prompt_tokens": 9,
        "completion_tokens": 12, "metadata": {"user_api_key_alias": "team-a"},
    })


def sglang_decode(stamp: str, queue: str = "0", usage: str = "0.01") -> str:
    return (f"[{stamp}] Decode batch, #running-req: 1, #token: 9, token usage: {usage}, cuda graph: True, "
            f"gen throughput (token/s): 2.00, #queue-req: {queue}")


def readers_work(capsys, store, tmp_path) -> None:
    """Every reader the issue saw fail exits 0 on the store."""
    assert store_status(Store.open(store))["rows"]
    for args in (("status",), ("query", "select * from requests"), ("query", "select * from engine_steps"),
                 ("analyze",), ("concurrency",), ("capacity",), ("lengths",), ("latency",),
                 ("report", "--out", str(tmp_path / "r.json"), "--since", "30d")):
        code, _out, err = run_cli(capsys, *args, "--store", str(store))
        assert code == 0, (args, err)


def table(store, name: str) -> pl.DataFrame:
    return fetch(Store.open(store).connect(), f"select * from {name} order by line")


def errors_of(store) -> list[dict]:
    return table(store, "ingest_errors").select("file", "line", "reason", "sample").to_dicts()


@pytest.mark.parametrize("running,waiting,hit,column,why", [
    ("99999999999999999999", "4", "40.5", "running", "too large"),  # finding 2
    ("10", "1.5", "40.5", "waiting", "not a whole number"),  # finding 12
    ("10", "4", "250", "prefix_hit_rate", "out of range"),  # finding 12: 250% is not 2.5
])
def test_one_bad_value_is_null_and_reported_the_file_kept(tmp_path, running, waiting, hit, column, why):
    log = tmp_path / "vllm.log"
    log.write_text(vllm_log(running, waiting, hit))
    summary = ingest([str(log)], tmp_path / "store", year=2026, tz="UTC")
    assert [f.status for f in summary.files] == ["read"]
    assert summary.rows["requests"] == N
    steps = table(tmp_path / "store", "engine_steps")
    assert steps.height == 1 and steps[column][0] is None
    # the rest of the line is kept
    assert steps["gen_tput"][0] == pytest.approx(29.2) and steps["kv_usage"][0] == pytest.approx(0.579)
    errs = errors_of(tmp_path / "store")
    assert [(e["line"], e["reason"].startswith(f"{column} {why}")) for e in errs] == [(2 * N + 1, True)]
    assert errs[0]["file"] == str(log.resolve())
    # a second ingest finds the file unchanged (it was not marked failed)
    again = ingest([str(log)], tmp_path / "store", year=2026, tz="UTC")
    assert [f.status for f in again.files] == ["unchanged"]


def test_non_ascii_digit_fails_one_line_not_the_file(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(vllm_log(running="\u0661\u0662"))  # Arabic-Indic 12: `\d` matches it, a float cast does not
    parsed = parse_path(log, year=2026)
    assert parsed.tables["requests"].height == N
    assert parsed.errors["line"].to_list() == [2 * N + 1]


def test_out_of_domain_values_cannot_poison_the_readers(tmp_path, capsys):
    """Finding 1: LiteLLM times in epoch ms (year 57884), an SGLang year 0000, `#queue-req: 2^63-1` and a
    `token usage: 2.5` each become a null and an error; every reader exits 0 afterwards."""
    d = tmp_path / "logs"
    d.mkdir()
    now = time.time() - 3 * 86400
    (d / "gw.jsonl").write_text("\n".join([litellm_line(i, now + 10 * i) for i in range(50)]
                                          + [litellm_line(99, now * 1000)]) + "\n")
    day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
    (d / "sglang.log").write_text("\n".join(
        [sglang_decode(f"{day} 10:00:{i:02d}") for i in range(50)]
        + [sglang_decode("0000-12-01 10:01:00"), sglang_decode(f"{day} 10:01:01", queue=str(2**63 - 1)),
           sglang_decode(f"{day} 10:01:02", usage="2.5")]) + "\n")
    summary = ingest([str(d)], tmp_path / "store", tz="UTC")
    assert sorted(f.status for f in summary.files) == ["read", "read"]
    # (the year-0000 line is an unreadable time: no row; each other bad value is a null in a kept row)
    assert summary.rows["requests"] == 51 and summary.rows["engine_steps"] == 52
    got = {(e["file"].rsplit("/", 1)[1], e["line"], e["reason"].split(" ")[0]) for e in errors_of(tmp_path / "store")}
    assert got == {("gw.jsonl", 51, "arrival"), ("gw.jsonl", 51, "first_token"), ("gw.jsonl", 51, "finished"),
                   ("sglang.log", 51, "unreadable"), ("sglang.log", 52, "waiting"), ("sglang.log", 53, "kv_usage")}
    readers_work(capsys, tmp_path / "store", tmp_path)


def test_timestamps_bounded_by_the_ingest_clock_and_max_future(tmp_path, monkeypatch):
    """A timestamp more than `max_future` (default 1 day) after the ingest's clock is out of its domain; the
    setting moves the bound."""
    soon, later = time.time() + 3600, time.time() + 3 * 86400
    (tmp_path / "gw.jsonl").write_text(litellm_line(1, soon) + "\n" + litellm_line(2, later) + "\n")
    ingest([str(tmp_path / "gw.jsonl")], tmp_path / "s1", tz="UTC")
    assert {e["line"] for e in errors_of(tmp_path / "s1")} == {2}
    monkeypatch.setenv("ATTRIBUTION_MAX_FUTURE", "7d")
    ingest([str(tmp_path / "gw.jsonl")], tmp_path / "s2", tz="UTC")
    assert errors_of(tmp_path / "s2") == []
    ingest([str(tmp_path / "gw.jsonl")], tmp_path / "s3", tz="UTC", max_future=60)
    assert {e["line"] for e in errors_of(tmp_path / "s3")} == {1, 2}


def test_relative_window_not_anchored_on_a_future_row(tmp_path):
    """A row admitted by `max_future` (later than now) does not move `--since 7d`: the window counts back
    from the newest row that is not in the future."""
    base = time.time() - 2 * 86400
    lines = [litellm_line(i, base + 60 * i) for i in range(20)] + [litellm_line(99, time.time() + 20 * 3600)]
    (tmp_path / "gw.jsonl").write_text("\n".join(lines) + "\n")
    ingest([str(tmp_path / "gw.jsonl")], tmp_path / "store", tz="UTC")
    con = Store.open(tmp_path / "store").connect()
    w = resolve_window(con, "1d")
    newest = datetime.fromtimestamp(base + 60 * 19, UTC)
    assert abs(w.newest - newest) < timedelta(seconds=1)


def test_validate_is_per_value_and_vectorised():
    """The checker on its own: one frame, several columns, each bad value reported once with its line."""
    from attribution import domains

    df = pl.DataFrame({
        "line": [1, 2, 3, 4],
        "running": [1.0, 2.5, -1.0, float("nan")],
        "kv_usage": [0.5, 0.2, 1.5, None],
        "ts": pl.Series([datetime(2020, 1, 1), datetime(1, 1, 1), datetime(2020, 1, 1), datetime(9999, 1, 1)],
                        dtype=pl.Datetime("us", "UTC")),
    })
    fixed, errs = domains.validate("engine_steps", df)
    assert fixed["running"].to_list() == [1.0, None, None, None]
    assert fixed["kv_usage"].to_list() == [0.5, 0.2, None, None]
    assert fixed["ts"].is_null().to_list() == [False, True, False, True]
    assert sorted(zip(errs["line"].to_list(), [r.split(" ")[0] for r in errs["reason"]], strict=True)) == [
        (2, "running"), (2, "ts"), (3, "kv_usage"), (3, "running"), (4, "ts")]


def test_the_checks_kept_per_schema_follow_the_time_bound_and_the_parsed_types():
    """The checker keeps each table's checks per parsed schema and bound (domains._checks): a later call
    with another bound or another parsed type of a column gets its own checks, not the first call's."""
    from attribution import domains

    now = 1_764_600_000.0  # 2025-12-01
    df = pl.DataFrame({"line": [1, 2], "ts": pl.Series([datetime(2025, 6, 1), datetime(2027, 6, 1)],
                                                       dtype=pl.Datetime("us", "UTC")), "running": [3, 4]})
    for bound, nulls in ((now, [False, True]), (now + 4 * 365 * 86400, [False, False]), (now, [False, True])):
        fixed, errs = domains.validate("engine_steps", df, domains.ts_max(bound, 0.0))
        assert fixed["ts"].is_null().to_list() == nulls and errs.height == sum(nulls)
    as_text = df.with_columns(pl.col("running").cast(pl.Utf8).replace("4", "4.5"))
    fixed, errs = domains.validate("engine_steps", as_text, domains.ts_max(now, 0.0))
    assert fixed["running"].to_list() == [3, None] and errs["line"].to_list() == [2, 2]


def test_a_value_its_type_cannot_hold_is_reported_where_no_domain_checks_it():
    """Columns without a domain (booleans, lists of ids) are cast by the checker, not left to the store's
    non-failing conform: a value present that its type cannot hold is null and one error; ids that cast
    keep their values, and a text engine_index is caught by its count domain."""
    from attribution import domains

    df = pl.DataFrame({"line": [1, 2, 3], "cuda_graph": ["1", "yes", None], "prompt_tokens": [1, 2, 3],
                       "block_hashes": [["11", "12"], ["x", "13"], None]})
    steps, step_errs = domains.validate("engine_steps", df.select("line", "cuda_graph").with_columns(
        engine_index=pl.Series(["0", "abc", None])))
    assert steps["cuda_graph"].to_list() == [None, None, None] and steps["engine_index"].to_list() == [0, None, None]
    assert sorted((ln, r.split(":")[0]) for ln, r in zip(step_errs["line"], step_errs["reason"], strict=True)) == [
        (1, "cuda_graph not a value of type Boolean"), (2, "cuda_graph not a value of type Boolean"),
        (2, "engine_index not a number")]
    reqs, req_errs = domains.validate("requests", df.select("line", "prompt_tokens", "block_hashes"))
    assert reqs["block_hashes"].to_list() == [[11, 12], None, None]
    assert req_errs["line"].to_list() == [2] and req_errs["sample"].to_list() == ["block_hashes=?"]
    typed = pl.DataFrame({"line": [1], "cuda_graph": [True]})
    assert domains.validate("engine_steps", typed)[0].equals(typed)


def test_bench_duration_no_calendar_holds(tmp_path):
    """Found by the fuzz bench: a vLLM bench run with `duration: 1e300` failed the file (OverflowError); its
    start is now unknown and the file is read."""
    case = REPO / "tests" / "cases" / "vllm_bench" / "append_result.jsonl"
    run = json.loads(case.read_text().splitlines()[0])
    run["duration"] = 1e300
    (tmp_path / "bench.jsonl").write_text(json.dumps(run) + "\n")
    parsed = parse_path(tmp_path / "bench.jsonl", "vllm_bench", tz="UTC")
    assert parsed.source == "vllm_bench"  # (on the old code parse_path raised OverflowError)
    assert parsed.tables["requests"]["arrival"].null_count() == parsed.tables["requests"].height


def test_a_memory_line_beyond_int64_is_reported_not_a_crash(tmp_path):
    # Found by the fuzz bench (seed 9): a Mamba state size of 9223372036854775807 GB overflowed the pool's
    # running total and failed the chunk; the total is now out of its domain: null and reported.
    src = (REPO / "tests" / "cases" / "sglang_log" / "startup_mamba_variants.log").read_text().splitlines()
    bad = [ln.replace("ssm_state size: 3.75GB", "ssm_state size: 9223372036854775807GB") for ln in src]
    assert bad != src
    f = tmp_path / "sglang.log"
    f.write_text("\n".join(bad) + "\n")
    got = parse_path(f, year=2026, tz="UTC")
    cfg = got.tables["engine_config"]
    assert cfg.height and cfg["state_pool_bytes"].null_count() >= 1
    assert any(r.startswith("state_pool_bytes") for r in got.errors["reason"].to_list())
