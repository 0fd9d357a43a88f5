"""The log-platform wrappers (journald/syslog, Loki, Elasticsearch and shippers, CloudWatch, Cloud Logging),
tested on their own: hand-worked records from fixtures built on the verbatim examples of log-wrappers.md,
round trips through tests/wrapping_platforms.py, chunking, sniffing against every other input we have."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wrappers_platforms_expected import ACC, CASES, SG, SGP, TB, TB_FILE, V1, ts
from wrapping_platforms import CONTAINER, LOSSY, NAMESPACE, NODE, POD, STREAM, WRAP

from attribution.wrappers import iter_line_chunks, registry
from attribution.wrappers import sniff as sniff_any
from attribution.wrappers.base import RECORD_SCHEMA

FIX = Path(__file__).parent / "fixtures" / "wrappers_platforms"
STATE = {"year": None, "tz": "UTC", "file_mtime": datetime(2026, 1, 20, tzinfo=UTC).timestamp()}


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
    "",
    "[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, accept len: 2.90",
]


@pytest.mark.parametrize("name", sorted(WRAP))
def test_round_trip(name):
    """Plain lines wrapped the platform's way come back as the same lines, in order, at their times."""
    start = datetime(2026, 5, 12, 8, 1, 39, 331000, tzinfo=UTC)
    lines = LINES * 3
    data = WRAP[name](lines, start)
    st = {"year": 2026, "tz": "UTC", "file_mtime": start.timestamp()}
    head = data[:65536].decode("utf-8", "replace")
    assert registry()[name].sniff(head, "f") >= 0.97
    assert sniff_any(head, "f").name == name
    got = decode_bytes(name, data, st)
    assert got["ok"].all()
    want = [LOSSY.get(name, lambda s: s)(s) for s in lines]
    assert got["text"].to_list() == want
    # record i was written at start + i ms; whole-second layouts keep the second
    whole_s = name in ("journald_short", "loki_logcli")
    want_ts = [start + timedelta(milliseconds=i) for i in range(len(lines))]
    want_ts = [t.replace(microsecond=0) if whole_s else t for t in want_ts]
    assert got["rec_ts"].to_list() == want_ts
    for col, value in IDENTITY.get(name, {}).items():
        assert got[col].to_list() == [value] * got.height, col
    others = (
        set(RECORD_SCHEMA)
        - {"line", "ok", "text", "partial", "rec_ts", "stream"}
        - set(IDENTITY.get(name, {}))
    )
    assert all(got[c].null_count() == got.height for c in others), name


K8S = {"namespace": NAMESPACE, "pod": POD, "container": CONTAINER}
IDENTITY = {
    "journald_json": {"unit": "vllm", "host": NODE},
    "journald_short": {"unit": "vllm", "host": NODE},
    "journald_iso": {"unit": "vllm", "host": NODE},
    "syslog_5424": {"unit": "vllm", "host": NODE},
    "loki_jsonl": K8S,
    "loki_api": K8S,
    "elastic_search": {**K8S, "host": NODE},
    "elastic_ndjson": {**K8S, "host": NODE},
    "fluentd_out_file": K8S,
    "cloudwatch_json": {"unit": STREAM},
    "cloudwatch_tail": {"unit": STREAM},
    "gcloud_json": {**K8S, "host": NODE},
    "gcloud_ndjson": {**K8S, "host": NODE},
    "kibana_csv": {**K8S, "host": NODE},
    "azure_json": {**K8S, "host": NODE, "stream": "stdout"},
    "azure_csv": {**K8S, "host": NODE, "stream": "stdout"},
}


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


DOCUMENTS = {"loki_api", "elastic_search", "cloudwatch_json", "gcloud_json", "kibana_csv", "azure_json", "azure_csv"}


def test_journald_message_of_several_lines():
    """A MESSAGE sent through the journal API with newlines: one record per line, same entry."""
    line = (
        '{"__REALTIME_TIMESTAMP":"1778572899331095","MESSAGE":"'
        + TB
        + "\\n"
        + TB_FILE.replace('"', '\\"')
        + '\\n"}'
    )
    got = decode_bytes("journald_json", (line + "\n").encode())
    assert got["text"].to_list() == [TB, TB_FILE]
    assert got["line"].to_list() == [1, 1] and got["ok"].all()


def test_forced_on_the_wrong_file():
    """`--format` forcing a layout on another's file: no exception; a line layout still accounts for each
    line, and what it cannot read is not ok with its raw text."""
    for name in WRAP:
        for file in CASES:
            data = (FIX / file).read_bytes()
            got = decode_bytes(name, data)
            assert got.height >= 1
            if name not in DOCUMENTS:
                n = len(data.split(b"\n")) - 1
                assert sorted(set(got["line"].to_list())) == list(range(1, n + 1)), (name, file)


def _engine_logs() -> list[Path]:
    cases = [p for d in ("vllm_log", "sglang_log") for p in (REPO / "tests" / "cases" / d).glob("*.log")]
    real = sorted(shared("traces", "real_logs").glob("*.log")) + sorted(
        shared("traces", "vllm_server_logs").glob("*.txt")
    )
    return sorted(cases) + real


@pytest.mark.parametrize("name", sorted(WRAP))
def test_real_logs_come_back_line_for_line(name):
    """Every engine case file and real console log (read from ../shared, never copied), wrapped the platform's
    way, comes back as exactly its lines in order (after the platform's own loss)."""
    start = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
    st = {"year": 2026, "tz": "UTC", "file_mtime": start.timestamp()}
    logs = _engine_logs()
    assert len(logs) >= 10
    # Each real log on its own; the case files (short: a decode costs ~6 ms whatever its size) as one file of
    # all their lines in turn, each line still named by its case file when it does not come back.
    cases = [p for p in logs if REPO in p.parents]
    inputs = [([p] * len(ls), ls) for p, ls in ((p, _lines_of(p)) for p in logs if p not in cases)]
    case_lines = [(p, ln) for p in cases for ln in _lines_of(p)]
    inputs.append(([p for p, _ in case_lines], [ln for _, ln in case_lines]))
    for owners, lines in inputs:
        got = decode_bytes(name, WRAP[name](lines, start), dict(st), piece=65536)
        want = [LOSSY.get(name, lambda s: s)(s) for s in lines]
        assert got.height == len(want), owners[0].name
        bad = [i for i, (ok, a, b) in enumerate(zip(got["ok"], got["text"], want, strict=True)) if not ok or a != b]
        assert not bad, f"{owners[bad[0]].name}: {lines[bad[0]]!r} came back as {got['text'][bad[0]]!r}"


def _lines_of(p: Path) -> list[str]:
    lines = p.read_bytes().decode("utf-8", "replace").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def test_elastic_hits_with_fields_instead_of_source():
    """`_source: false` with `fields` (Kibana's field view): values are lists under dotted names."""
    hit = {
        "_index": "filebeat-7.17.0",
        "_id": "x1",
        "fields": {
            "@timestamp": ["2026-05-12T08:01:39.331Z"],
            "message": [V1],
            "kubernetes.pod.name": ["vllm-0"],
            "kubernetes.namespace": ["llm"],
            "kubernetes.container.name": ["vllm"],
        },
    }
    doc = {"took": 1, "timed_out": False, "hits": {"total": {"value": 1}, "hits": [hit]}}
    got = decode_bytes("elastic_search", json.dumps(doc).encode())
    assert rows(got, "namespace", "pod", "container") == [
        (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "llm", "vllm-0", "vllm")
    ]


def test_s3_export_in_reverse_keeps_continuations_after_their_event():
    data = f"2026-05-12T08:01:40.069Z {ACC}\n2026-05-12T08:01:39.331Z {TB}\n{TB_FILE}\n2026-05-12T08:01:38.000Z {V1}\n"
    got = decode_bytes("cloudwatch_s3", data.encode())
    assert got["text"].to_list() == [V1, TB, TB_FILE, ACC]
    assert got["line"].to_list() == [4, 2, 3, 1]


def test_s3_export_key_names_the_log_stream(tmp_path):
    # s3://<bucket>/<prefix>/<taskId>/<logStreamName>/000000.gz, downloaded with its folders; an ECS stream
    # name holds slashes. The stream becomes the records' identity, so the deployment.
    import gzip

    from attribution.ingest import parse_path

    task = "cda45419-90ea-4db5-9833-aade86253e66"
    obj = tmp_path / "exportedlogs" / task / "ecs" / "vllm" / "0d3f5c2a9b8e4c1d" / "000000.gz"
    obj.parent.mkdir(parents=True)
    obj.write_bytes(gzip.compress(f"2026-05-12T08:01:39.331Z {V1}\n2026-05-12T08:01:40.069Z {ACC}\n".encode()))
    got = parse_path(obj, tz="UTC")
    assert got.source == "cloudwatch_s3"
    assert set(got.tables["engine_steps"]["deployment"]) == {"ecs/vllm/0d3f5c2a9b8e4c1d"}
    assert got.tables["access_log"]["deployment"].to_list() == ["ecs/vllm/0d3f5c2a9b8e4c1d"]
    flat = tmp_path / "flat" / "000000.gz"  # without the key's folders: the folder, as for any file
    flat.parent.mkdir()
    flat.write_bytes(obj.read_bytes())
    assert set(parse_path(flat, tz="UTC").tables["engine_steps"]["deployment"]) == {"flat"}


def test_eks_container_insights_nests_a_fluent_bit_record():
    """EKS Container Insights: each CloudWatch event's message is a Fluent Bit record (log-wrappers.md §9).
    The outer wrapper leaves it as is; sniffed again, the inner text is a shipper document per line."""
    inner = (
        WRAP["elastic_ndjson"]([V1, ACC], datetime(2026, 5, 12, 8, 1, 39, tzinfo=UTC)).decode().splitlines()
    )
    events = [
        {
            "logStreamName": "gpu-01-application.var.log.containers.x",
            "timestamp": 1778572899331 + i,
            "message": m,
        }
        for i, m in enumerate(inner)
    ]
    outer = decode_bytes("cloudwatch_json", json.dumps({"events": events}).encode())
    assert outer["text"].to_list() == inner
    head = "\n".join(outer["text"]) + "\n"
    assert sniff_any(head, "x").name == "elastic_ndjson"
    got = decode_bytes("elastic_ndjson", head.encode())
    assert got["text"].to_list() == [V1, ACC] and got["pod"].to_list() == [POD, POD]


def test_kibana_csv_times_in_the_zone_asked_and_dashes_for_missing_fields():
    """Kibana writes `@timestamp` in the browser's zone with no offset (read in --tz) and `-` for a field the
    document lacks; a record whose pod is `-` takes it from the node file path, a quoted message keeps its
    commas and quotes."""
    data = (
        '"@timestamp","kubernetes.pod.name","log.file.path","message"\n'
        '"May 12, 2026 @ 10:01:40.000","-","/var/log/containers/vllm-1_llm_vllm-' + "4f7d" * 16 + '.log",'
        '"' + ACC.replace('"', '""') + '"\n'
        '"May 12, 2026 @ 10:01:39.331","vllm-0","-","' + V1 + '"\n'
    ).encode()
    got = decode_bytes("kibana_csv", data, {"year": 2026, "tz": "Europe/Paris", "file_mtime": 0.0})
    by_line = {r["line"]: r for r in got.iter_rows(named=True)}
    assert by_line[1]["text"] == ACC and by_line[2]["text"] == V1
    assert by_line[1]["pod"] == "vllm-1" and by_line[1]["namespace"] == "llm"
    assert by_line[2]["pod"] == "vllm-0"
    assert by_line[2]["rec_ts"] == ts("2026-05-12T08:01:39.331+00:00")  # 10:01 in Paris (CEST) is 08:01 UTC


def test_azure_rows_with_a_json_message_and_the_legacy_table():
    """`LogMessage` is dynamic: a JSON line from the container comes back as its compact JSON text; the
    legacy ContainerLog table names the text `LogEntry` and has no pod."""
    rows = [
        {"TimeGenerated": "2026-05-12T08:01:39.331Z", "PodName": "gw-0", "LogMessage": {"model": "m", "n": 1}},
        {"TimeGenerated": "2026-05-12T08:01:40Z", "LogEntry": V1, "LogEntrySource": "stderr",
         "ContainerID": "4f7d" * 16},
    ]
    got = decode_bytes("azure_json", json.dumps(rows).encode()).sort("line")
    assert got["text"].to_list() == ['{"model":"m","n":1}', V1]
    assert got["pod"].to_list() == ["gw-0", None] and got["stream"].to_list() == [None, "stderr"]
    assert got["container"].to_list() == [None, "4f7d" * 16]


def test_a_cut_off_csv_export_keeps_the_rows_before_the_cut():
    data = WRAP["azure_csv"](LINES, datetime(2026, 5, 12, tzinfo=UTC))
    tail = b'"5/12/2026, 1:00:00.000 AM","node","vllm","vllm-0","llm","stdout","unterminated'
    cut = data[: data.index(b"\n", len(data) // 2)] + b"\n" + tail
    got = decode_bytes("azure_csv", cut)
    assert got.filter("ok").height >= len(LINES) // 2 - 1
    assert set(got.filter("ok")["text"]) <= set(LINES) | {"unterminated"}


def test_fluent_bit_json_lines_time_under_date():
    """Fluent Bit's `stdout` / `file` output with `format json_lines` puts the time under `json_date_key`
    (`date`): a float epoch by default (`json_date_format double`), ISO 8601 with `iso8601`."""
    k8s = '"kubernetes":{"pod_name":"vllm-0","namespace_name":"llm","container_name":"vllm"}'
    lines = [
        '{"date":1778572899.331095,"log":' + json.dumps(V1 + "\n") + ',"stream":"stdout",' + k8s + "}",
        '{"date":"2026-05-12T08:01:40.000000Z","log":' + json.dumps(ACC + "\n") + ',"stream":"stdout",' + k8s + "}",
    ]
    data = ("\n".join(lines) + "\n").encode()
    assert sniff_any(data.decode(), "kube.log").name == "elastic_ndjson"
    got = decode_bytes("elastic_ndjson", data)
    assert got["text"].to_list() == [V1, ACC] and got["pod"].to_list() == ["vllm-0", "vllm-0"]
    assert got["rec_ts"].to_list() == [ts("2026-05-12T08:01:39.331095+00:00"), ts("2026-05-12T08:01:40+00:00")]
