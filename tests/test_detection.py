"""Format detection and silent drops (issue 16, finding 11): a log after a noisy head, a file mixing formats,
`--format X` on a file without X lines, NUL bytes inside lines, a JSON array with stray commas. Inputs are
built in tmp_path from the real logs of ../shared/traces and the case files (constructed from verbatim
examples); each test fails on the code before the fix."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import shared
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attribution import detect
from attribution.cli import app
from attribution.db import fetch
from attribution.errors import InputError
from attribution.ingest import ingest, parse_path
from attribution.sources import StrayCommas
from attribution.store import Store

CASES = Path(__file__).resolve().parent / "cases"
VLLM = "vllm_repo-jayashan10-Deepseek-qwen-deployment.log"
SGLANG = "sglang_repo-sostrowsk-dgx-spark-local-llm.log"
LITELLM = ["slp_epoch_floats.jsonl", "slp_failure_and_cache_hit.jsonl", "slp_streamed_ttft.jsonl",
           "slp_string_times.jsonl"]
DATA = ("engine_steps", "engine_config", "request_events", "access_log", "requests")
# where a row came from; the deployment of an engine's rows is named after the file, which differs here
PROVENANCE = {"file", "line", "start_line", "deployment"}


def lines_of(path: Path) -> list[str]:
    # bytes as they are: a console log's `\r` (progress bars) is not a line break
    return [ln for ln in path.read_bytes().decode().split("\n") if ln]


def rows(tables: dict[str, pl.DataFrame], sources: set[str] | None = None) -> dict[str, list[str]]:
    out = {}
    for t in DATA:
        df = tables[t]
        if sources is not None and df.height:
            df = df.filter(pl.col("source").is_in(sorted(sources)))
        out[t] = sorted(repr(r) for r in df.select([c for c in df.columns if c not in PROVENANCE]).rows())
    return out


def plus(*parts: dict[str, list[str]]) -> dict[str, list[str]]:
    return {t: sorted(r for p in parts for r in p[t]) for t in DATA}


def pip_output(nbytes: int) -> list[str]:
    """What `pip install` prints before a server starts (the layout of pip's own messages)."""
    out, i, size = [], 0, 0
    while size < nbytes:
        out += [f"Collecting package-{i}>=1.{i}", f"  Downloading package_{i}-1.{i}.0-py3-none-any.whl.metadata (4.{i} kB)",
                f"Requirement already satisfied: dep-{i} in /usr/local/lib/python3.12/dist-packages "
                f"(from package-{i}>=1.{i}) (2.{i}.1)"]
        size += sum(len(x) + 1 for x in out[-3:])
        i += 1
    return out + ["Installing collected packages: " + ", ".join(f"package-{k}" for k in range(3)),
                  "Successfully installed package-0-1.0.0 package-1-1.1.0 package-2-1.2.0"]


# -- 1. past a noisy head ------------------------------------------------------------------------------


def test_vllm_log_after_100kb_of_pip_output_is_found(tmp_path):
    plain = shared("traces", "real_logs", VLLM)
    noise = pip_output(100_000)
    f = tmp_path / "vllm_log" / "server.log"
    f.parent.mkdir()
    f.write_bytes(("\n".join(noise + lines_of(plain)) + "\n").encode())
    got = parse_path(f, year=2025, tz="UTC")
    want = parse_path(plain, year=2025, tz="UTC")
    assert got.source == "vllm_log"
    assert rows(got.tables) == rows(want.tables) and want.tables["engine_steps"].height > 0
    assert got.census["unrecognised"] == len(noise) + want.census["unrecognised"]  # the noise is counted
    s = ingest([str(f)], tmp_path / "s", year=2025, tz="UTC")
    assert [x.status for x in s.files] == ["read"] and s.rows["engine_steps"] == want.tables["engine_steps"].height


def test_detection_stops_at_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(detect, "SNIFF_MAX_BYTES", 200_000)
    f = tmp_path / "server.log"
    f.write_text("\n".join(pip_output(250_000) + lines_of(shared("traces", "real_logs", VLLM))) + "\n")
    with pytest.raises(InputError, match="not a recognised format"):
        parse_path(f, year=2025, tz="UTC")


# -- 2. a file mixing formats ----------------------------------------------------------------------------


def _interleave(a: list[str], b: list[str]) -> list[str]:
    out = []
    for i in range(max(len(a), len(b))):
        out += ([a[i]] if i < len(a) else []) + ([b[i]] if i < len(b) else [])
    return out


@pytest.mark.parametrize("chunk_bytes", [None, 2048])
def test_vllm_log_with_litellm_lines_interleaved(tmp_path, chunk_bytes):
    plain = shared("traces", "real_logs", VLLM)
    gateway = [ln for name in LITELLM for ln in lines_of(CASES / "litellm" / name)]
    f = tmp_path / "mixed" / "proxy_and_engine.log"
    f.parent.mkdir()
    mixed = _interleave(lines_of(plain), gateway)
    f.write_bytes(("\n".join(mixed) + "\n").encode())
    got = parse_path(f, year=2025, tz="UTC", chunk_bytes=chunk_bytes)
    want = [parse_path(plain, year=2025, tz="UTC")] + [parse_path(CASES / "litellm" / n) for n in LITELLM]
    assert rows(got.tables) == plus(*(rows(w.tables) for w in want))
    assert got.tables["requests"].filter(pl.col("source") == "litellm").height >= len(LITELLM)
    assert sum(got.census.values()) == len(mixed)  # every line counted once
    assert got.census["parsed"] == sum(w.census["parsed"] for w in want)


def test_vllm_and_sglang_logs_in_one_file(tmp_path):
    vllm, sglang = shared("traces", "real_logs", VLLM), shared("traces", "real_logs", SGLANG)
    mixed = _interleave(lines_of(vllm), lines_of(sglang))
    f = tmp_path / "both" / "engines.log"
    f.parent.mkdir()
    f.write_bytes(("\n".join(mixed) + "\n").encode())
    a, b = parse_path(vllm, year=2025, tz="UTC"), parse_path(sglang, year=2025, tz="UTC")
    got = parse_path(f, year=2025, tz="UTC", chunk_bytes=8192)
    # uvicorn's access lines are the same in both engines' logs and carry no time: whichever parser reads one
    # (and dates it by the engine line before it), each is one row with its client, method, path and status
    va, vb = rows(a.tables), rows(b.tables)
    access = pl.concat([a.tables["access_log"], b.tables["access_log"]])
    key = [c for c in access.columns if c not in PROVENANCE | {"ts", "source"}]
    assert sorted(got.tables["access_log"].select(key).rows()) == sorted(access.select(key).rows())
    va.pop("access_log"), vb.pop("access_log")
    assert {t: v for t, v in rows(got.tables, {"vllm_log"}).items() if t != "access_log"} == va
    assert {t: v for t, v in rows(got.tables, {"sglang_log"}).items() if t != "access_log"} == vb
    assert a.tables["engine_steps"].height > 0 and b.tables["engine_steps"].height > 0
    assert sum(got.census.values()) == len(mixed)
    s = ingest([str(f)], tmp_path / "s", year=2025, tz="UTC", chunk_bytes=8192)
    assert sum(s.files[0].census.values()) == len(mixed)
    assert s.rows["engine_steps"] == a.tables["engine_steps"].height + b.tables["engine_steps"].height


def test_a_forced_format_reads_only_its_own_lines(tmp_path):
    # --format is the user's word: no other format takes the lines it cannot read
    f = tmp_path / "mixed.log"
    f.write_text("\n".join(_interleave(lines_of(shared("traces", "real_logs", VLLM)),
                                       lines_of(CASES / "litellm" / LITELLM[0]))) + "\n")
    got = parse_path(f, "vllm_log", year=2025, tz="UTC")
    assert set(got.tables["engine_steps"]["source"]) == {"vllm_log"}
    assert got.tables["requests"].filter(pl.col("source") == "litellm").height == 0


# -- 3. --format X on a file without X lines ------------------------------------------------------------


def _errors(store: Path) -> pl.DataFrame:
    return fetch(Store.open(store).connect(), "select file, line, source, reason from ingest_errors")


def test_forced_format_with_no_line_of_it_is_an_error(tmp_path):
    f = tmp_path / "vllm.log"
    f.write_bytes(shared("traces", "real_logs", VLLM).read_bytes())
    got = parse_path(f, "litellm", year=2025, tz="UTC")
    assert got.errors.select("line", "source").rows() == [(None, "litellm")]
    assert got.errors["reason"][0].startswith("--format litellm: no line gave a litellm row")
    res = CliRunner().invoke(app, ["ingest", str(f), "--store", str(tmp_path / "s"), "--format", "litellm",
                                   "--tz", "UTC"])
    assert res.exit_code == 0 and "--format litellm: no line gave a litellm row" in res.stderr
    err = _errors(tmp_path / "s")
    assert err.height == 1 and err["file"][0] == str(f) and "not a litellm file?" in err["reason"][0]
    # the right format forced: no such error
    ingest([str(f)], tmp_path / "s2", fmt="vllm_log", year=2025, tz="UTC")
    assert _errors(tmp_path / "s2").height == 0


# -- 4. NUL bytes inside lines --------------------------------------------------------------------------


def test_nul_bytes_inside_lines_keep_the_row(tmp_path):
    plain = shared("traces", "real_logs", VLLM)
    lines = plain.read_bytes().decode().split("\n")
    hits = [i for i, ln in enumerate(lines) if "Avg prompt throughput" in ln or "POST /v1" in ln]
    assert len(hits) >= 3
    for i in hits:
        lines[i] = lines[i][:12] + "\x00\x00" + lines[i][12:]
    f = tmp_path / "vllm_log" / plain.name
    f.parent.mkdir()
    f.write_bytes("\n".join(lines).encode())
    got, want = parse_path(f, year=2025, tz="UTC"), parse_path(plain, year=2025, tz="UTC")
    assert rows(got.tables) == rows(want.tables)
    assert got.errors.select("line", "reason").rows() == [(i + 1, "2 NUL byte(s) removed from the line") for i in hits]
    assert got.census == want.census


def test_nul_characters_inside_wrapped_records_keep_the_row(tmp_path):
    # Docker's json-file driver writes a NUL as `\u0000`: the unwrapped record holds it, not the file
    import wrapping

    plain = shared("traces", "real_logs", VLLM)
    lines = plain.read_bytes().decode().split("\n")[:-1]
    hits = [i for i, ln in enumerate(lines) if "Avg prompt throughput" in ln]
    for i in hits:
        lines[i] = lines[i][:12] + "\x00" + lines[i][12:]
    f = tmp_path / "vllm_log" / plain.name
    f.parent.mkdir()
    f.write_bytes(wrapping.docker_json(lines, wrapping.record_times(lines, datetime(2025, 3, 1, 12, tzinfo=UTC))))
    assert b"\\u0000" in f.read_bytes()
    got, want = parse_path(f, year=2025, tz="UTC"), parse_path(plain, year=2025, tz="UTC")
    assert got.source == "docker_json" and want.tables["engine_steps"].height > 0
    assert rows(got.tables)["engine_steps"] == rows(want.tables)["engine_steps"]
    # (a record's line is its first physical line: long lines are split into several records)
    assert got.errors["reason"].to_list() == ["1 NUL byte(s) removed from the line"] * len(hits)


# -- 5. a JSON array with stray commas ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["leading", "doubled", "trailing"])
def test_json_array_with_stray_commas_keeps_every_record(tmp_path, how):
    plain = CASES / "litellm" / "slp_array.json"
    records = json.loads(plain.read_text())
    assert len(records) >= 2
    items = [json.dumps(r, indent=2) for r in records]
    text = {"leading": "[,\n" + ",\n".join(items) + "\n]",
            "doubled": "[\n" + ",\n,".join(items) + ",,\n]",
            "trailing": "[\n" + ",\n".join(items) + ",\n]"}[how]
    f = tmp_path / plain.name
    f.write_text(text)
    got, want = parse_path(f), parse_path(plain)
    assert got.source == want.source == "litellm_json"
    assert rows(got.tables) == rows(want.tables) and want.tables["requests"].height == len(records)
    if how != "trailing":  # (DuckDB's reader accepts a trailing comma by itself: nothing to note)
        assert got.errors["reason"].to_list()[0].endswith("(stray commas) ignored: every record kept")


def test_a_comma_inside_a_string_is_not_touched(tmp_path):
    records = json.loads((CASES / "litellm" / "slp_array.json").read_text())
    records[0]["messages"] = [{"role": "user", "content": "[, ,, ,]"}]
    f = tmp_path / "a.json"
    f.write_text("[," + ",".join(json.dumps(r) for r in records) + "]")
    got = parse_path(f)
    assert got.tables["requests"].height == len(records)
    assert got.errors["reason"].to_list() == ["1 empty array element(s) (stray commas) ignored: every record kept"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet='[],"\\ ab\n', max_size=8), st.integers()), min_size=1, max_size=6),
       st.lists(st.integers(0, 3), min_size=8, max_size=8), st.integers(1, 9))
def test_stray_commas_streamed_in_any_pieces(values, extra, size):
    # Stray commas before, between and after the elements; the text cut into pieces of `size` bytes (strings
    # and escapes cut anywhere): the filtered stream is the array itself, and every removed comma is counted.
    seps = [b"," * (1 + extra[i % 8]) for i in range(len(values) - 1)]
    text = b"[" + b"," * extra[0] + b"".join(
        json.dumps(v).encode() + (seps[i] if i < len(seps) else b"") for i, v in enumerate(values)
    ) + b"," * extra[1] + b"]"
    f = StrayCommas()
    out = b"".join(f(text[i:i + size] for i in range(0, len(text), size)))
    assert json.loads(out) == values
    assert f.removed == extra[0] + extra[1] + sum(len(s) - 1 for s in seps)
