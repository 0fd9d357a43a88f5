"""The log-platform wrappers (journald/syslog, Loki, Elasticsearch and shippers, CloudWatch, Cloud Logging),
tested on their own: hand-worked records from fixtures built on the verbatim examples of log-wrappers.md,
round trips through tests/wrapping_platforms.py, chunking, sniffing against every other input we have."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution.wrappers import registry
from attribution.wrappers import sniff as sniff_any
from attribution.wrappers._common import iter_line_chunks
from attribution.wrappers.base import RECORD_SCHEMA
from tests.conftest import REPO, shared
from tests.wrapping_platforms import LOSSY, WRAP

FIX = Path(__file__).parent / "fixtures" / "wrappers_platforms"
V1 = (
    "(APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 76.6 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, "
    "Prefix cache hit rate: 0.0%"
)
ACC = '(APIServer pid=1) INFO:     172.17.0.1:53400 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
SG = (
    "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, "
    "gen throughput (token/s): 1.06, #queue-req: 0, "
)
SGP = (
    "[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0, "
)
TB = "Traceback (most recent call last):"
TB_FILE = '  File "/usr/lib/python3.12/asyncio/runners.py", line 195, in run'
STATE = {"year": None, "tz": "UTC", "file_mtime": datetime(2026, 1, 20, tzinfo=UTC).timestamp()}


def ts(s: str) -> datetime:
    return datetime.fromisoformat(s).astimezone(UTC)


def decode_bytes(name: str, data: bytes, state: dict | None = None, piece: int = 4096) -> pl.DataFrame:
    """What the layer gets from a wrapper for a whole file: `records` for document wrappers, `decode` over
    chunks of lines otherwise."""
    w = registry()[name]
    st = dict(STATE) if state is None else state
    pieces = [data[i : i + piece] for i in range(0, len(data), piece)]
    if w.mode == "document":
        frames = list(w.records(pieces, st))
    else:
        frames = [w.decode(chunk, st) for chunk in iter_line_chunks(pieces, chunk_lines=2)]
    out = pl.concat(frames) if frames else pl.DataFrame(schema=RECORD_SCHEMA)
    assert out.schema == pl.Schema(RECORD_SCHEMA)
    return out


def rows(df: pl.DataFrame, *cols: str) -> list[tuple]:
    return [tuple(r) for r in df.select("ok", "text", "rec_ts", *cols).iter_rows()]


# file, wrapper, identity columns compared, expected (ok, text, rec_ts, *identity) in the order handed back
CASES = {
    "journald.json": (
        "journald_json",
        ("partial", "stream", "container", "host", "unit"),
        [
            (True, V1, ts("2026-05-12T08:01:39.331095+00:00"), False, None, None, "gpu-01", "vllm"),
            (
                True,
                "\x1b[1;36m(EngineCore_0 pid=13564)\x1b[0;0m INFO 08-12 01:42:31 [core.py:72] Initializing a V1 LLM "
                "engine (v0.10.0) with config: model='Qwen/Qwen2.5-0.5B-Instruct'",
                ts("2025-08-12T01:42:31.1+00:00"), False, None, None, "gpu-01", "vllm",
            ),
            # MESSAGE null: journalctl without --all dropped it; the raw line stands for it
            (False, None, ts("2025-08-12T01:42:31.2+00:00"), False, None, None, None, "vllm"),
            (True, SG[:60], ts("2025-10-20T03:02:22.5+00:00"), True, "stderr", "sglang", "gpu-02", "4f7d4f7d4f7d"),
            (True, SG[60:], ts("2025-10-20T03:02:22.500001+00:00"), False, "stderr", "sglang", "gpu-02",
             "4f7d4f7d4f7d"),
        ],
    ),
    "journald_short.log": (
        "journald_short",
        ("host", "unit"),
        [
            (False, None, None, None, None),
            (True, "(APIServer pid=7405) INFO 08-15 18:15:59 [api_utils.py:273] non-default args: {'model_tag': "
             "'Qwen/Qwen2.5-0.5B-Instruct'}", ts("2025-08-15T18:15:59+00:00"), "vllm", "vllm"),
            (True, '(APIServer pid=8707)   File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/async_llm.py", '
             "line 220, in from_vllm_config", ts("2025-08-19T18:34:30+00:00"), "vllm", "vllm"),
            (False, None, None, None, None),
            (True, "(APIServer pid=8801) INFO 08-19 18:40:02 [loggers.py:271] Engine 000: Avg prompt throughput: "
             "0.0 tokens/s", ts("2025-08-19T18:40:02.123456+00:00"), "vllm", "vllm"),
        ],
    ),
    "syslog_3164.log": (
        "journald_short",
        ("host", "unit"),
        [
            (True, "'su root' failed for lonvick on /dev/pts/8", ts("2025-10-11T22:14:15+00:00"), "mymachine", "su"),
            # December -> January: the year steps with the month
            (True, "[2025-12-31 23:59:59 TP0] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, gen "
             "throughput (token/s): 35.67, #queue-req: 0", ts("2025-12-31T23:59:59+00:00"), "gpu-01", "sglang"),
            (True, "[2026-01-01 00:00:01 TP0] Decode batch. #running-req: 1, #token: 130, token usage: 0.00, gen "
             "throughput (token/s): 35.60, #queue-req: 0", ts("2026-01-01T00:00:01+00:00"), "gpu-01", "sglang"),
        ],
    ),
    "journald_iso.log": (
        "journald_iso",
        ("host", "unit"),
        [
            (True, "Highest drive temperature: 43 Celcius.", ts("2023-09-08T15:20:30+00:00"), "tarta",
             "r710_fan_controller.sh"),
            (True, "Highest drive temperature: 43 Celcius.", ts("2023-09-08T15:20:30.655028+00:00"), "tarta",
             "r710_fan_controller.sh"),
            (True, "Started Housekeeping for Flux job fEi29GDEQPZ.", ts("2024-11-07T23:57:47.964255+00:00"),
             "fluke65", "systemd"),
            (True, V1, ts("2026-05-12T08:01:39+00:00"), "gpu-01", "vllm"),
        ],
    ),
    "syslog_5424.log": (
        "syslog_5424",
        ("host", "unit"),
        [
            (True, "'su root' failed for lonvick on /dev/pts/8", ts("2003-10-11T22:14:15.003+00:00"),
             "mymachine.example.com", "su"),
            (True, V1, ts("2026-05-12T08:01:39.331095+00:00"), "gpu-01", "vllm"),
            (True, ACC, ts("2026-05-12T08:01:40.069569+00:00"), "gpu-01", "vllm"),
        ],
    ),
    # newest-first exports come back in time order, per identity (null identity first)
    "logcli.jsonl": (
        "loki_jsonl",
        ("namespace", "pod", "container", "stream"),
        [
            (True, "Hello", ts("2006-01-02T08:04:05+00:00"), None, None, None, None),
            (True, V1, ts("2026-05-12T08:01:39.331095+00:00"), "llm", "vllm-0", "vllm", "stdout"),
            (True, ACC, ts("2026-05-12T08:01:40.069569+00:00"), "llm", "vllm-0", "vllm", "stdout"),
        ],
    ),
    "logcli_default.log": (
        "loki_logcli",
        ("namespace", "pod", "container"),
        [
            (True, "Hello", ts("2006-01-02T08:04:05+00:00"), None, None, None),
            # whole seconds: the newest-first file order is reversed for ties as well
            (True, 'File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1, '
             "in <module>", ts("2026-05-12T08:01:39+00:00"), "llm", "vllm-0", "vllm"),
            (True, V1, ts("2026-05-12T08:01:39+00:00"), "llm", "vllm-0", "vllm"),
            (True, ACC, ts("2026-05-12T08:01:40+00:00"), "llm", "vllm-0", "vllm"),
        ],
    ),
    "loki_query_range.json": (
        "loki_api",
        ("namespace", "pod", "container", "unit", "stream"),
        [
            (True, SGP, ts("2025-10-20T03:02:21+00:00"), "llm", "sglang-0", "sglang", "llm/sglang", None),
            (True, SG, ts("2025-10-20T03:02:22.5+00:00"), "llm", "sglang-0", "sglang", "llm/sglang", None),
            (True, V1, ts("2026-05-12T08:01:39.331095+00:00"), "llm", "vllm-0", "vllm", "llm/vllm", "stdout"),
            (True, ACC, ts("2026-05-12T08:01:40.069569+00:00"), "llm", "vllm-0", "vllm", "llm/vllm", "stdout"),
        ],
    ),
    "es_search.json": (
        "elastic_search",
        ("stream", "namespace", "pod", "container", "host"),
        [
            (True, SG, ts("2025-10-20T03:02:22.500117+00:00"), "stderr", "llm", "sglang-0", "sglang", "gpu-02"),
            (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
            (True, ACC, ts("2026-05-12T08:01:40.069+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
        ],
    ),
    "shippers.ndjson": (
        "elastic_ndjson",
        ("stream", "namespace", "pod", "container", "host"),
        [
            (True, SG, ts("2025-10-20T03:02:22.500117+00:00"), "stderr", "llm", "sglang-0", "sglang", "gpu-02"),
            (True, SGP, ts("2025-10-20T03:02:21+00:00"), "stderr", "llm", "sglang-1", "sglang", None),
            (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
            (True, ACC, ts("2026-05-12T08:01:40.069+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
            (True, V1, ts("2026-05-12T08:01:39.331095+00:00"), "stdout", "llm", "vllm-1", "vllm", "gpu-03"),
        ],
    ),
    "fluentd_out_file.log": (
        "fluentd_out_file",
        ("stream", "namespace", "pod", "container"),
        [
            # a record without `log` or `message` is not an engine line
            (False, None, ts("2013-02-28T03:00:00+00:00"), None, None, None, None),
            (True, V1, ts("2026-05-12T08:01:39+00:00"), "stdout", "llm", "vllm-0", "vllm"),
        ],
    ),
    "cloudwatch_events.json": (
        "cloudwatch_json",
        ("unit",),
        [
            (True, "END RequestId: 69594c41-8463-4f69-b9b4-ff6c49813475", ts("2019-06-19T12:45:35.625+00:00"),
             "2019/06/19/[$LATEST]c3ad5cef73594c73806b88d5d3939a98"),
            (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
            # a multi-line event: one record per line, as the plain log had them
            (True, TB, ts("2026-05-12T08:01:40.069+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
            (True, TB_FILE, ts("2026-05-12T08:01:40.069+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
        ],
    ),
    "cloudwatch_tail.log": (
        "cloudwatch_tail",
        ("unit",),
        [
            (True, TB, ts("2020-04-09T20:03:55.125+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
            (True, TB_FILE, ts("2020-04-09T20:03:55.125+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
            (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "ecs/vllm/0d3f5c2a9b8e4c1d"),
        ],
    ),
    "cloudwatch_s3_export.log": (
        "cloudwatch_s3",
        (),
        [
            (True, "2020-09-08 04:00:24 UTC:ec2-52-222-123-172.compute-1.amazonaws.com(48501):fec_api@fec:[109708]:"
             "LOG:  duration: 1.370 ms", ts("2020-09-08T04:00:24+00:00")),
            # not sorted in the export: read back in time order, the continuation staying with its event
            (True, V1, ts("2026-05-12T08:01:39.331+00:00")),
            (True, TB, ts("2026-05-12T08:01:39.331+00:00")),
            (True, TB_FILE, ts("2026-05-12T08:01:39.331+00:00")),
            (True, ACC, ts("2026-05-12T08:01:40.069+00:00")),
        ],
    ),
    "gcloud_read.json": (
        "gcloud_json",
        ("stream", "namespace", "pod", "container", "host"),
        [
            (True, "router ready", ts("2025-10-20T03:02:21+00:00"), "stdout", "llm", "router-0", "router",
             "gke-serving-pool-1-8f3a"),
            (True, SGP, ts("2025-10-20T03:02:21+00:00"), "stderr", "llm", "sglang-0", "sglang",
             "gke-serving-pool-1-8f3a"),
            (True, SG, ts("2025-10-20T03:02:22.500117+00:00"), "stderr", "llm", "sglang-0", "sglang",
             "gke-serving-pool-1-8f3a"),
        ],
    ),
}


@pytest.mark.parametrize("file", sorted(CASES))
def test_fixture_records(file):
    name, cols, expected = CASES[file]
    got = rows(decode_bytes(name, (FIX / file).read_bytes()), *cols)
    # a record that is not ok carries the raw line: compare only that it is the file's text
    raw = (FIX / file).read_text().splitlines()
    for g, e in zip(got, expected, strict=True):
        if e[0] is False:
            assert g[0] is False and (g[1] in raw or g[1].startswith("unreadable")), g
            assert g[2:] == e[2:], g
        else:
            assert g == e


@pytest.mark.parametrize("file", sorted(CASES))
def test_sniff_fixture(file):
    name = CASES[file][0]
    head = (FIX / file).read_bytes()[:65536].decode("utf-8", "replace")
    assert registry()[name].sniff(head, str(FIX / file)) >= 0.97
    assert sniff_any(head, str(FIX / file)).name == name


def test_one_line_at_a_time_equals_whole():
    """Line wrappers keep what they need (the year, the last event) across chunks."""
    for file, (name, _, _) in CASES.items():
        w = registry()[name]
        if w.mode == "document":
            continue
        data = (FIX / file).read_bytes()
        whole = decode_bytes(name, data, dict(STATE), piece=len(data))
        st = dict(STATE)
        frames = [w.decode(c, st) for c in iter_line_chunks([data], chunk_lines=1)]
        assert pl.concat(frames).equals(whole), file


def test_journald_year_from_state_and_mtime():
    data = (FIX / "syslog_3164.log").read_bytes()
    given_year = decode_bytes("journald_short", data, {"year": 2019, "tz": "UTC", "file_mtime": 0.0})
    assert [t.year for t in given_year["rec_ts"]] == [2019, 2019, 2020]
    # no --year: the mtime (January 2026) and the first month (October) put the start in 2025
    berlin = decode_bytes("journald_short", data, {**STATE, "tz": "Europe/Berlin"})
    assert berlin["rec_ts"][0] == ts("2025-10-11T20:14:15+00:00")


LINES = [
    V1,
    ACC,
    SG,
    SGP,
    "\x1b[1;36m(EngineCore_0 pid=13564)\x1b[0;0m INFO 08-12 01:42:31 [core.py:72] Initializing a V1 LLM engine",
    "INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 0.00%, CPU: 90.00%\r",
    "(APIServer pid=1) INFO 05-14 17:45:10 [logger.py:39] Received request chatcmpl-017e: prompt: '<|im_start|>"
    'user\\n"quoted" & \\\\ back\ttab é 漢字'
    "",
    TB,
    TB_FILE,
    "   ",
    "[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, accept len: 2.90",
]


@pytest.mark.parametrize("name", sorted(WRAP))
def test_round_trip(name):
    """Plain lines wrapped the platform's way come back as the same lines, in order, at their times."""
    start = datetime(2026, 5, 12, 8, 1, 39, 331000, tzinfo=UTC)
    lines = LINES * 3
    data = WRAP[name](lines, start)
    st = {"year": 2026, "tz": "UTC", "file_mtime": start.timestamp()}
    assert registry()[name].sniff(data[:65536].decode("utf-8", "replace"), "f") >= 0.97
    got = decode_bytes(name, data, st)
    assert got["ok"].all()
    want = [LOSSY.get(name, lambda s: s)(s) for s in lines]
    assert got["text"].to_list() == want
    times = got["rec_ts"].to_list()
    assert times == sorted(times)
    assert abs((times[0] - start).total_seconds()) < 1 and abs((times[-1] - start).total_seconds()) < 1.1
    if name not in ("journald_short", "journald_iso", "syslog_5424", "cloudwatch_s3", "loki_logcli"):
        assert got["pod"].fill_null("").to_list() != [""] * got.height or got["unit"].null_count() == 0


def _other_inputs() -> list[Path]:
    files = [p for p in (REPO / "tests" / "cases").glob("*/*") if p.is_file()]
    files += [p for p in shared("traces").rglob("*") if p.is_file()]
    return files


# the container wrappers' layouts (log-wrappers.md §2-4, verbatim examples and the documented shapes), which
# another module decodes: none of ours may claim them
CONTAINER_HEADS = {
    "docker_json": '{"log":"' + V1 + '\\n","stream":"stdout","time":"2026-05-12T07:51:39.30180292Z"}\n'
    '{"log":"Log line is here\\n","stream":"stdout","time":"2019-01-01T11:11:11.111111111Z"}\n',
    "docker_ts": "2026-05-12T07:51:36.069569496Z " + ACC + "\n2026-05-12T07:51:39.301802920Z " + V1 + "\n",
    "cri": "2026-05-12T08:01:39.331095044Z stdout F " + V1 + "\n2025-10-20T03:02:22.5Z stderr F " + SGP + "\n"
    "2025-10-20T03:02:23.25Z stderr F " + TB + "\n",
    "kubectl_prefix": "[pod/vllm-0/vllm] 2026-05-12T08:01:39.331095044Z " + V1 + "\n",
    "compose": "vllm-1  | " + V1 + "\nvllm-1  | " + ACC + "\n",
    "github_actions": "2026-06-02T07:46:50.8694207Z (EngineCore_DP0 pid=39062) ERROR 06-02 07:46:41 [core.py:1006]"
    "     super().__init__(\n",
    "dynamo": "2025-04-27T06:45:57.810Z  INFO arbiter.start: Starting master on pid 508\n"
    "2025-04-27T06:45:57.811Z  INFO arbiter.start: Starting master on pid 509\n",
}


def test_sniff_claims_no_container_layout():
    for w in registry().values():
        if w.name in WRAP:
            for layout, head in CONTAINER_HEADS.items():
                assert w.sniff(head, "x.log") < 0.5, (w.name, layout)


def test_sniff_claims_no_other_input():
    """No platform wrapper claims a case file, a real trace or log, or another wrapper's fixture."""
    inputs = _other_inputs()
    assert len(inputs) > 20
    for w in registry().values():
        if w.name not in WRAP:
            continue  # another helper's wrapper
        for p in inputs:
            head = p.read_bytes()[:65536].decode("utf-8", "replace")
            assert w.sniff(head, str(p)) < 0.5, (w.name, p)
        for file, (name, _, _) in CASES.items():
            if name != w.name:
                head = (FIX / file).read_text()
                assert w.sniff(head, file) < 0.5, (w.name, file)


def test_cut_off_document_keeps_what_came_before():
    data = WRAP["gcloud_json"](LINES, datetime(2026, 5, 12, tzinfo=UTC))
    got = decode_bytes("gcloud_json", data[: len(data) // 2])
    bad = got.filter(~pl.col("ok"))
    assert bad.height == 1 and "cut off" in bad["text"][0]
    assert 0 < got.filter("ok").height < len(LINES)
    assert set(got.filter("ok")["text"]) <= set(LINES)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(n for n in WRAP)),
    cut=st.integers(0, 4000),
    junk=st.binary(max_size=40),
)
def test_mangled_input_never_crashes(name, cut, junk):
    """A file cut anywhere, with junk bytes spliced in, decodes without an exception; a line-per-record
    layout gives every physical line exactly once (as a record, or as a not-ok record with its raw text)."""
    data = WRAP[name](LINES, datetime(2026, 5, 12, tzinfo=UTC))
    cut = min(cut, len(data))
    data = data[:cut] + junk + data[cut:]
    got = decode_bytes(name, data, {"year": 2026, "tz": "UTC", "file_mtime": 0.0})
    assert got.height >= 1 or not data
    if name not in DOCUMENTS:
        n = len(data.split(b"\n")) - (1 if data.endswith(b"\n") else 0)
        assert sorted(set(got["line"].to_list())) == list(range(1, n + 1))
        assert got.filter(~pl.col("ok"))["text"].null_count() == 0


DOCUMENTS = {"loki_api", "elastic_search", "cloudwatch_json", "gcloud_json"}
