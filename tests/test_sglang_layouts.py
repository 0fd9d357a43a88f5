"""SGLang lines in every layout (engine-logs.md S-0, log-wrappers.md section 12): the real SGLang log re-headed
in each layout gives the rows the plain file gives; the record time `rec_ts` of a wrapper; chunk invariance of
the layout and pool cases; the start-up lines folded into engine_config rows (`ParseResult.consumed`).

The real log is read from ../shared in place (it carries no license) and rewritten into tmp_path only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import shared
from hypothesis import given, settings
from hypothesis import strategies as st

from attribution.ingest import parse_path
from attribution.sources.base import ParseContext
from attribution.sources.sglang_log import NO_TIME, RAY_DEDUP, SOURCES

SRC = SOURCES[0]
CASES = Path(__file__).resolve().parent / "cases" / "sglang_log"
SGLANG_LOG = shared("traces", "real_logs", "sglang_repo-sostrowsk-dgx-spark-local-llm.log")
HEAD = re.compile(rb"^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)((?: [A-Z][A-Z_]*\d+)*)\] ")

# SGLang's own header re-laid out: (date, time, ranks, message) -> the same record in another layout
LAYOUTS = {
    "custom_config": lambda d, t, r, m: b"%s %s INFO 4242 [%s scheduler_metrics_mixin.py:222] %s" % (
        d, t, r.strip() or b"", m),
    "python_default": lambda d, t, r, m: b"%s %s,000 - sglang.srt.managers.scheduler - INFO - %s" % (d, t, m),
    "level_file": lambda d, t, r, m: b"[%s %s%s] INFO scheduler.py:1272: %s" % (d, t, r, m),
    "ray": lambda d, t, r, m: b"(SGLangEngine pid=4242) [%s %s%s] %s" % (d, t, r, m),
    "ray_nested_dedup": lambda d, t, r, m: b"(TaskRunner pid=1) (SGLangEngine pid=4242) [%s %s%s] %s "
    b"[repeated 3x across cluster]" % (d, t, r, m),
    "dynamo": lambda d, t, r, m: b"%sT%s.000Z  INFO sglang.srt.managers.scheduler: %s" % (d, t, m),
}


def _rewrite(src: Path, dst: Path, layout) -> int:
    """Re-head every line of `src` that starts with SGLang's dated header and holds no `\\r`; the number
    re-headed."""
    out, n = [], 0
    for line in src.read_bytes().split(b"\n"):
        m = HEAD.match(line)
        if m and b"\r" not in line:
            line = layout(m.group(1), m.group(2), m.group(3), line[m.end():])
            n += 1
        out.append(line)
    dst.write_bytes(b"\n".join(out))
    return n


@pytest.fixture(scope="module")
def plain():
    return parse_path(SGLANG_LOG, tz="UTC").tables


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_real_log_in_every_layout_gives_the_same_rows(name, plain, tmp_path):
    dst = tmp_path / "sglang.log"
    assert _rewrite(SGLANG_LOG, dst, LAYOUTS[name]) > 300
    got = parse_path(dst, "sglang_log", tz="UTC", deployment=plain["engine_steps"]["deployment"][0]).tables
    for table, want in plain.items():
        if table == "ingest_errors" or not want.height:
            continue
        drop = [c for c in ("file", "source_file") if c in want.columns]
        a, b = want.drop(drop), got[table].drop(drop)
        if table == "ingest_line_shapes":  # a shape is the whole line, prefix included: compare the classes
            a, b = (df.group_by("class").agg(pl.col("lines").sum()).sort("class") for df in (a, b))
        assert a.equals(b), f"{name}: {table} differs"
    assert got["engine_steps"].height == 113
    errors = got["ingest_errors"]
    if name == "ray_nested_dedup":  # one note for the file, at its first collapsed line
        assert errors["reason"].to_list() == [RAY_DEDUP.format(n=3)]
    elif name == "dynamo":
        assert errors.height == 1 and errors["reason"][0].startswith("Dynamo re-layout")
    else:
        assert errors.height == 0


DECODE = "Decode batch. #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0"


def _ctx(tz: str = "UTC", mtime: float | None = None) -> ParseContext:
    mtime = mtime if mtime is not None else datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    return ParseContext("x.log", "d", None, None, tz, mtime, {}, {})


def _lines(texts: list[str], rec: list[datetime | None] | None = None) -> pl.DataFrame:
    df = pl.DataFrame({"line": list(range(1, len(texts) + 1)), "text": texts},
                      schema={"line": pl.Int64, "text": pl.Utf8})
    if rec is not None:
        df = df.with_columns(pl.Series("rec_ts", rec, dtype=pl.Datetime("us", "UTC")))
    return df


def _ts(res) -> list[datetime]:
    return res.tables["engine_steps"]["ts"].to_list()


def test_short_header_takes_its_date_from_the_record_time():
    texts = [f"[09:00:00 TP0] {DECODE}", f"[23:59:59 TP0] {DECODE}", f"[00:00:02 TP0] {DECODE}"]
    rec = [datetime(2024, 9, 10, 9, 0, 1, tzinfo=UTC), datetime(2024, 9, 11, 0, 0, 1, tzinfo=UTC),
           datetime(2024, 9, 10, 23, 59, 58, tzinfo=UTC)]
    # the record's date; around midnight the day whose time is nearest the record's (not the mtime's 2030)
    assert _ts(SRC.parse(_lines(texts, rec), _ctx())) == [
        datetime(2024, 9, 10, 9, 0, 0, tzinfo=UTC),
        datetime(2024, 9, 10, 23, 59, 59, tzinfo=UTC),
        datetime(2024, 9, 11, 0, 0, 2, tzinfo=UTC),
    ]
    # local time in --tz: 10:00 in Berlin (summer) is 08:00 UTC, the record 08:00:01 UTC
    berlin = SRC.parse(_lines([f"[10:00:00 TP0] {DECODE}"], [datetime(2024, 9, 10, 8, 0, 1, tzinfo=UTC)]),
                       _ctx("Europe/Berlin"))
    assert _ts(berlin) == [datetime(2024, 9, 10, 8, 0, 0, tzinfo=UTC)]


def test_a_line_without_its_own_time_takes_the_record_time_and_a_dated_line_keeps_its_own():
    rec = [datetime(2024, 7, 10, 10, 0, 0, tzinfo=UTC), datetime(2024, 7, 10, 10, 0, 7, tzinfo=UTC), None]
    texts = [f"[gpu=0] {DECODE}", f"[2024-07-10 09:00:00] {DECODE}", f"[gpu=0] {DECODE}"]
    res = SRC.parse(_lines(texts, rec), _ctx())
    # line 3 has no record time: the last time seen (line 2's own)
    assert _ts(res) == [datetime(2024, 7, 10, 10, 0, 0, tzinfo=UTC), datetime(2024, 7, 10, 9, 0, 0, tzinfo=UTC),
                        datetime(2024, 7, 10, 9, 0, 0, tzinfo=UTC)]
    assert res.errors is None or res.errors.height == 0
    # no record time and nothing before: an error naming the missing time, the rest of the chunk kept
    res = SRC.parse(_lines([f"[gpu=0] {DECODE}", f"[2024-07-10 09:00:00] {DECODE}"]), _ctx())
    assert res.errors.to_dicts()[0]["reason"] == NO_TIME and res.errors["line"].to_list() == [1]
    assert res.tables["engine_steps"]["line"].to_list() == [2]


@pytest.mark.parametrize("case", ["short_header_rollover", "v046_dp_decode_accept_len", "layout_gpu_old",
                                  "layout_dynamo", "startup_swa_draft", "log_requests_v043_v053"])
def test_a_null_record_time_changes_nothing(case):
    texts = (CASES / f"{case}.log").read_text().rstrip("\n").split("\n")
    mtime = datetime(2025, 11, 1, tzinfo=UTC).timestamp()
    a = SRC.parse(_lines(texts), _ctx(mtime=mtime))
    b = SRC.parse(_lines(texts, [None] * len(texts)), _ctx(mtime=mtime))
    assert a.tables.keys() == b.tables.keys()
    for t in a.tables:
        assert a.tables[t].equals(b.tables[t]), t
    assert (a.errors is None) == (b.errors is None) and (a.errors is None or a.errors.equals(b.errors))


@pytest.mark.parametrize("case", ["layout_custom_config", "layout_ray", "layout_dynamo", "layout_gpu_old",
                                  "startup_swa_draft", "startup_kv_variants"])
def test_chunked_read_gives_the_same_rows(case):
    path = CASES / f"{case}.log"
    whole = parse_path(path, "sglang_log", tz="UTC").tables
    small = parse_path(path, "sglang_log", tz="UTC", chunk_bytes=200).tables
    for table, df in whole.items():
        keys = [c for c in ("line", "start_line", "kind", "reason") if c in df.columns]
        assert df.sort(keys).equals(small[table].sort(keys)), f"{case}: {table}"


def test_startup_lines_folded_into_engine_config_are_consumed():
    raw = SGLANG_LOG.read_bytes().decode("utf-8", "replace").split("\n")
    if raw[-1] == "":
        raw.pop()
    res = SRC.parse(_lines(raw), _ctx())
    rows = set(res.tables["engine_config"]["line"].to_list())
    # independently: every KV / pool-end / sliding-window line of the start that is not a row
    want = {i for i, ln in enumerate(raw, 1)
            if re.search(r"\] (?:KV Cache is allocated|Memory pool end|Use sliding window memory pool"
                         r"|SWAKVPool mem usage)", ln)} - rows
    assert len(want) == 6  # SWA pool, draft pool, 2 pool ends, the hint, the SWAKVPool summary
    assert set(res.consumed.to_list()) == want
    assert not rows & set(res.consumed.to_list())


def test_real_log_lines_are_rows_folded_skipped_or_few_unknown():
    raw = SGLANG_LOG.read_bytes().decode("utf-8", "replace").split("\n")
    if raw[-1] == "":
        raw.pop()
    res = SRC.parse(_lines(raw), _ctx())
    used = set(res.consumed.to_list())
    for df in res.tables.values():
        used |= set(df["line"].to_list())
    rules = [re.compile(rx) for _, rx in SRC.skip_rules]
    unknown = [ln for i, ln in enumerate(raw, 1) if i not in used and not any(r.search(ln) for r in rules)]
    skipped = len(raw) - len(used) - len(unknown)
    # 221 lines give rows or fold into them, 175 are known noise (weight loading, progress bars, warnings,
    # start-up notices, ...: sources/skip_rules.toml); the one left is the user's own `START hh:mm:ss` echo
    assert (len(used), skipped, len(unknown)) == (221, 175, 1)
    # what stays unknown is informational prose, never an engine message that a table holds
    assert not any(re.search(r"batch[.,]|KV Cache|max_total_num_tokens|Receive:|Finish:|HTTP/", ln) for ln in unknown)


@pytest.mark.parametrize("case", ["layout_custom_config", "layout_ray", "layout_dynamo", "layout_gpu_old"])
def test_every_layout_is_sniffed_as_sglang(case):
    assert parse_path(CASES / f"{case}.log").source == "sglang_log"

_PREFIXES = ["", "[2025-01-01 00:00:00] ", "[2025-01-01 00:00:00 DP1 TP0] ", "[12:00:00 TP0] ", "[gpu=0] ",
             "2025-10-20 03:02:22 INFO 1 [DP3 TP3 EP3 x.py:1] ", "2025-04-27T06:45:57.810Z  INFO a.b: ",
             "(SGLangEngine pid=1) ", "(A(b=1) pid=2, ip=::1) [2025-01-01 00:00:01] ", "[2026-01-01 00:00:00] INFO x.py:1: ",
             "2025-13-40 99:99:99 INFO 1 [x.py:1] "]
_BODIES = [DECODE, "Prefill batch, #new-seq: 1, #new-token: 5, #cached-token: 0, token usage: 0.00, #running-req: 0, "
           "#queue-req: 0, ", "KV Cache is allocated. #tokens: 10, K size: 0.01 GB, V size: 0.01 GB",
           "Memory pool end. avail mem=1.00 GB", "max_total_num_tokens=10, max_running_requests=2, context_len=8",
           "Use sliding window memory pool. full_layer_tokens=10, swa_layer_tokens=8", "Decode batch. #running-req: x"]
_SUFFIXES = ["", " [repeated 7x across cluster]", "\r", "\x1b[0m"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_BODIES), st.sampled_from(_SUFFIXES),
                          st.integers(0, 40)), min_size=1, max_size=12),
       st.booleans())
def test_fuzz_layouts_never_crash_and_every_row_points_at_a_line(parts, with_rec):
    texts = [(p + b + s)[: len(p + b + s) - cut] for p, b, s, cut in parts]
    rec = [datetime(2025, 1, 1, tzinfo=UTC) if i % 2 else None for i in range(len(texts))] if with_rec else None
    res = SRC.parse(_lines(texts, rec), _ctx())
    lines = set(range(1, len(texts) + 1))
    for df in res.tables.values():
        assert set(df["line"].to_list()) <= lines
    if res.errors is not None:
        assert set(res.errors["line"].to_list()) <= lines
    if res.consumed is not None:
        assert set(res.consumed.to_list()) <= lines
