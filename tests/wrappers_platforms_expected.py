"""Hand-worked records for the platform wrappers' fixtures (tests/fixtures/wrappers_platforms/), worked out
from the fixture lines and log-wrappers.md, for tests/test_wrappers_platforms.py."""

from __future__ import annotations

from datetime import UTC, datetime

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


def ts(s: str) -> datetime:
    return datetime.fromisoformat(s).astimezone(UTC)


# The three hits of es_search.json, which shippers.ndjson holds too (one document a line, with two more):
# (ok, text, rec_ts, stream, namespace, pod, container, host).
ELASTIC_HITS = [
    (True, SG, ts("2025-10-20T03:02:22.500117+00:00"), "stderr", "llm", "sglang-0", "sglang", "gpu-02"),
    (True, V1, ts("2026-05-12T08:01:39.331+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
    (True, ACC, ts("2026-05-12T08:01:40.069+00:00"), "stdout", "llm", "vllm-0", "vllm", "gpu-01"),
]

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
                ts("2025-08-12T01:42:31.1+00:00"),
                False,
                None,
                None,
                "gpu-01",
                "vllm",
            ),
            # MESSAGE null: journalctl without --all dropped it; the raw line stands for it
            (False, None, ts("2025-08-12T01:42:31.2+00:00"), False, None, None, None, "vllm"),
            (
                True,
                SG[:60],
                ts("2025-10-20T03:02:22.5+00:00"),
                True,
                "stderr",
                "sglang",
                "gpu-02",
                "4f7d4f7d4f7d",
            ),
            (
                True,
                SG[60:],
                ts("2025-10-20T03:02:22.500001+00:00"),
                False,
                "stderr",
                "sglang",
                "gpu-02",
                "4f7d4f7d4f7d",
            ),
        ],
    ),
    "journald_short.log": (
        "journald_short",
        ("host", "unit"),
        [
            (False, None, None, None, None),
            (
                True,
                "(APIServer pid=7405) INFO 08-15 18:15:59 [api_utils.py:273] non-default args: {'model_tag': "
                "'Qwen/Qwen2.5-0.5B-Instruct'}",
                ts("2025-08-15T18:15:59+00:00"),
                "vllm",
                "vllm",
            ),
            (
                True,
                '(APIServer pid=8707)   File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/async_llm.py", '
                "line 220, in from_vllm_config",
                ts("2025-08-19T18:34:30+00:00"),
                "vllm",
                "vllm",
            ),
            (False, None, None, None, None),
            (
                True,
                "(APIServer pid=8801) INFO 08-19 18:40:02 [loggers.py:271] Engine 000: Avg prompt throughput: "
                "0.0 tokens/s",
                ts("2025-08-19T18:40:02.123456+00:00"),
                "vllm",
                "vllm",
            ),
        ],
    ),
    "syslog_3164.log": (
        "journald_short",
        ("host", "unit"),
        [
            (
                True,
                "'su root' failed for lonvick on /dev/pts/8",
                ts("2025-10-11T22:14:15+00:00"),
                "mymachine",
                "su",
            ),
            # December -> January: the year steps with the month
            (
                True,
                "[2025-12-31 23:59:59 TP0] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, gen "
                "throughput (token/s): 35.67, #queue-req: 0",
                ts("2025-12-31T23:59:59+00:00"),
                "gpu-01",
                "sglang",
            ),
            (
                True,
                "[2026-01-01 00:00:01 TP0] Decode batch. #running-req: 1, #token: 130, token usage: 0.00, gen "
                "throughput (token/s): 35.60, #queue-req: 0",
                ts("2026-01-01T00:00:01+00:00"),
                "gpu-01",
                "sglang",
            ),
        ],
    ),
    "journald_iso.log": (
        "journald_iso",
        ("host", "unit"),
        [
            (
                True,
                "Highest drive temperature: 43 Celcius.",
                ts("2023-09-08T15:20:30+00:00"),
                "tarta",
                "r710_fan_controller.sh",
            ),
            (
                True,
                "Highest drive temperature: 43 Celcius.",
                ts("2023-09-08T15:20:30.655028+00:00"),
                "tarta",
                "r710_fan_controller.sh",
            ),
            (
                True,
                "Started Housekeeping for Flux job fEi29GDEQPZ.",
                ts("2024-11-07T23:57:47.964255+00:00"),
                "fluke65",
                "systemd",
            ),
            (True, V1, ts("2026-05-12T08:01:39+00:00"), "gpu-01", "vllm"),
        ],
    ),
    "syslog_5424.log": (
        "syslog_5424",
        ("host", "unit"),
        [
            (
                True,
                "'su root' failed for lonvick on /dev/pts/8",
                ts("2003-10-11T22:14:15.003+00:00"),
                "mymachine.example.com",
                "su",
            ),
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
            (
                True,
                'File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1, '
                "in <module>",
                ts("2026-05-12T08:01:39+00:00"),
                "llm",
                "vllm-0",
                "vllm",
            ),
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
            (
                True,
                ACC,
                ts("2026-05-12T08:01:40.069569+00:00"),
                "llm",
                "vllm-0",
                "vllm",
                "llm/vllm",
                "stdout",
            ),
        ],
    ),
    "es_search.json": (
        "elastic_search",
        ("stream", "namespace", "pod", "container", "host"),
        ELASTIC_HITS,
    ),
    "shippers.ndjson": (
        "elastic_ndjson",
        ("stream", "namespace", "pod", "container", "host"),
        [
            ELASTIC_HITS[0],
            (True, SGP, ts("2025-10-20T03:02:21+00:00"), "stderr", "llm", "sglang-1", "sglang", None),
            *ELASTIC_HITS[1:],
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
            (
                True,
                "END RequestId: 69594c41-8463-4f69-b9b4-ff6c49813475",
                ts("2019-06-19T12:45:35.625+00:00"),
                "2019/06/19/[$LATEST]c3ad5cef73594c73806b88d5d3939a98",
            ),
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
            (
                True,
                "2020-09-08 04:00:24 UTC:ec2-52-222-123-172.compute-1.amazonaws.com(48501):fec_api@fec:[109708]:"
                "LOG:  duration: 1.370 ms",
                ts("2020-09-08T04:00:24+00:00"),
            ),
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
            (
                True,
                "router ready",
                ts("2025-10-20T03:02:21+00:00"),
                "stdout",
                "llm",
                "router-0",
                "router",
                "gke-serving-pool-1-8f3a",
            ),
            (
                True,
                SGP,
                ts("2025-10-20T03:02:21+00:00"),
                "stderr",
                "llm",
                "sglang-0",
                "sglang",
                "gke-serving-pool-1-8f3a",
            ),
            (
                True,
                SG,
                ts("2025-10-20T03:02:22.500117+00:00"),
                "stderr",
                "llm",
                "sglang-0",
                "sglang",
                "gke-serving-pool-1-8f3a",
            ),
        ],
    ),
}
