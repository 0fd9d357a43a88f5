"""Plain engine lines wrapped as the log platforms store them, for the metamorphic tests: `WRAP[name](lines,
start)` gives the bytes of a file in that wrapper's layout, record i written at `start + i` ms (or at `start[i]` when `start` is a list of times), in time order
unless the platform's export is newest-first by default (Loki, logcli, gcloud). Layouts follow
../shared/formats/log-wrappers.md §5-10; where a platform is lossy (logcli trims spaces and keeps whole
seconds, `aws logs tail` strips trailing spaces) the wrapper does the same, so a test must allow for it."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

POD, NAMESPACE, CONTAINER, NODE = "vllm-0", "llm", "vllm", "gke-node-1"
CID = "4f7d" * 16
NS_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _times(lines: list[str], start: datetime | list[datetime]) -> list[datetime]:
    if isinstance(start, list):  # every record's time given (the metamorphic tests' `wrapping.record_times`)
        return start
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    return [start.astimezone(UTC) + timedelta(milliseconds=i) for i in range(len(lines))]


def _ns(t: datetime) -> int:
    d = t - NS_EPOCH
    return (d.days * 86400 + d.seconds) * 10**9 + d.microseconds * 1000


def _rfc3339nano(t: datetime) -> str:
    """Go's RFC3339Nano in UTC: trailing zeros of the fraction dropped."""
    frac = f"{t.microsecond:06d}000".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def _go_json(obj: object) -> str:
    """encoding/json: compact, UTF-8 kept, <, >, & escaped."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _out(rows: list[str]) -> bytes:
    return "".join(r + "\n" for r in rows).encode()


def _each_line(
    lines: list[str], start: datetime | list[datetime], row: Callable[[str, datetime], str]
) -> bytes:
    """One output line per log line, `row(line, time)`, in time order."""
    return _out([row(line, t) for line, t in zip(lines, _times(lines, start), strict=True)])


def _line_layout(row: Callable[[str, datetime], str]) -> Callable[[list[str], datetime], bytes]:
    """A layout that writes each line alone, as `row(line, time)`."""
    return lambda lines, start: _each_line(lines, start, row)


def _printable(s: str) -> bool:
    # journald writes a field with control bytes other than tab and newline as an array of byte values
    return not any((ord(c) < 32 and c not in "\t\n") or ord(c) == 127 for c in s)


def journald_json(lines: list[str], start: datetime) -> bytes:
    rnd = random.Random(14)
    boot = "56633d95c08445ce8d2f2b11a9027e7a"
    rows = []
    for i, (line, t) in enumerate(zip(lines, _times(lines, start), strict=True)):
        us = _ns(t) // 1000
        rec = {
            "__CURSOR": f"s=a13fc71bdf594ecc8d19fbe6d06a3b5d;i={i + 1:x};b={boot};m={i:x};t={us:x};x={i:x}",
            "__REALTIME_TIMESTAMP": str(us),
            "__MONOTONIC_TIMESTAMP": str(4402762 + i),
            "_BOOT_ID": boot,
            "PRIORITY": "6",
            "_PID": "7405",
            "_TRANSPORT": "stdout",
            "SYSLOG_IDENTIFIER": "vllm",
            "_SYSTEMD_UNIT": "vllm.service",
            "_HOSTNAME": NODE,
            "MESSAGE": line if _printable(line) else list(line.encode()),
        }
        keys = list(rec)
        rnd.shuffle(keys)  # journalctl does not define the order of fields
        rows.append(json.dumps({k: rec[k] for k in keys}, ensure_ascii=False, separators=(",", ":")))
    return _out(rows)


def _labels() -> dict[str, str]:
    return {"container": CONTAINER, "namespace": NAMESPACE, "pod": POD, "stream": "stdout"}


def loki_jsonl(lines: list[str], start: datetime) -> bytes:
    """`logcli query --output=jsonl` (newest first; keys sorted by encoding/json's map marshalling)."""
    rows = [
        _go_json({"labels": _labels(), "line": line, "timestamp": _rfc3339nano(t)})
        for line, t in zip(lines, _times(lines, start), strict=True)
    ]
    return _out(rows[::-1])


def loki_logcli(lines: list[str], start: datetime) -> bytes:
    """`logcli query` default output, newest first. One stream: its labels are all common, so logcli prints
    them once on stderr and `{}` on each line; lines are TrimSpace'd and times are whole seconds."""
    rows = [
        f"{t:%Y-%m-%dT%H:%M:%S}Z {{}} {line.strip()}"
        for line, t in zip(lines, _times(lines, start), strict=True)
    ]
    return _out(rows[::-1])


def loki_api(lines: list[str], start: datetime) -> bytes:
    """/loki/api/v1/query_range with the default direction (backward: newest first)."""
    values = [[str(_ns(t)), line] for line, t in zip(lines, _times(lines, start), strict=True)][::-1]
    doc = {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": [{"stream": _labels(), "values": values}],
            "stats": {"summary": {"bytesProcessedPerSecond": 0, "totalEntriesReturned": len(values)}},
        },
    }
    return _go_json(doc).encode()


def _filebeat(line: str, t: datetime, i: int) -> dict:
    return {
        "@timestamp": f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z",
        "message": line,
        "stream": "stdout",
        "input": {"type": "container"},
        "log": {
            "offset": i * 200,
            "file": {"path": f"/var/log/containers/{POD}_{NAMESPACE}_{CONTAINER}-{CID}.log"},
        },
        "kubernetes": {
            "pod": {"name": POD, "uid": "241373d0-5916-4080-8c76-8e4b1152f7b5"},
            "namespace": NAMESPACE,
            "container": {"name": CONTAINER},
            "node": {"name": NODE},
        },
        "container": {"id": CID, "runtime": "containerd"},
        "host": {"name": NODE},
    }


def elastic_search(lines: list[str], start: datetime) -> bytes:
    """A `_search` response over a Filebeat index (sorted by @timestamp, as a user exporting asks for)."""
    hits = [
        {
            "_index": "filebeat-8.15.0",
            "_id": f"doc{i}",
            "_score": None,
            "_source": _filebeat(line, t, i),
            "sort": [_ns(t) // 10**6],
        }
        for i, (line, t) in enumerate(zip(lines, _times(lines, start), strict=True))
    ]
    doc = {
        "took": 12,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {"total": {"value": len(hits), "relation": "eq"}, "max_score": None, "hits": hits},
    }
    return json.dumps(doc, ensure_ascii=False, indent=2).encode()


def elastic_ndjson(lines: list[str], start: datetime) -> bytes:
    """Fluent Bit documents (tail + kubernetes filter, docker-style `log` with its newline), one per line."""
    rows = [
        json.dumps(
            {
                "@timestamp": f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z",
                "log": line + "\n",
                "stream": "stdout",
                "time": _rfc3339nano(t),
                "kubernetes": {
                    "pod_name": POD,
                    "namespace_name": NAMESPACE,
                    "pod_id": "241373d0",
                    "container_name": CONTAINER,
                    "docker_id": CID,
                    "host": NODE,
                },
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for line, t in zip(lines, _times(lines, start), strict=True)
    ]
    return _out(rows)


def fluentd_out_file(lines: list[str], start: datetime) -> bytes:
    tag = f"kube.var.log.containers.{POD}_{NAMESPACE}_{CONTAINER}-{CID}.log"

    def row(line: str, t: datetime) -> str:
        record = {"log": line + "\n", "stream": "stdout", "time": _rfc3339nano(t)}
        return f"{t:%Y-%m-%dT%H:%M:%S}+00:00\t{tag}\t" + json.dumps(record, separators=(",", ":"))

    return _each_line(lines, start, row)


STREAM = "vllm/vllm/0d3f5c2a9b8e4c1d"


def cloudwatch_json(lines: list[str], start: datetime) -> bytes:
    """`aws logs filter-log-events` pages (1000 events each) written one after the other."""
    events = [
        {
            "logStreamName": STREAM,
            "timestamp": _ns(t) // 10**6,
            "message": line + "\n",
            "ingestionTime": _ns(t) // 10**6 + 900,
            "eventId": f"{_ns(t):056d}",
        }
        for line, t in zip(lines, _times(lines, start), strict=True)
    ]
    pages = [events[i : i + 1000] for i in range(0, len(events), 1000)] or [[]]
    out = []
    for k, page in enumerate(pages):
        doc: dict = {"events": page, "searchedLogStreams": []}
        if k + 1 < len(pages):
            doc["nextToken"] = f"Bxkq6kVGFtq2y_MoigeqscPOdhXVbhiVtLoAmXb5jCr{k}"
        out.append(json.dumps(doc, indent=4))
    return ("\n".join(out) + "\n").encode()


def _entry(line: str, t: datetime, i: int) -> dict:
    return {
        "insertId": f"{i:08x}kq3vmf1",
        "labels": {"compute.googleapis.com/resource_name": NODE, "k8s-pod/app": "vllm"},
        "logName": "projects/llm-serving/logs/stdout",
        "receiveTimestamp": _rfc3339nano(t + timedelta(seconds=2)),
        "resource": {
            "labels": {
                "cluster_name": "serving",
                "container_name": CONTAINER,
                "location": "us-east1",
                "namespace_name": NAMESPACE,
                "pod_name": POD,
                "project_id": "llm-serving",
            },
            "type": "k8s_container",
        },
        "severity": "INFO",
        "textPayload": line + "\n",
        "timestamp": _rfc3339nano(t),
    }


def gcloud_json(lines: list[str], start: datetime) -> bytes:
    """`gcloud logging read --format=json`: a pretty-printed array, newest first, keys sorted."""
    entries = [
        _entry(line, t, i) for i, (line, t) in enumerate(zip(lines, _times(lines, start), strict=True))
    ]
    return (json.dumps(entries[::-1], indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def gcloud_ndjson(lines: list[str], start: datetime) -> bytes:
    """A Cloud Storage sink's object: one LogEntry per line, in time order."""
    return _out(
        [
            json.dumps(_entry(line, t, i), ensure_ascii=False, separators=(",", ":"))
            for i, (line, t) in enumerate(zip(lines, _times(lines, start), strict=True))
        ]
    )


def _csv(values: list[str]) -> str:
    """RFC 4180 as Kibana and the Azure portal write it: every value quoted, quotes doubled."""
    return ",".join('"' + v.replace('"', '""') + '"' for v in values)


def kibana_csv(lines: list[str], start: datetime) -> bytes:
    """Kibana Discover CSV export: the chosen columns, `@timestamp` in the default `dateFormat`
    (`MMM D, YYYY @ HH:mm:ss.SSS`, written in the browser's zone: UTC here), newest first."""
    rows = [_csv(["@timestamp", "kubernetes.namespace", "kubernetes.pod.name", "kubernetes.container.name",
                  "kubernetes.node.name", "message"])]
    recs = list(zip(lines, _times(lines, start), strict=True))
    for line, t in recs[::-1]:
        stamp = f"{t:%b} {t.day}, {t:%Y @ %H:%M:%S}.{t.microsecond // 1000:03d}"
        rows.append(_csv([stamp, NAMESPACE, POD, CONTAINER, NODE, line]))
    return ("\r\n".join(rows) + "\r\n").encode()


def _container_log_v2(line: str, t: datetime) -> dict:
    return {
        "TenantId": "9c4b2a0e-0000-4000-8000-000000000000",
        "TimeGenerated": f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z",
        "Computer": NODE,
        "ContainerId": CID,
        "ContainerName": CONTAINER,
        "PodName": POD,
        "PodNamespace": NAMESPACE,
        "LogMessage": line,
        "LogSource": "stdout",
        "LogLevel": "INFO",
        "Type": "ContainerLogV2",
        "TableName": "PrimaryResult",
    }


def azure_json(lines: list[str], start: datetime) -> bytes:
    """`az monitor log-analytics query` output: a pretty-printed JSON array of row objects, text values."""
    rows = [_container_log_v2(line, t) for line, t in zip(lines, _times(lines, start), strict=True)]
    return (json.dumps(rows, indent=2, ensure_ascii=False) + "\n").encode()


def azure_csv(lines: list[str], start: datetime) -> bytes:
    """The portal's CSV export of the same rows: `[UTC]` in the time column's name, US date text."""
    cols = ["TimeGenerated [UTC]", "Computer", "ContainerName", "PodName", "PodNamespace", "LogSource",
            "LogMessage"]
    rows = [_csv(cols)]
    for line, t in zip(lines, _times(lines, start), strict=True):
        hour = t.hour % 12 or 12
        stamp = f"{t.month}/{t.day}/{t.year}, {hour}:{t:%M:%S}.{t.microsecond // 1000:03d} {t:%p}"
        rows.append(_csv([stamp, NODE, CONTAINER, POD, NAMESPACE, "stdout", line]))
    return ("\r\n".join(rows) + "\r\n").encode()


WRAP: dict[str, Callable[[list[str], datetime], bytes]] = {
    "journald_json": journald_json,
    # `journalctl -o short -a` on a machine in UTC (the test passes tz UTC and the start's year).
    "journald_short": _line_layout(lambda line, t: f"{t:%b %d %H:%M:%S} {NODE} vllm[7405]: {line}"),
    # `journalctl -o short-iso-precise` before systemd 255 (offset without a colon).
    "journald_iso": _line_layout(lambda line, t: f"{t:%Y-%m-%dT%H:%M:%S.%f}+0000 {NODE} vllm[7405]: {line}"),
    "syslog_5424": _line_layout(lambda line, t: f"<14>1 {t:%Y-%m-%dT%H:%M:%S.%f}Z {NODE} vllm 7405 - - {line}"),
    "loki_jsonl": loki_jsonl,
    "loki_logcli": loki_logcli,
    "loki_api": loki_api,
    "elastic_search": elastic_search,
    "elastic_ndjson": elastic_ndjson,
    "fluentd_out_file": fluentd_out_file,
    "cloudwatch_json": cloudwatch_json,
    # `aws logs tail --format detailed`: messages rstrip()ped.
    "cloudwatch_tail": _line_layout(lambda line, t: f"{t:%Y-%m-%dT%H:%M:%S.%f}+00:00 {STREAM} {line.rstrip()}"),
    "cloudwatch_s3": _line_layout(lambda line, t: f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z {line}"),
    "gcloud_json": gcloud_json,
    "gcloud_ndjson": gcloud_ndjson,
    "kibana_csv": kibana_csv,
    "azure_json": azure_json,
    "azure_csv": azure_csv,
}
# the platforms that lose something of the line (the metamorphic test compares after the same loss)
LOSSY = {"loki_logcli": str.strip, "cloudwatch_tail": str.rstrip}
