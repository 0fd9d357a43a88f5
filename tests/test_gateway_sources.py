"""Gateway sources (LiteLLM payloads and SpendLogs, JSON access logs through mapping profiles): profile choice,
timestamp forms, TTFT rules, SpendLogs CSV = Parquet, user mappings, sniffing, chunking and privacy.
Golden rows live in tests/cases/litellm and tests/cases/access_log; these tests cover what a case cannot."""

from __future__ import annotations

import csv
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import shared

from attribution import sources
from attribution.errors import UsageError
from attribution.ingest import parse_path
from attribution.sources.access_log import best_profile, first_json_line

CASES = Path(__file__).resolve().parent / "cases"
MINE = {"litellm", "litellm_json", "litellm_spendlogs", "access_log"}


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def write(path: Path, lines: list[dict | str]) -> Path:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return path


def requests(path: Path, fmt: str | None = None, **kw) -> pl.DataFrame:
    return parse_path(path, fmt, deployment="gw", **kw).tables["requests"].sort("line")


# -- profiles and sniffing -----------------------------------------------------------------------------


@pytest.mark.parametrize("case,profile", [
    ("envoy_basic.jsonl", "envoy_ai_gateway"), ("envoy_genai_aborted.jsonl", "envoy_ai_gateway"),
    ("envoy_malformed.jsonl", "envoy_ai_gateway"), ("nginx_llm_json.jsonl", "nginx"),
    ("kong_plural.jsonl", "kong"), ("kong_singular.jsonl", "kong"),
])
def test_each_profile_is_picked_by_its_first_json_line(case, profile):
    head = (CASES / "access_log" / case).read_text()
    score, prof = best_profile(first_json_line(head))
    assert prof is not None and prof.name == profile and score >= 0.7


def test_every_fixture_is_sniffed_as_its_own_format():
    for folder in ("litellm", "access_log"):
        for expected in (CASES / folder).glob("*.expected.json"):
            stem = expected.name[: -len(".expected.json")]
            inp = next(p for p in expected.parent.iterdir() if p.name.startswith(stem + ".") and p != expected)
            want = json.loads(expected.read_text())["format"]
            assert parse_path(inp).source == want, inp.name


def _heads() -> list[Path]:
    """Files of other formats: other sources' cases and the shared traces and real logs."""
    out = [p for p in CASES.glob("*/*") if p.parent.name not in ("litellm", "access_log")
           and not p.name.endswith((".expected.json", ".md"))]
    for sub in ("mooncake", "azure_llm_2023", "real_logs", "vllm_server_logs"):
        out += [p for p in shared("traces", sub).iterdir() if p.suffix in (".jsonl", ".csv", ".log", ".txt")]
    return out


def test_files_of_other_formats_are_not_claimed():
    heads = _heads()
    assert len(heads) >= 8
    reg = sources.registry()
    for p in heads:
        head = p.read_bytes()[: 64 << 10].decode("utf-8", errors="replace")
        for name in MINE:
            assert reg[name].sniff(head, str(p)) < 0.5, (name, p.name)


def test_litellm_lines_are_not_an_access_log_and_back():
    slp = (CASES / "litellm" / "slp_epoch_floats.jsonl").read_text()
    envoy = (CASES / "access_log" / "envoy_basic.jsonl").read_text()
    reg = sources.registry()
    assert reg["access_log"].sniff(slp, "x.jsonl") == 0.0
    assert reg["litellm"].sniff(envoy, "x.jsonl") == 0.0
    assert reg["litellm_json"].sniff(slp, "x.json") == 0.0  # one object per line is NDJSON
    assert reg["litellm_spendlogs"].sniff(slp, "x.csv") == 0.0


# -- LiteLLM payload rules -----------------------------------------------------------------------------


def _slp(i: int, **kw) -> dict:
    rec = {"id": f"chatcmpl-{i:032x}", "call_type": "acompletion", "status": "success", "model": "m",
           "prompt_tokens": 3, "completion_tokens": 4, "metadata": {}}
    rec.update(kw)
    return rec


def test_epoch_float_and_string_timestamps_give_the_same_instant(tmp_path):
    t0 = 1739235379.683053
    lines = [
        _slp(1, startTime=t0, endTime=t0 + 2),
        _slp(2, startTime="2025-02-11 00:56:19.683053", endTime="2025-02-11 00:56:21.683053"),
        _slp(3, startTime="2025-02-11T00:56:19.683053Z", endTime="2025-02-11T01:56:21.683053+01:00"),
        _slp(4, startTime=str(t0), endTime=str(t0 + 2)),  # epoch seconds written as text
    ]
    df = requests(write(tmp_path / "p.jsonl", lines), "litellm")
    want = datetime(2025, 2, 11, 0, 56, 19, 683053, tzinfo=UTC)
    assert utc(1739235379) == want.replace(microsecond=0)  # the calendar arithmetic the string forms encode
    assert df["arrival"].to_list() == [want] * 4
    assert df["e2e_s"].to_list() == pytest.approx([2.0] * 4, abs=1e-6)


def test_ttft_only_for_streamed_requests_with_a_first_token_before_the_end(tmp_path):
    s, f, e = 1739235000.0, 1739235000.3, 1739235001.0
    lines = [
        _slp(1, stream=True, startTime=s, completionStartTime=f, endTime=e),  # streamed: TTFT
        _slp(2, stream=False, startTime=s, completionStartTime=f, endTime=e),  # not streamed
        _slp(3, startTime=s, completionStartTime=f, endTime=e),  # stream unknown
        _slp(4, stream=True, startTime=s, completionStartTime=e, endTime=e),  # no first token seen
        _slp(5, stream=True, startTime=s, endTime=e),  # completionStartTime absent
    ]
    df = requests(write(tmp_path / "p.jsonl", lines), "litellm")
    assert df["ttft_s"].to_list()[0] == pytest.approx(0.3, abs=1e-9)
    assert df["first_token"].to_list() == [utc(f)] + [None] * 4
    assert df["ttft_s"].to_list()[1:] == [None] * 4


def test_request_key_strips_the_vllm_prefix_and_drops_cache_hits(tmp_path):
    lines = [
        _slp(0, id="chatcmpl-abc-123", startTime=1.0e9, endTime=1.0e9 + 1),
        _slp(0, id="cmpl-def", startTime=1.0e9, endTime=1.0e9 + 1),
        _slp(0, id="0b7e2f4a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", startTime=1.0e9, endTime=1.0e9 + 1),
        _slp(0, id="chatcmpl-abc-123_cache_hit1739235500.1", startTime=1.0e9, endTime=1.0e9 + 1),
        _slp(0, id="chatcmpl-xyz", cache_hit=True, startTime=1.0e9, endTime=1.0e9 + 1),
    ]
    df = requests(write(tmp_path / "p.jsonl", lines), "litellm")
    assert df["request_key"].to_list() == ["abc-123", "def", "0b7e2f4a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", None, None]


def test_ndjson_read_in_small_chunks_gives_the_same_rows(tmp_path):
    lines = [_slp(i, stream=True, startTime=1.7e9 + i, completionStartTime=1.7e9 + i + 0.1, endTime=1.7e9 + i + 1,
                  messages=[{"role": "user", "content": "x" * 300}]) for i in range(40)]
    lines.insert(17, "{broken")
    p = write(tmp_path / "p.jsonl", lines)
    whole = parse_path(p, "litellm", deployment="gw")
    pieces = parse_path(p, "litellm", deployment="gw", chunk_bytes=1024)
    assert whole.tables["requests"].height == 40
    assert pieces.tables["requests"].sort("line").equals(whole.tables["requests"].sort("line"))
    assert pieces.errors["line"].to_list() == whole.errors["line"].to_list() == [18]


def test_access_log_profile_is_kept_across_chunks(tmp_path):
    base = json.loads((CASES / "access_log" / "kong_plural.jsonl").read_text())
    lines = [{**base, "started_at": 1717171717123 + i} for i in range(30)]
    p = write(tmp_path / "kong.jsonl", lines)
    whole = requests(p)
    pieces = parse_path(p, deployment="gw", chunk_bytes=2048).tables["requests"].sort("line")
    assert whole.height == pieces.height == 30
    assert pieces.equals(whole)


# -- SpendLogs: CSV and Parquet ------------------------------------------------------------------------


def _pg_time(text: str) -> datetime | None:
    """A Postgres export's timestamp text (naive UTC, or with a `+00` offset) as an aware datetime."""
    if not text:
        return None
    return datetime.fromisoformat(text + ":00" if text[-3] in "+-" else text).replace(tzinfo=UTC)


def test_spendlogs_parquet_gives_the_rows_of_its_csv(tmp_path):
    src = CASES / "litellm" / "spendlogs.csv"
    with src.open(newline="") as f:
        rows = list(csv.DictReader(f))
    starts = [_pg_time(r["startTime"]) for r in rows]
    # Parquet as a database export writes it: typed timestamps (zone-aware and naive), integers, metadata text.
    pq = tmp_path / "LiteLLM_SpendLogs.parquet"
    pl.read_csv(src).with_columns(
        pl.Series("startTime", starts, dtype=pl.Datetime("us", "UTC")),
        pl.Series("endTime", [_pg_time(r["endTime"]).replace(tzinfo=None) for r in rows], dtype=pl.Datetime("us")),
    ).write_parquet(pq)
    assert isinstance(pl.read_parquet_schema(pq)["endTime"], pl.Datetime)
    from_csv = requests(src, "litellm_spendlogs")
    from_pq = requests(pq, "litellm_spendlogs")
    assert from_pq["line"].to_list() == [1, 2, 3, 4]  # row index; the CSV gives physical lines
    assert from_csv["line"].to_list() == [2, 3, 5, 6]
    assert from_pq.drop("line", "file").equals(from_csv.drop("line", "file"))
    assert from_csv["request_id"].to_list() == [r["request_id"] for r in rows]
    assert from_csv["prompt_tokens"].to_list() == [int(r["prompt_tokens"]) for r in rows]
    assert from_csv["arrival"].to_list() == starts
    assert from_csv["finished"].to_list() == [_pg_time(r["endTime"]) for r in rows]


def test_spendlogs_sniffing_and_missing_columns(tmp_path):
    reg = sources.registry()
    header = (CASES / "litellm" / "spendlogs.csv").read_text().split("\n", 1)[0]
    assert reg["litellm_spendlogs"].sniff(header + "\n", "export.csv") >= 0.9
    assert reg["litellm_spendlogs"].sniff("request_id,startTime\n", "export.csv") == 0.0
    p = tmp_path / "spend.csv"
    p.write_text("request_id,startTime,api_key,spend\n,,,\n")
    parsed = parse_path(p, "litellm_spendlogs", deployment="gw")
    assert parsed.tables["requests"].height == 0
    assert "no request_id or startTime" in parsed.errors["reason"][0]


# -- user mappings -------------------------------------------------------------------------------------

HIGRESS_LIKE = """
name = "my_gateway"
[sniff]
all = ["$.start_time", "$.model"]
[columns]
request_id = "$.request_id"
arrival = { paths = ["$.start_time"], format = "%d/%b/%Y:%H:%M:%S %z" }
e2e_s = { paths = ["$.llm_service_duration"], unit = "ms" }
ttft_s = { paths = ["$.llm_first_token_duration"], unit = "ms" }
prompt_tokens = ["$.input_token", "$.usage.input"]
output_tokens = "$.output_token"
model = "$.model"
key_hash = "$.headers.authorization"
team = '$."x-team.name"'
http_status = "$.response_code"
"""


def test_user_mapping_file(tmp_path):
    m = tmp_path / "mine.toml"
    m.write_text(HIGRESS_LIKE)
    rec = {"request_id": "r-1", "start_time": "30/Aug/2025:18:51:37 +0200", "llm_service_duration": 1500,
           "llm_first_token_duration": 120, "input_token": "15", "output_token": "7", "model": "qwen3",
           "headers": {"authorization": "Bearer tok-0123456789"}, "x-team.name": "search", "response_code": 200}
    rec2 = {**rec, "request_id": "r-2", "input_token": None, "usage": {"input": 9}}
    log = write(tmp_path / "gw.jsonl", [rec, rec2])
    df = requests(log, "access_log", options={"mapping": str(m)})
    assert df["arrival"].to_list() == [datetime(2025, 8, 30, 16, 51, 37, tzinfo=UTC)] * 2
    assert df["finished"].to_list() == [datetime(2025, 8, 30, 16, 51, 38, 500000, tzinfo=UTC)] * 2
    assert df["ttft_s"].to_list() == [0.12, 0.12]
    assert df["prompt_tokens"].to_list() == [15, 9]
    assert df["key_hash"].to_list() == [sha("tok-0123456789")] * 2  # LiteLLM's hash: the key without "Bearer "
    assert df["team"].to_list() == ["search", "search"]
    assert df["workload"].to_list() == ["search", "search"]
    # a built-in profile can be forced by name
    forced = requests(CASES / "access_log" / "nginx_llm_json.jsonl", "access_log", options={"mapping": "nginx"})
    assert forced.height == 3


@pytest.mark.parametrize("text,message", [
    ("name = 'x'\n[columns\n", "not valid TOML"),
    ("[columns]\nrequest_id = '$.id'\n", "at least one of arrival or finished"),
    ("[columns]\narrival = '$.t'\nprompt = '$.p'\n", "unknown columns ['prompt']"),
    ("[columns]\narrival = 'start_time'\n", "is not a JSON path"),
    ("[columns]\narrival = '$.a.*.b'\n", "is not a JSON path"),
    # DuckDB rejects it (the paths are checked in one query): the error names the bad one among good ones
    ("[columns]\narrival = '$.t'\nfinished = '$.a[b'\nmodel = '$.m'\n", "columns.finished: bad JSON path"),
    ("[columns]\narrival = { paths = ['$.t'], unit = 'hours' }\n", "unit must be one of"),
    ("[columns]\narrival = { path = '$.t' }\n", "unknown keys ['path']"),
])
def test_bad_user_mappings_are_usage_errors(tmp_path, text, message):
    m = tmp_path / "bad.toml"
    m.write_text(text)
    log = write(tmp_path / "gw.jsonl", [{"t": 1}])
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]").replace("*", r"\*")):
        parse_path(log, "access_log", options={"mapping": str(m)})


def test_unknown_json_without_a_mapping_asks_for_one(tmp_path):
    log = write(tmp_path / "gw.jsonl", [{"when": 1, "what": "x"}])
    assert sources.registry()["access_log"].sniff(log.read_text(), str(log)) == 0.0
    with pytest.raises(UsageError, match="--mapping"):
        parse_path(log, "access_log")


# -- privacy -------------------------------------------------------------------------------------------

KEY = "sk-live-SECRET1234567890abcdef"
BEARER = "Bearer abcdefghijklmnop0123"
PROMPT = "Please summarise the confidential merger memo for ACME"
LEAKS = ("SECRET1234567890", "abcdefghijklmnop", "confidential merger memo")


def _planted(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    slp = _slp(1, stream=True, startTime=1739235379.5, completionStartTime=1739235379.7, endTime=1739235380.5,
               metadata={"user_api_key_hash": KEY, "user_api_key_alias": BEARER, "user_api_key_team_alias": KEY,
                         "requester_custom_headers": {"authorization": BEARER}},
               messages=[{"role": "user", "content": PROMPT}], response={"choices": [{"text": PROMPT}]},
               error_str=f"litellm.BadRequestError: {PROMPT} with key {KEY}",
               hidden_params={"additional_headers": {"Authorization": BEARER}, "api_base": f"https://{KEY}@host:8000/v1"})
    # A malformed line with the prompt and a key up front, where an error sample would show them.
    bad = json.dumps({"messages": [{"content": PROMPT}], "metadata": {"user_api_key_hash": KEY}, **slp})[:-40]
    out = {"litellm": (write(tmp_path / "slp.jsonl", [slp, bad]), "litellm"),
           "litellm_json": (tmp_path / "slp.json", "litellm_json")}
    out["litellm_json"][0].write_text(json.dumps([slp], indent=2))
    spend = tmp_path / "spend.csv"
    with spend.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["request_id", "startTime", "endTime", "api_key", "spend", "user", "metadata", "messages", "response"])
        w.writerow(["chatcmpl-1", "2025-02-11 00:56:19.5", "2025-02-11 00:56:20.5", KEY, "0", BEARER,
                    json.dumps({"user_api_key_alias": KEY, "error_information": {"error_message": PROMPT}}),
                    json.dumps([{"content": PROMPT}]), PROMPT])
    out["litellm_spendlogs"] = (spend, "litellm_spendlogs")
    pq = tmp_path / "spend.parquet"
    pl.read_csv(spend).write_parquet(pq)
    out["spendlogs_parquet"] = (pq, "litellm_spendlogs")
    envoy = json.loads((CASES / "access_log" / "envoy_basic.jsonl").read_text())
    envoy.update({"authorization": BEARER, "x-tenant-id": KEY, "gen_ai.prompt": PROMPT,
                  "upstream_transport_failure_reason": f"reset by {KEY}"})
    bad = json.dumps({"gen_ai.prompt": PROMPT, **envoy})[:-30]
    out["envoy"] = (write(tmp_path / "envoy.jsonl", [envoy, bad]), "access_log")
    nginx = json.loads((CASES / "access_log" / "nginx_llm_json.jsonl").read_text().split("\n")[0])
    nginx.update({"key_hash": BEARER, "http_authorization": BEARER, "request_body": PROMPT})
    out["nginx"] = (write(tmp_path / "nginx.jsonl", [nginx]), "access_log")
    kong = json.loads((CASES / "access_log" / "kong_plural.jsonl").read_text())
    kong["request"]["headers"]["authorization"] = BEARER
    kong["consumer"]["username"] = KEY
    kong["ai"]["payload"] = {"request": PROMPT}
    out["kong"] = (write(tmp_path / "kong.jsonl", [kong]), "access_log")
    return out


def test_keys_and_prompts_never_reach_an_output_column(tmp_path):
    for name, (path, fmt) in _planted(tmp_path).items():
        parsed = parse_path(path, fmt, deployment="gw")
        assert parsed.tables["requests"].height == 1, name
        for table, df in parsed.tables.items():
            text = df.select(pl.all().cast(pl.Utf8, strict=False)).write_csv()
            for leak in LEAKS:
                assert leak not in text, (name, table, leak)
        req = parsed.tables["requests"]
        hashed = [v for v in req.select("key_hash", "key_alias", "team", "user").row(0) if v is not None]
        assert hashed and all(v in (sha(KEY), sha(BEARER[7:])) or "sk-" not in v for v in hashed), name
    litellm = parse_path(tmp_path / "slp.jsonl", "litellm", deployment="gw").tables["requests"]
    assert litellm["key_hash"].to_list() == [sha(KEY)]
    assert litellm["key_alias"].to_list() == [sha(BEARER[7:])]  # a raw key used as an alias is hashed too
    assert litellm["error"].to_list() == ["litellm.BadRequestError"]  # the class, never the message
    assert litellm["deployment"].to_list() == ["host:8000"]  # credentials in api_base are dropped


@pytest.mark.parametrize("extract", ["_TRY_EXTRACT", "_VALID_EXTRACT"])
def test_json_records_read_the_same_with_one_parse_or_a_validity_test_first(monkeypatch, extract):
    """json_records parses each line once (TRY, DuckDB 1.3+) or tests it with json_valid first (older DuckDB):
    the same records, fallbacks, no-value texts and errors either way, and a line that does not parse is an
    error, never a record."""
    from attribution.sources import access_log
    from attribution.sources.litellm import SLP_PATHS

    cases = Path(__file__).parent / "cases" / "litellm"
    texts = [t for p in sorted(cases.glob("*.jsonl")) for t in p.read_text(encoding="utf-8").splitlines()]
    texts += ['{"id": "a", "startTime": 1, "api_base": "-", "hidden_params": {"api_base": "http://h:1/v1"}}',
              '{"id": "b", "startTime": ', '{"id": "c"} trailing', '  {"id": "d", "model": "None"}']
    lines = pl.DataFrame({"line": range(1, len(texts) + 1), "text": texts})
    monkeypatch.setattr(access_log, "_EXTRACT", getattr(access_log, extract))
    recs, errors = access_log.json_records(lines, SLP_PATHS)
    n = len(texts)
    assert errors["line"].to_list()[-2:] == [n - 2, n - 1]
    assert set(recs["line"]) | set(errors["line"]) == {i + 1 for i, t in enumerate(texts) if t.lstrip().startswith("{")}
    last = recs.filter(pl.col("line") >= n - 3)
    assert last["request_id"].to_list() == ["a", "d"]
    assert last["api_base"].to_list() == ["http://h:1/v1", None]  # `-` is no value: the fallback path's
    assert last["raw_model"].to_list() == [None, None]  # `None` is no value
    if extract == "_TRY_EXTRACT":
        monkeypatch.setattr(access_log, "_EXTRACT", access_log._VALID_EXTRACT)
        again = access_log.json_records(lines, SLP_PATHS)
        assert again[0].equals(recs) and again[1].equals(errors)
