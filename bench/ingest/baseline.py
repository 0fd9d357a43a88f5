"""The per-line baseline: the parser a user would write for these logs in an afternoon. One regex per line
kind, tried in turn on every line (`for line in open(f)`), timestamps through `datetime.strptime`, rows kept
in Python lists. It reads the same line kinds the benchmark's logs contain and nothing else (no provenance,
no request-key normalisation, no time zones, no store), so it is a lower bound on per-line cost. Gateway
JSON lines (LiteLLM): `json.loads` per line and the requests table's fields picked out.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

YEAR = 2026

_V_HDR = r"^\((?P<proc>[^)]*) pid=(?P<pid>\d+)\) (?P<level>[A-Z]+) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<src>[^\]]+)\] "
V_STATS = re.compile(
    _V_HDR + r"Engine (?P<engine>\d+): Avg prompt throughput: (?P<ptput>[\d.]+) tokens/s, Avg generation "
    r"throughput: (?P<gtput>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs, "
    r"(?:Preemptions: (?P<preempt>\d+), )?GPU KV cache usage: (?P<kv>[\d.]+)%, Prefix cache hit rate: (?P<hit>[\d.]+)%"
)
V_RECEIVED = re.compile(
    _V_HDR + r"Received request (?P<rid>\S+): params: SamplingParams\(.*?\bmax_tokens=(?P<max_tokens>\d+|None)"
)
V_ADDED = re.compile(_V_HDR + r"Added request (?P<rid>\S+)\.$")
ACCESS = re.compile(
    r'^(?:\((?P<proc>[^)]*) pid=\d+\) |\[(?P<ts>[\d-]+ [\d:]+)\] )?INFO:\s+(?P<client>[\d.]+):(?P<port>\d+) - '
    r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})'
)

_S_HDR = r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]+\d+)*)\] "
S_PREFILL = re.compile(
    _S_HDR + r"Prefill batch, #new-seq: (?P<new_seq>\d+), #new-token: (?P<new_tok>\d+), #cached-token: "
    r"(?P<cached>\d+), (?:token usage: (?P<usage>[\d.]+)|full token usage: (?P<full>[\d.]+), mamba usage: "
    r"(?P<mamba>[\d.]+)), #running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+)"
)
S_DECODE = re.compile(
    _S_HDR + r"Decode batch, #running-req: (?P<running>\d+), (?:#token: (?P<tokens>\d+), token usage: "
    r"(?P<usage>[\d.]+)|#full token: (?P<full_tokens>\d+), full token usage: (?P<full>[\d.]+), mamba num: "
    r"(?P<mamba_num>\d+), mamba usage: (?P<mamba>[\d.]+)), cuda graph: (?P<graph>\w+), gen throughput "
    r"\(token/s\): (?P<gen>[\d.]+), #queue-req: (?P<queue>\d+)"
)
S_FINISH = re.compile(
    _S_HDR + r"Finish: obj=.*?, out=\{'meta_info': \{'id': '(?P<rid>[^']*)', 'finish_reason': \{'type': "
    r"'(?P<reason>\w+)'.*?'prompt_tokens': (?P<prompt>\d+).*?'completion_tokens': (?P<completion>\d+), "
    r"'cached_tokens': (?P<cached>\d+).*?'e2e_latency': (?P<e2e>[\d.]+)"
)


def _f(x: str | None) -> float | None:
    return float(x) if x is not None else None


def _i(x: str | None) -> int | None:
    return int(x) if x is not None else None


def parse_vllm(path: str, out: dict[str, list]) -> int:
    n = 0
    last_ts = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            n += 1
            line = line.rstrip("\n")
            if m := V_STATS.match(line):
                ts = last_ts = datetime.strptime(f"{YEAR}-{m['ts']}", "%Y-%m-%d %H:%M:%S")
                out["engine_steps"].append((n, ts, "stats", int(m["running"]), int(m["waiting"]), _i(m["preempt"]),
                                            float(m["kv"]) / 100, float(m["hit"]) / 100, float(m["ptput"]),
                                            float(m["gtput"])))
            elif m := V_RECEIVED.match(line):
                ts = last_ts = datetime.strptime(f"{YEAR}-{m['ts']}", "%Y-%m-%d %H:%M:%S")
                mt = m["max_tokens"]
                out["requests"].append((n, m["rid"], ts, None if mt == "None" else int(mt)))
            elif m := V_ADDED.match(line):
                ts = last_ts = datetime.strptime(f"{YEAR}-{m['ts']}", "%Y-%m-%d %H:%M:%S")
                out["request_events"].append((n, m["rid"], ts, "added"))
            elif m := ACCESS.match(line):
                out["access_log"].append((n, last_ts, m["client"], m["method"], m["path"], int(m["status"])))
    return n


def parse_sglang(path: str, out: dict[str, list]) -> int:
    n = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            n += 1
            line = line.rstrip("\n")
            if m := S_PREFILL.match(line):
                ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S")
                out["engine_steps"].append((n, ts, "prefill", int(m["running"]), int(m["queue"]), int(m["new_seq"]),
                                            int(m["new_tok"]), int(m["cached"]), _f(m["usage"] or m["full"]),
                                            _f(m["mamba"])))
            elif m := S_DECODE.match(line):
                ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S")
                out["engine_steps"].append((n, ts, "decode", int(m["running"]), int(m["queue"]),
                                            _i(m["tokens"] or m["full_tokens"]), _f(m["usage"] or m["full"]),
                                            _f(m["mamba"]), m["graph"] == "True", float(m["gen"])))
            elif m := S_FINISH.match(line):
                ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S")
                out["requests"].append((n, m["rid"], ts, m["reason"], int(m["prompt"]), int(m["completion"]),
                                        int(m["cached"]), float(m["e2e"])))
            elif m := ACCESS.match(line):
                ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S") if m["ts"] else None
                out["access_log"].append((n, ts, m["client"], m["method"], m["path"], int(m["status"])))
    return n


def parse_json(path: str, out: dict[str, list]) -> int:
    """Gateway JSON lines (LiteLLM StandardLoggingPayload): `json.loads` per line, the requests table's fields
    picked into a tuple; times are epoch seconds there."""
    n = 0
    rows = out["gateway_requests"]
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):  # noqa: B007 - n is the line count
            try:
                r = json.loads(line)
            except ValueError:
                continue
            md = r.get("metadata") or {}
            mp = r.get("model_parameters") or {}
            rows.append((n, r.get("id"), r.get("status"), r.get("model"), r.get("api_base"), r.get("model_group"),
                         r.get("startTime"), r.get("endTime"), r.get("completionStartTime"),
                         r.get("prompt_tokens"), r.get("completion_tokens"), r.get("response_cost"),
                         mp.get("max_tokens"), md.get("user_api_key_hash"), md.get("user_api_key_alias"),
                         md.get("user_api_key_team_alias"), r.get("stream"), r.get("cache_hit")))
    return n


def parse_files(paths: list[str]) -> tuple[dict[str, list], int]:
    """Rows per table and the number of lines read. The engine is chosen per file from its first line."""
    out: dict[str, list] = {"engine_steps": [], "requests": [], "request_events": [], "access_log": [],
                            "gateway_requests": []}
    lines = 0
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
        lines += (parse_json if first.startswith("{") else parse_vllm if first.startswith("(") else parse_sglang)(p, out)
    return out, lines
