"""Parser-level tests of the SGLang sources (sglang_log, sglang_reqtime, sglang_metrics) beyond the golden
cases: the real SGLang log in ../shared/traces (read in place, never copied: it carries no license), chunk
invariance, the date rule of the short `[HH:MM:SS TP0]` header, sniffing, and that no prompt text is stored.

Real-log figures come from ../shared/traces/real_logs/README.md or are counted here with `re` and `ast`,
independently of the parser.
"""

from __future__ import annotations

import ast
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from attribution.ingest import parse_path
from attribution.sources.base import ParseContext
from attribution.sources.sglang_log import SOURCES
from attribution.sources.sglang_metrics import SOURCES as METRICS_SOURCES

SRC = SOURCES[0]
ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "traces" / "real_logs"
SGLANG_LOG = REAL / "sglang_repo-sostrowsk-dgx-spark-local-llm.log"
GIB = 1024**3
HEADER = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] "


@pytest.fixture(scope="module")
def real() -> tuple[str, dict[str, pl.DataFrame]]:
    if not SGLANG_LOG.exists():
        pytest.fail(f"{SGLANG_LOG} is missing: ../shared must be checked out beside the repository")
    parsed = parse_path(SGLANG_LOG)
    assert parsed.source == "sglang_log"
    return SGLANG_LOG.read_text(encoding="utf-8", errors="replace"), parsed.tables


def _ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


def test_real_log_batch_lines(real):
    text, t = real
    steps = t["engine_steps"]
    # README: 57 Prefill + 56 Decode lines
    assert steps.filter(pl.col("kind") == "prefill").height == 57
    assert steps.filter(pl.col("kind") == "decode").height == 56
    assert steps["running"].null_count() == 0 and steps["waiting"].null_count() == 0
    prefill_re = re.compile(
        HEADER + r"Prefill batch, .*#new-token: (\d+), #cached-token: (\d+), full token usage: ([\d.]+), "
        r"swa token usage: ([\d.]+), .*#pending-token: (\d+)"
    )
    want = [m.groups() for m in prefill_re.finditer(text)]
    got = steps.filter(pl.col("kind") == "prefill").sort("line")
    assert len(want) == got.height
    for (ts, new, cached, full, swa, pending), row in zip(want, got.iter_rows(named=True), strict=True):
        assert row["ts"] == _ts(ts)
        assert (row["new_tokens"], row["cached_tokens"], row["pending_tokens"]) == (
            int(new),
            int(cached),
            int(pending),
        )
        assert (row["kv_usage"], row["swa_usage"]) == (float(full), float(swa))
    decode_re = re.compile(
        HEADER + r"Decode batch, #running-req: (\d+), #full token: (\d+), full token usage: ([\d.]+), "
        r"#swa token: \d+, swa token usage: ([\d.]+), accept len: ([\d.]+), .*gen throughput \(token/s\): ([\d.]+)"
    )
    want = [m.groups() for m in decode_re.finditer(text)]
    got = steps.filter(pl.col("kind") == "decode").sort("line")
    assert len(want) == got.height == 56
    for (ts, running, full_tok, full, swa, accept, gen), row in zip(
        want, got.iter_rows(named=True), strict=True
    ):
        assert row["ts"] == _ts(ts)
        assert (row["running"], row["kv_tokens"]) == (int(running), int(full_tok))
        assert (row["kv_usage"], row["swa_usage"], row["accept_len"], row["gen_tput"]) == (
            float(full),
            float(swa),
            float(accept),
            float(gen),
        )


def test_real_log_startup_facts(real):
    text, t = real
    cfg = t["engine_config"]
    args_line = next(i for i, ln in enumerate(text.split("\n"), 1) if "server_args=ServerArgs(" in ln)
    assert cfg["start_line"].unique().to_list() == [args_line]
    assert cfg["engine"].unique().to_list() == ["sglang"]
    summary = cfg.filter(pl.col("max_running_requests").is_not_null() & pl.col("flags").is_null()).row(0, named=True)
    assert summary["kv_pool_tokens"] == 185897 and summary["max_running_requests"] == 48
    assert (summary["chunked_prefill_size"], summary["max_prefill_tokens"], summary["max_model_len"]) == (
        8192,
        16384,
        65536,
    )
    kv = re.findall(
        r"KV Cache is allocated\. dtype: [^,]+, #tokens: (\d+), K size: ([\d.]+) GB, V size: ([\d.]+) GB", text
    )
    assert len(kv) == 3
    # The full-attention pool: the target's pools come before the first `Memory pool end` (the third line is
    # the DFlash draft's); of those, SWAKVPool logs the SWA pool first, and the log names its size.
    lines = SGLANG_LOG.read_bytes().decode("utf-8", "replace").split("\n")  # physical lines (`\r` kept)
    first_end = next(i for i, ln in enumerate(lines, 1) if "Memory pool end." in ln)
    target = [i for i, ln in enumerate(lines, 1) if "KV Cache is allocated." in ln and i < first_end]
    swa = int(re.search(r"swa_layer_tokens=(\d+)", text).group(1))
    ((full_line, (tokens, k, v)),) = [(i, kv[n]) for n, i in enumerate(target) if int(kv[n][0]) != swa]
    kv_rows = cfg.filter(pl.col("kv_pool_bytes").is_not_null())
    assert kv_rows["line"].to_list() == [full_line]
    assert kv_rows["kv_pool_tokens"][0] == int(tokens) == summary["kv_pool_tokens"]
    assert kv_rows["kv_pool_bytes"][0] == round((float(k) + float(v)) * GIB)
    weights = [float(x) for x in re.findall(r"Load weight end\. .*mem usage=([\d.]+) GB\.", text)]
    assert cfg["weights_bytes"].max() == round(sum(weights) * GIB)
    args = cfg.filter(pl.col("flags").is_not_null()).row(0, named=True)
    repr_text = text.split("\n")[args_line - 1].split("server_args=", 1)[1]
    keywords = {k.arg: k.value for k in ast.parse(repr_text, mode="eval").body.keywords}
    flags = {f["key"]: f["value"] for f in args["flags"]}
    assert set(flags) == set(keywords)
    assert flags["model_path"] == keywords["model_path"].value == args["model"]
    assert flags["api_key"] == "None" and flags["max_running_requests"] == "48"
    assert flags["cuda_graph_config"] == ast.get_source_segment(repr_text, keywords["cuda_graph_config"])
    assert args["served_model"] == keywords["served_model_name"].value and args["tp_size"] == 1


def test_real_log_access_lines_and_no_errors(real):
    text, t = real
    access = re.findall(HEADER + r'INFO:\s+\S+:\d+ - "(\S+) (\S+) HTTP/[\d.]+" (\d{3})', text)
    got = t["access_log"].sort("line")
    assert got.height == len(access) > 0
    assert [(r["ts"], r["method"], r["path"], r["http_status"]) for r in got.iter_rows(named=True)] == [
        (_ts(ts), m, p, int(s)) for ts, m, p, s in access
    ]
    assert t["ingest_errors"].height == 0
    assert t["requests"].height == 0 and t["request_events"].height == 0


def test_chunked_read_gives_the_same_rows(real):
    _, whole = real
    small = parse_path(SGLANG_LOG, chunk_bytes=2048).tables
    for table, df in whole.items():
        keys = [c for c in ("line", "start_line", "kind") if c in df.columns]
        a = df.sort(keys) if keys else df
        b = small[table].sort(keys) if keys else small[table]
        assert a.equals(b), table


def _ctx(path: str, mtime: float, tz: str = "UTC") -> ParseContext:
    return ParseContext(path, "d", None, None, tz, mtime, {}, {})


def _lines(*texts: str) -> pl.DataFrame:
    return pl.DataFrame(
        {"line": list(range(1, len(texts) + 1)), "text": list(texts)},
        schema={"line": pl.Int64, "text": pl.Utf8},
    )


DECODE = "Decode batch. #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0"


def test_short_header_takes_the_mtime_date():
    mtime = datetime(2024, 9, 10, 15, 0, 0, tzinfo=UTC).timestamp()
    res = SRC.parse(_lines(f"[09:00:00 TP0] {DECODE}", f"[14:00:00 TP0] {DECODE}"), _ctx("x.log", mtime))
    assert res.tables["engine_steps"]["ts"].to_list() == [
        datetime(2024, 9, 10, 9, tzinfo=UTC),
        datetime(2024, 9, 10, 14, tzinfo=UTC),
    ]


def test_short_header_later_than_mtime_is_the_day_before_and_rolls_over():
    mtime = datetime(2024, 9, 10, 8, 0, 0, tzinfo=UTC).timestamp()
    ctx = _ctx("x.log", mtime)
    first = SRC.parse(_lines(f"[22:00:00 TP0] {DECODE}", f"[23:59:00 TP0] {DECODE}"), ctx)
    # a second chunk: the day and the last time of day come from the state
    second = SRC.parse(
        _lines(f"[00:01:00 TP0] {DECODE}").with_columns(pl.lit(3, pl.Int64).alias("line")), ctx
    )
    assert first.tables["engine_steps"]["ts"].to_list() == [
        datetime(2024, 9, 9, 22, tzinfo=UTC),
        datetime(2024, 9, 9, 23, 59, tzinfo=UTC),
    ]
    assert second.tables["engine_steps"]["ts"].to_list() == [datetime(2024, 9, 10, 0, 1, tzinfo=UTC)]


def test_short_header_uses_the_tz_for_the_mtime_date():
    # 23:30 UTC on 9 Sep is 01:30 on 10 Sep in Berlin (CEST): a 01:00 line is on 10 Sep local, 23:00 UTC on 9 Sep
    mtime = datetime(2024, 9, 9, 23, 30, tzinfo=UTC).timestamp()
    res = SRC.parse(_lines(f"[01:00:00 TP0] {DECODE}"), _ctx("x.log", mtime, "Europe/Berlin"))
    assert res.tables["engine_steps"]["ts"].to_list() == [datetime(2024, 9, 9, 23, tzinfo=UTC)]


def test_sniff():
    assert SRC.sniff(SGLANG_LOG.read_text(encoding="utf-8", errors="replace")[:65536], str(SGLANG_LOG)) >= 0.9
    for f in REAL.glob("vllm_*.log"):
        assert SRC.sniff(f.read_text(encoding="utf-8", errors="replace")[:65536], str(f)) == 0.0, f.name
    assert SRC.sniff("[2025-01-01 10:00:00] Uvicorn running\n", "/var/log/app.log") == 0.0
    metrics = METRICS_SOURCES[0]
    assert metrics.sniff('{"request_parameters": "{}", "id": "a", "prompt_tokens": 1}\n', "m.jsonl") >= 0.9
    assert (
        metrics.sniff(SGLANG_LOG.read_text(encoding="utf-8", errors="replace")[:65536], str(SGLANG_LOG))
        == 0.0
    )


SECRET_PROMPT = "my-private-prompt-text"


def test_no_prompt_text_is_stored(tmp_path):
    prompt = f"{SECRET_PROMPT}, rid='x', 'meta_info': {{'id': 'x'}}"
    log = tmp_path / "sglang.log"
    log.write_text(
        f"[2025-10-01 21:25:30] Receive: obj=GenerateReqInput(text=\"{prompt}\", rid='r1')\n"
        f"[2025-10-01 21:25:35] Finish: obj=GenerateReqInput(text=\"{prompt}\", rid='r1'), "
        f"out={{'text': '{SECRET_PROMPT}', 'meta_info': {{'id': 'r1', 'prompt_tokens': 5, 'completion_tokens': 2, "
        f"'e2e_latency': 1.0}}}}\n"
        f'[2025-10-01 21:25:36] Receive: obj=GenerateReqInput(text="{SECRET_PROMPT}, no rid at all")\n'
        f"[2025-10-01 21:25:37] Finish: obj=GenerateReqInput(text='{SECRET_PROMPT} cut\n"
    )
    metrics = tmp_path / "sglang-request-metrics-20251001_21.log"
    metrics.write_text(
        '{"request_parameters": "{\\"text\\": \\"' + SECRET_PROMPT + '\\"}", "id": "m", '
        '"prompt_tokens": 5}\n{"request_parameters": "' + SECRET_PROMPT + '\n{"prompt_tokens": 1}\n'
    )
    for path in (log, metrics):
        tables = parse_path(path).tables
        assert tables["ingest_errors"].height == 2
        for name, df in tables.items():
            for col, dtype in df.schema.items():
                if dtype == pl.Utf8:
                    assert not df[col].str.contains(SECRET_PROMPT, literal=True).any(), (path.name, name, col)
    reqs = parse_path(log).tables["requests"]
    assert reqs["request_id"].to_list() == ["r1"] and reqs["prompt_tokens"].to_list() == [5]


def test_metrics_file_needs_no_line_timestamps(tmp_path):
    path = tmp_path / "sglang-request-metrics-20260101_10.log"
    path.write_text(
        '{"request_parameters": "{}", "id": "a", "prompt_tokens": 3, "completion_tokens": 4, '
        '"e2e_latency": 2.0, "request_received_ts": 1767261600.0}\n'
    )
    os.utime(path, (0, 0))
    parsed = parse_path(path)
    assert parsed.source == "sglang_metrics"
    row = parsed.tables["requests"].row(0, named=True)
    assert row["arrival"] == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert row["finished"] == datetime(2026, 1, 1, 10, 0, 2, tzinfo=UTC)


def test_an_impossible_latency_is_reported_and_the_rest_of_the_file_is_kept(tmp_path):
    finish = ("[2026-05-19 10:01:22] Finish: obj=GenerateReqInput(rid='{rid}', stream=True), out={{'meta_info': "
              "{{'id': '{rid}', 'finish_reason': {{'type': 'stop', 'matched': 151645}}, 'prompt_tokens': 11, "
              "'completion_tokens': 2, 'cached_tokens': 0, 'e2e_latency': {e2e}}}}}\n")
    path = tmp_path / "sglang.log"
    path.write_text(finish.format(rid="a", e2e="2.5e30") + finish.format(rid="b", e2e="0.5"))
    parsed = parse_path(path, year=2026, tz="UTC")
    reqs = parsed.tables["requests"].sort("request_id")
    assert reqs["request_id"].to_list() == ["a", "b"]
    assert reqs["e2e_s"].to_list() == [None, 0.5] and reqs["prompt_tokens"].to_list() == [11, 11]
    assert parsed.errors["line"].to_list() == [1] and "out of range" in parsed.errors["reason"][0]


def test_a_count_no_integer_holds_is_reported_not_nulled_silently(tmp_path):
    """A count written as a fraction, beyond int64, or as text (in the `Finish:` repr and the JSON request
    record) is an ingest error naming the value; the request and its other values are kept."""
    finish = ("[2026-05-19 10:01:22] Finish: obj=GenerateReqInput(rid='{rid}', stream=True), out={{'meta_info': "
              "{{'id': '{rid}', 'finish_reason': {{'type': 'stop', 'matched': 151645}}, 'prompt_tokens': {p}, "
              "'completion_tokens': {o}, 'cached_tokens': 0, 'e2e_latency': 0.5}}}}\n")
    js = ('{{"timestamp": "2026-05-19T10:01:23", "event": "request.finished", "rid": "{rid}", "obj": '
          '{{"sampling_params": {{"max_new_tokens": {m}}}, "stream": true}}, "out": {{"meta_info": {{"id": "{rid}", '
          '"finish_reason": {{"type": "stop"}}, "prompt_tokens": {p}, "completion_tokens": 5, "e2e_latency": 1.5}}}}}}\n')
    path = tmp_path / "sglang.log"
    path.write_text(finish.format(rid="a", p="11.5", o="99999999999999999999") + finish.format(rid="b", p=11, o=2)
                    + js.format(rid="c", m='"lots"', p='"many"') + js.format(rid="d", m=64, p=3))
    parsed = parse_path(path, year=2026, tz="UTC")
    reqs = parsed.tables["requests"].sort("request_id")
    assert reqs["request_id"].to_list() == ["a", "b", "c", "d"]
    assert reqs["prompt_tokens"].to_list() == [None, 11, None, 3]
    assert reqs["output_tokens"].to_list() == [None, 2, 5, 5]
    assert reqs["max_tokens"].to_list() == [None, None, None, 64]
    errs = sorted(zip(parsed.errors["line"].to_list(), parsed.errors["reason"].to_list(), strict=True))
    assert [(ln, r.split(":")[0]) for ln, r in errs] == [
        (1, "output_tokens too large"), (1, "prompt_tokens not a whole number"),
        (3, "max_tokens not a number"), (3, "prompt_tokens not a number")]
