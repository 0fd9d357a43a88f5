"""What the engines' API servers answered (uvicorn access lines), in `attribution health` and in the notes of
an empty lengths / latency table: with vLLM's default logging (no request lines since 0.10) the access lines
are the only record of the calls a pod served, and of the calls it refused before the engine."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from attribution.cli import app
from tests.conftest import REPO

# The access lines' forms are uvicorn's (verbatim ones in tests/cases/vllm_log/uvicorn_access.log, from
# ../shared/formats/engine-logs.md); the statuses other than 200 and 404 are constructed in the same form.
POD = """\
INFO 05-11 12:04:17 [engine.py:310] Added request chatcmpl-b73b4b2df7fd461ca116a2d6cc7a1316.
INFO:     127.0.0.1:49294 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:49296 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:49298 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:49300 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request
INFO:     127.0.0.1:49302 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request
INFO:     127.0.0.1:49304 - "POST /v1/completions HTTP/1.1" 503 Service Unavailable
INFO:     10.109.20.86:59146 - "GET /metrics HTTP/1.1" 200 OK
INFO:     127.0.0.1:56148 - "POST /v1/chat/completions?api_key=sk-abcdefghijkl HTTP/1.1" 404 Not Found
INFO 05-11 12:05:17 [engine.py:310] Added request chatcmpl-c73b4b2df7fd461ca116a2d6cc7a1316.
INFO:     127.0.0.1:49306 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def _json(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def test_health_counts_the_api_servers_responses_and_says_which_calls_went_unlogged(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "pod-a.log").write_text(POD)
    store = tmp_path / "store"
    res = CliRunner().invoke(app, ["ingest", str(logs), "--store", str(store), "--year", "2025", "--tz", "UTC"])
    assert res.exit_code == 0, res.output
    doc = _json("health", "--store", str(store))
    got = {(r["method"], r["path"], r["http_status"]): r["responses"] for r in doc["tables"]["responses"]}
    assert got == {("POST", "/v1/chat/completions", 200): 4, ("POST", "/v1/chat/completions", 400): 2,
                   ("POST", "/v1/completions", 503): 1, ("GET", "/metrics", 200): 1,
                   ("POST", "/v1/chat/completions", 404): 1}  # the query string (a key) is not kept
    assert {r["deployment"] for r in doc["tables"]["responses"]} == {"pod-a"}
    notes = doc["notes"]
    # 4 POST calls answered without error, no request row (v0's `Added request` lines are request events only)
    assert any("did not log as requests: pod-a (4 calls, 0 request rows)" in n and "--enable-log-requests" in n
               for n in notes), notes
    assert any("pod-a: 4 of 8 POST responses of its API server had an error status (2 x 400, 1 x 404, 1 x 503)"
               in n for n in notes), notes
    # the report works on it, and says what its window's anchor is
    res = CliRunner().invoke(app, ["report", "--store", str(store), "--out", str(tmp_path / "r.md")])
    assert res.exit_code == 0, (res.output, res.exception)
    said = " ".join(res.output.split())  # (however the console wraps it)
    assert "the store holds no request rows; its newest step or access line was logged 2025-05-11 12:05" in said
    assert "POST responses of its API server had an error status" in (tmp_path / "r.md").read_text()
    # no request rows: the empty tables' notes point at the access lines, and a relative window counts back
    # from the newest line (the store has no request to anchor it)
    for cmd, table in (("lengths", "stats"), ("latency", "percentiles")):
        doc = _json(cmd, "--store", str(store), "--since", "1d")
        assert doc["tables"][table] == []
        assert any(n.startswith("no requests in the window; the engines' API servers logged 8 POST responses")
                   and "--enable-log-requests" in n for n in doc["notes"]), doc["notes"]


def test_no_unlogged_note_where_every_call_has_its_request_line(sample_store):
    """sample_logs' vLLM pods log a request line for each call their API server answered: no such note, and
    the responses table counts what the access lines say."""
    doc = _json("health", "--store", str(sample_store))
    assert not [n for n in doc["notes"] if "did not log as requests" in n or "error status" in n], doc["notes"]
    posts = {r["deployment"]: r["responses"] for r in doc["tables"]["responses"] if r["method"] == "POST"}
    truth = json.loads((REPO / "sample_logs" / "ground_truth.json").read_text())
    served: dict[str, int] = {}
    for f in truth["files"]:  # the generator writes one access line per request a vLLM pod served
        if f["format"] == "vllm_log":
            served[f["deployment"]] = served.get(f["deployment"], 0) + f["requests"]
    assert posts == served
