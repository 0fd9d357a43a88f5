"""The line census: every input line (record, for JSON documents) is counted once as parsed, skipped or
unrecognised, through `parse_path` and through a real ingest (in chunks, resumed, an unterminated tail read
again); unknown messages show up in `ingest_line_shapes` with their counts; samples never carry a prompt or a
key; `attribution ingest` and `attribution status` show the coverage."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import UTF8, shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cases import _RESERVED, _cases
from typer.testing import CliRunner

from attribution import census, formats, reader, sources
from attribution.cli import app
from attribution.db import fetch
from attribution.ingest import ingest, parse_path
from attribution.sources.base import skip_rules
from attribution.store import Store

REAL = sorted(shared("traces", "real_logs").glob("*.log")) + sorted(shared("traces", "vllm_server_logs").glob("*.txt"))
TRACES = sorted(shared("traces", "azure_llm_2023").glob("*.csv")) + sorted(shared("traces", "mooncake").glob("*.jsonl"))
# What stays unrecognised in the real logs (see the census report): messages the parsers do not read yet and
# a shell script's echo. The engine parsers may learn more of them; nothing else may appear.
REAL_UNKNOWN_OK = ("SpecDecoding metrics:", "START ", "cache_config_info with initialization",
                   "SWAKVPool mem usage")
MADE_UP = "(APIServer pid=7) INFO 05-07 20:49:{s:02d} [frobnicator.py:42] Frobnicated {n} widgets in {t} s"
MADE_UP_SHAPE = "(APIServer pid=<n>) INFO <n>-<n> <n>:<n>:<n> [frobnicator.py:<n>] Frobnicated <n> widgets in <n> s"


def physical_lines(path: Path) -> int:
    data = b"".join(reader.Pieces(path))
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def records(path: Path, fmt: str) -> int:
    """Records of a whole-file input, counted here without the source's code."""
    text = b"".join(reader.Pieces(path)).decode().lstrip("\ufeff").strip()
    if fmt == "litellm_spendlogs":
        return len(list(csv.reader(io.StringIO(text))))  # the header and one record per row
    if fmt == "prometheus_api":  # one record per series: `data.result` of the API, promtool's bare array
        doc = json.loads(text)
        return len(doc["data"]["result"] if isinstance(doc, dict) else doc)
    if fmt == "litellm_json":
        doc = json.loads(text)
        return len(doc) if isinstance(doc, list) else 1
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    one_line_docs = lines[0].startswith("{") and lines[0].endswith("}")
    return len(lines) if one_line_docs else 1


def expected_count(path: Path, fmt: str) -> int:
    return records(path, fmt) if formats.get(fmt).mode == "whole" else physical_lines(path)


def _shapes(store: Path) -> pl.DataFrame:
    return fetch(Store.open(store).connect(), "select * from ingest_line_shapes")


def _files(store: Path) -> pl.DataFrame:
    return fetch(Store.open(store).connect(), "select * from ingest_files where not rotated order by file")


@pytest.mark.parametrize("inp,expected", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_case_file_is_counted_line_by_line(inp: Path, expected: Path):
    case = json.loads(expected.read_text())
    opts = case.get("options", {})
    kw = dict(year=opts.get("year"), tz=opts.get("tz", "UTC"),
              options={k: v for k, v in opts.items() if k not in _RESERVED})
    whole = parse_path(inp, case.get("format"), **kw)
    pieces = parse_path(inp, case.get("format"), chunk_bytes=300, **kw)
    assert sum(whole.census.values()) == expected_count(inp, whole.source)
    assert pieces.census == whole.census
    shapes = whole.tables["ingest_line_shapes"]
    assert set(shapes["class"]) <= set(census.CLASSES)
    assert shapes.filter(pl.col("class") == "skipped")["reason"].null_count() == 0
    if any(df.height for t, df in whole.tables.items() if t not in ("ingest_errors", "ingest_line_shapes")):
        assert whole.census["parsed"] > 0


@pytest.mark.parametrize("path", REAL + TRACES, ids=lambda p: p.name)
def test_every_real_log_and_trace_is_counted_and_known(path: Path):
    parsed = parse_path(path, tz="UTC", year=2026)
    assert sum(parsed.census.values()) == physical_lines(path)
    unknown = parsed.tables["ingest_line_shapes"].filter(pl.col("class") == "unrecognised")
    for shape in unknown["shape"]:
        assert any(ok in shape for ok in REAL_UNKNOWN_OK), shape
    if formats.get(parsed.source).kind == "engine":
        assert parsed.census["skipped"] > 0  # banners, routes, weights, compilation: named reasons


def test_sample_logs_through_a_real_ingest(sample_store):
    # The session's shared sample store (one ingest for the whole suite); chunk boundaries are covered by
    # test_in_chunks_resumed_and_with_an_unterminated_tail_every_line_counts_once.
    files = _files(sample_store).filter(pl.col("status") == "read")
    assert files.height >= 5
    per_file = _shapes(sample_store).group_by("file").agg(pl.col("lines").sum().alias("shape_lines"))
    for f in files.join(per_file, on="file").iter_rows(named=True):
        assert f["lines"] == expected_count(Path(f["file"]), f["format"]), f["file"]
        assert f["lines"] == f["lines_parsed"] + f["lines_skipped"] + f["lines_unrecognised"] == f["shape_lines"]
        assert f["lines_parsed"] > 0


def _census_of(store: Path) -> tuple[dict, pl.DataFrame]:
    f = _files(store).row(0, named=True)
    counts = {k: f[k] for k in ("lines", "lines_parsed", "lines_skipped", "lines_unrecognised")}
    shapes = _shapes(store).drop("file").sort("class", "reason", "shape", nulls_last=True)
    return counts, shapes


def test_in_chunks_resumed_and_with_an_unterminated_tail_every_line_counts_once(tmp_path):
    real = shared("traces", "vllm_server_logs", "01_2026_05_09_vllm_log_dump.txt").read_bytes().split(b"\n")
    # every 150th line an engine message nobody knows, so that unrecognised lines cross the chunk cuts too
    data = b"\n".join(ln + (b"\n(APIServer pid=1) INFO 05-07 20:50:03 [x.py:1] Mystery gauge: %d" % i if i % 150 == 0 else b"")
                      for i, ln in enumerate(real))
    log = tmp_path / "pod" / "vllm.log"
    log.parent.mkdir()
    log.write_bytes(data)
    ingest([str(log)], tmp_path / "once", tz="UTC", year=2026)
    want_counts, want_shapes = _census_of(tmp_path / "once")
    assert want_counts["lines"] == physical_lines(log) and want_counts["lines_unrecognised"] > 0
    # The same file arriving in three pieces, each cut inside a line: read as it grows, in small chunks.
    cuts = [len(data) // 3 + 17, 2 * len(data) // 3 + 5, len(data)]
    assert all(data[c - 1:c] != b"\n" for c in cuts[:2])
    for cut in cuts:
        log.write_bytes(data[:cut])
        ingest([str(log)], tmp_path / "grown", tz="UTC", year=2026, chunk_bytes=16 << 10)
        counts, _ = _census_of(tmp_path / "grown")
        assert counts["lines"] == physical_lines(log)  # the unterminated tail is counted once, then re-read
    counts, shapes = _census_of(tmp_path / "grown")
    assert counts == want_counts
    assert shapes.drop("sample").equals(want_shapes.drop("sample"))
    # Read again with nothing new: unchanged, nothing counted twice.
    ingest([str(log)], tmp_path / "grown", tz="UTC", year=2026)
    assert _census_of(tmp_path / "grown")[0] == want_counts


def test_a_whole_file_read_again_replaces_its_census(tmp_path):
    src = next(p for p, _ in _cases() if p.parent.name == "litellm" and p.name == "spendlogs.csv")
    doc = tmp_path / "spend.csv"
    shutil.copy(src, doc)
    ingest([str(doc)], tmp_path / "s", tz="UTC")
    first = _census_of(tmp_path / "s")[0]
    st = doc.stat()
    os.utime(doc, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: the whole file is read again
    ingest([str(doc)], tmp_path / "s", tz="UTC")
    assert _census_of(tmp_path / "s")[0] == first == {
        "lines": records(src, "litellm_spendlogs"), "lines_parsed": first["lines_parsed"],
        "lines_skipped": 1, "lines_unrecognised": 0}


def test_an_injected_unknown_message_shows_up_with_its_count(tmp_path):
    # bytes, not text: read_text() would turn the progress bars' bare `\r` into line breaks
    lines = shared("traces", "real_logs", "vllm_repo-NnamdiOdozi-mlops-assignment.log").read_bytes().decode().split("\n")
    at = [40, 41, 300, 650, 651, 652, 900]
    for i in reversed(at):
        k = at.index(i)
        lines.insert(i, MADE_UP.format(s=k, n=10 ** k, t=f"{k}.{k}5"))
    log = tmp_path / "engine" / "vllm.log"
    log.parent.mkdir()
    log.write_bytes("\n".join(lines).encode())
    plain = parse_path(shared("traces", "real_logs", "vllm_repo-NnamdiOdozi-mlops-assignment.log"), tz="UTC")
    ingest([str(log)], tmp_path / "s", tz="UTC", year=2026, chunk_bytes=8 << 10)
    shapes = _shapes(tmp_path / "s")
    row = shapes.filter(pl.col("shape") == MADE_UP_SHAPE).row(0, named=True)
    assert (row["class"], row["lines"], row["first_line"]) == ("unrecognised", 7, at[0] + 1)
    assert "Frobnicated 1 widgets" in row["sample"]
    f = _files(tmp_path / "s").row(0, named=True)
    assert f["lines_unrecognised"] == plain.census["unrecognised"] + 7
    assert f["lines_parsed"] == plain.census["parsed"]


def _classes(text: str, fmt: str = "vllm_log", tmp: Path | None = None) -> dict[int, tuple[str, str | None]]:
    path = tmp / "case.log"
    path.write_text(text)
    shapes = parse_path(path, fmt, tz="UTC", year=2026).tables["ingest_line_shapes"]
    assert shapes["lines"].sum() == physical_lines(path)
    return {r["first_line"]: (r["class"], r["reason"]) for r in shapes.iter_rows(named=True)}


def test_classes_of_hand_picked_lines(tmp_path):
    # Stats line verbatim from formats/engine-logs.md; the others constructed in the documented layouts.
    text = "\n".join([
        "(APIServer pid=1) INFO 12-11 20:30:06 [loggers.py:236] Engine 000: Avg prompt throughput: 105.8 tokens/s, "
        "Avg generation throughput: 158.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%, "
        "Prefix cache hit rate: 68.2%",
        "",
        "(APIServer pid=1) INFO 12-11 20:30:07 [launcher.py:46] Route: /v1/chat/completions, Methods: POST",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/asyncio/runners.py", line 118, in run',
        "(EngineCore pid=2) Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.1s/it]",
        "(EngineCore pid=2) INFO 12-11 20:29:01 [default_loader.py:291] Loading weights took 3.21 seconds",
        "(APIServer pid=1) WARNING 12-11 20:30:08 [envs.py:1] Unknown vLLM environment variable detected: VLLM_X",
        "(APIServer pid=1) INFO 12-11 20:30:09 [loggers.py:236] Engine 000: Avg prompt throughput: fast tokens/s, "
        "Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%",
        "(APIServer pid=1) INFO 12-11 20:30:10 [frobnicator.py:42] Frobnicated 3 widgets",
    ])
    got = _classes(text, tmp=tmp_path)
    assert got[1] == ("parsed", None)
    assert got[2] == ("skipped", "blank line")
    assert got[3] == ("skipped", "API route listing")
    assert got[4] == got[5] == ("skipped", "traceback")
    assert got[6] == ("skipped", "progress bar")
    assert got[7] == ("skipped", "startup: weight loading")
    assert got[8][0] == "skipped" and got[8][1] in ("warning", "startup: platform, kernels and backends")
    assert got[9][0] == "skipped" and got[9][1].startswith("malformed: ")
    assert got[10] == ("unrecognised", None)


def test_samples_and_shapes_never_carry_a_prompt_or_a_key(tmp_path):
    key, prompt = "sk-PLANTEDKEY0123456789", "PLANTED PROMPT the quick brown fox"
    log = tmp_path / "pod" / "vllm.log"
    log.parent.mkdir()
    log.write_text("\n".join([
        "(APIServer pid=1) INFO 05-07 20:40:00 [logger.py:39] Received request: prompt: "
        f"'{prompt}', prompt_token_ids: [987654321, 11]",
        f"(APIServer pid=1) INFO 05-07 20:40:01 [logger.py:49] Generated response x: output: \"{prompt} it's\", "
        "output_token_ids: [987654321], finish_reason: stop",
        f"(APIServer pid=1) INFO 05-07 20:40:02 [frob.py:1] calling upstream with api_key={key} Bearer {key}",
        f"(APIServer pid=1) INFO 05-07 20:40:03 [frob.py:2] echo: '{prompt} (cut here",
        f'{{"messages": [{{"role": "user", "content": "{prompt}"}}], "api_key": "{key}"}}',
    ]) + "\n")
    ingest([str(log)], tmp_path / "s", tz="UTC", year=2026, fmt="vllm_log")
    shapes = _shapes(tmp_path / "s")
    assert shapes.filter(pl.col("class") != "parsed").height >= 4
    text = " ".join(str(v) for c in ("shape", "sample", "reason") for v in shapes[c].to_list())
    for needle in (key, "PLANTEDKEY", "PLANTED PROMPT", "987654321", "quick brown"):
        assert needle not in text
    assert "api_key=<secret>" in text and " sha256:" in text  # keys go (a Bearer one as in ingest_errors)


def test_shapes_are_bounded_per_chunk_and_still_add_up(tmp_path):
    words = [f"line {''.join(chr(97 + (i // 26 ** k) % 26) for k in range(3))} here" for i in range(3000)]
    path = tmp_path / "garbage.log"
    path.write_text("\n".join(words) + "\n")
    shapes = parse_path(path, "vllm_log", tz="UTC").tables["ingest_line_shapes"]
    assert shapes["lines"].sum() == 3000 and shapes["class"].unique().to_list() == ["unrecognised"]
    assert census.SHAPES_MAX < shapes.height <= census.SHAPES_MAX + 1
    other = shapes.filter(pl.col("shape") == census.OTHER)
    assert other["lines"].item() == 3000 - census.SHAPES_MAX


def test_shape_masks_numbers_ids_and_strings():
    assert census.shape("INFO 05-07 20:49:53 [x.py:12] req 3f2a9c1e-0b1d-4c2e-9f00-1234567890ab from "
                        "10.0.0.5:8000 id=cmpl-a269fdcb7c6ce890 0x7ffe text='hi there' n=1.5e3") == (
        "INFO <n>-<n> <n>:<n>:<n> [x.py:<n>] req <uuid> from <ip> id=cmpl-<hex> <hex> text=<str> n=<n>")
    assert census.shape('{"model": "m", "messages": [1, 2, 3]}') == '{"model": <str>, "messages": [<ids>]}'
    assert census.shape("vLLM's banner: don't") == "vLLM's banner: don't"


def test_skip_rules_are_valid_and_name_known_sources():
    rules = skip_rules()
    assert set(rules) - {""} <= set(sources.registry()) | {"common"}
    for name, pairs in rules.items():
        for reason, rx in pairs:
            assert reason and rx
            pl.select(pl.lit("x").str.contains(rx))  # compiles in Polars' (Rust) regex engine
        assert formats.get(name).skip_rules == pairs if name else True


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_ingest_and_status_show_coverage_and_unknown_shapes(tmp_path):
    d = tmp_path / "logs"
    (d / "engine").mkdir(parents=True)
    lines = shared("traces", "real_logs", "vllm_repo-jayashan10-Deepseek-qwen-deployment.log").read_text().split("\n")
    lines[5:5] = [MADE_UP.format(s=i, n=i, t=i) for i in range(3)]
    (d / "engine" / "vllm.log").write_text("\n".join(lines))
    (d / "quiet.log").write_text("INFO 05-07 20:49:53 [x.py:1] nothing we read\nINFO 05-07 20:49:54 [x.py:1] again\n")
    store = str(tmp_path / "s")
    code, _, err = _cli("ingest", str(d / "engine"), "--store", store, "--tz", "UTC", "--year", "2026")
    assert code == 0
    assert "3 unrecognised lines in 1 engine log" in err and MADE_UP_SHAPE in err
    # sniffed as a vLLM log (its layout), but no line of it gives a row: flagged, not silent
    code, _, err = _cli("ingest", str(d / "quiet.log"), "--store", store, "--tz", "UTC")
    assert code == 0 and "no rows" in err and "quiet.log: 2 lines" in err
    code, out, _ = _cli("status", "--store", store, "--format", "json")
    st = json.loads(out)
    cov = {Path(c["file"]).name: c for c in st["coverage"]}
    n = physical_lines(d / "engine" / "vllm.log")
    assert cov["vllm.log"]["lines"] == n and cov["vllm.log"]["unrecognised"] == 3
    assert cov["vllm.log"]["parsed"] + cov["vllm.log"]["skipped"] + 3 == n
    assert cov["quiet.log"]["flag"] == "no rows from its lines" and st["silent_files"] == [str(d / "quiet.log")]
    assert {s["shape"]: s["lines"] for s in st["unrecognised_shapes"]}[MADE_UP_SHAPE] == 3
    assert st["lines"]["unrecognised"] == 5
    code, out, _ = _cli("status", "--store", store)
    assert code == 0 and "line coverage per file" in out and "[frobnicator.py:<n>]" in out


CASE_LINES = {fmt: [ln for p, _ in _cases() if p.parent.name == fmt for ln in p.read_text().split("\n") if ln]
              for fmt in ("vllm_log", "sglang_log")}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(sorted(CASE_LINES)), chunk=st.integers(64, 4096))
def test_mutated_and_cut_lines_are_each_counted_once(tmp_path, data, fmt, chunk):
    """Case lines shuffled, cut, glued, blanked or garbled, read in random chunk sizes: never a crash, and
    the census always adds up to the physical lines."""
    pool = CASE_LINES[fmt]
    picked = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=40))
    ops = data.draw(st.lists(st.sampled_from(["keep", "cut", "glue", "blank", "garble", "quote"]),
                             min_size=len(picked), max_size=len(picked)))
    out = []
    for line, op in zip(picked, ops, strict=True):
        if op == "cut":
            line = line[: data.draw(st.integers(0, len(line)))]
        elif op == "glue":
            line += data.draw(st.sampled_from(pool))
        elif op == "blank":
            line = " " * data.draw(st.integers(0, 3))
        elif op == "garble":
            line = data.draw(st.text(UTF8, min_size=0, max_size=60).filter(lambda t: "\n" not in t and "\r" not in t))
        elif op == "quote":
            line += " prompt: 'x"
        out.append(line)
    path = tmp_path / f"fuzz-{chunk}.log"
    path.write_text("\n".join(out) + data.draw(st.sampled_from(["", "\n"])))
    parsed = parse_path(path, fmt, tz="UTC", year=2026, chunk_bytes=chunk)
    assert sum(parsed.census.values()) == physical_lines(path)


def test_an_over_long_line_is_counted_as_malformed(tmp_path):
    log = tmp_path / "pod" / "vllm.log"
    log.parent.mkdir()
    stats = ("INFO 06-16 10:03:14 [loggers.py:87] Engine 000: Avg prompt throughput: 1254.4 tokens/s, Avg generation "
             "throughput: 29.2 tokens/s, Running: 10 reqs, Waiting: 4 reqs, GPU KV cache usage: 57.9%, Prefix cache "
             "hit rate: 40.5%")  # verbatim, formats/engine-logs.md
    log.write_text("\n".join([stats, "x" * 3_000_000, stats.replace("10:03:14", "10:03:24"), ""]))
    ingest([str(log)], tmp_path / "s", tz="UTC", year=2026, max_line_bytes=1_000_000, chunk_bytes=100_000)
    f = _files(tmp_path / "s").row(0, named=True)
    assert (f["lines"], f["lines_parsed"], f["lines_skipped"], f["lines_unrecognised"]) == (3, 2, 1, 0)
    row = _shapes(tmp_path / "s").filter(pl.col("class") == "skipped").row(0, named=True)
    assert row["first_line"] == 2 and row["reason"].startswith("malformed: line of <n> bytes is longer")


def test_records_of_a_wrapped_file_are_counted_by_their_spans():
    """A wrapper (attribution.wrappers) reports records: a record spans the physical lines it was made of."""
    result = sources.ParseResult()
    result.add("engine_steps", pl.DataFrame({"line": [1]}))
    result.add_consumed(pl.Series([6]))
    result.records = pl.DataFrame({
        "line": [1, 3, 4, 6], "span": [2, 1, 3, 1],
        "text": ["a stats line", "", "a made-up message 12", "a folded line"],
        "source": ["vllm_log", "vllm_log", None, "vllm_log"]})
    shapes = census.of_result(result, "docker_json", pl.DataFrame({"line": [1], "text": ["raw"]}), [], None)
    assert census.totals(shapes) == {"parsed": 3, "skipped": 1, "unrecognised": 3}
    unknown = shapes.filter(pl.col("class") == "unrecognised").row(0, named=True)
    assert (unknown["shape"], unknown["first_line"], unknown["source"]) == ("a made-up message <n>", 4, None)
