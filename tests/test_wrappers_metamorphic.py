"""Metamorphic and fuzz tests of the wrapper layer: an engine log wrapped by any wrapper (tests/wrapping.py, and
tests/wrapping_platforms.py when present) gives the same rows as the plain log, apart from provenance (file,
line, start_line, and deployment where the wrapper names one), through `parse_path` and through a real ingest.

The unmarked tests are a representative subset (every wrapper, every case file once, two real logs); the
exhaustive product is marked slow.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
import wrapping
from conftest import SHARED, UTF8, across_workers, session_root, shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wrappers import layer_records

from attribution import formats, reader
from attribution.db import fetch
from attribution.errors import InputError
from attribution.ingest import ingest, parse_path
from attribution.store import Store

CASES = Path(__file__).resolve().parent / "cases"
START = datetime(2025, 3, 1, 12, tzinfo=UTC)
PROVENANCE = {"file", "line", "start_line"}

WRAP = dict(wrapping.WRAP)
NAMES_DEPLOYMENT = set(wrapping.NAMES_DEPLOYMENT)
try:  # the platform wrappers' helpers (another branch), same convention
    import wrapping_platforms

    WRAP.update(wrapping_platforms.WRAP)
    NAMES_DEPLOYMENT |= set(wrapping_platforms.WRAP)  # their labels may name pods: compare without deployment
except ImportError:
    pass


def _line_cases() -> list[tuple[Path, dict]]:
    """Case files of line formats whose forced format is also what the plain file sniffs as (the wrapped file's
    inner format is sniffed too: a case that needs --format to be read says nothing about the wrapper)."""
    out = []
    for exp in sorted(CASES.glob("*/*.expected.json")):
        case = json.loads(exp.read_text())
        stem = exp.name[: -len(".expected.json")]
        plain = next(p for p in exp.parent.iterdir() if p.name.startswith(stem + ".") and p != exp)
        src = formats.sniff(plain.read_bytes()[:65536].decode("utf-8", "replace"), str(plain))
        if src is None or src.mode != "lines" or src.name != case.get("format", src.name):
            continue
        out.append((plain, case.get("options", {})))
    return out


def _real_logs() -> list[Path]:
    return sorted(SHARED.glob("traces/real_logs/*.log")) + sorted(SHARED.glob("traces/vllm_server_logs/*.txt"))


LINE_CASES = _line_cases()
REAL = _real_logs()


def plain_lines(path: Path) -> list[str]:
    lines = path.read_bytes().decode("utf-8", "replace").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def wrap_file(plain: Path, name: str, root: Path, year: int = START.year) -> Path:
    # Same file and folder names as the plain file: path hints (sniffers, the deployment) stay the same.
    dest = root / name / plain.parent.name / plain.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = plain_lines(plain)
    # Each record at the time its engine line was written, as a runtime records it: the vLLM year the header
    # does not print then comes from the record, and lines without a time of their own take the record's.
    dest.write_bytes(WRAP[name](lines, wrapping.record_times(lines, START.replace(year=year))))
    return dest


def comparable(tables: dict[str, pl.DataFrame], name: str, also: set[str] = frozenset()) -> dict[str, list[str]]:
    drop = PROVENANCE | also | ({"deployment"} if name in NAMES_DEPLOYMENT else set())
    out = {}
    for t, df in tables.items():
        if t == "ingest_line_shapes":  # physical lines differ (split records); the census has its own tests below
            continue
        d = drop | ({"source"} if t == "ingest_errors" else set())  # errors name the wrapper that read the file
        out[t] = sorted(repr(r) for r in df.select([c for c in df.columns if c not in d]).rows())
    return out


# Cases with lines that have no time of their own: the plain file dates them from the file's mtime or not at all,
# the wrapped file from its record times (by design: log-wrappers.md §1.3). Their rows are compared without
# the time columns; the record-time rule itself is tested in test_sglang_layouts / test_vllm_layouts.
RECORD_TIMED = {"layout_gpu_old.log", "v03_short_header_cache_hit.log", "uvicorn_access.log"}
TIME_COLUMNS = {"ts", "arrival", "first_token", "finished"}


@functools.cache
def _plain_parse(plain: Path, year: int, tz: str):
    """The plain file's rows, parsed once per session however many wrappers are compared with it."""
    return parse_path(plain, year=year, tz=tz)


def check_parse(plain: Path, name: str, opts: dict, chunk_bytes: int) -> None:
    year, tz = opts.get("year", 2025), opts.get("tz", "UTC")
    want = _plain_parse(plain, year, tz)
    with tempfile.TemporaryDirectory() as tmp:
        got = parse_path(wrap_file(plain, name, Path(tmp), year), year=year, tz=tz, chunk_bytes=chunk_bytes)
    drop = TIME_COLUMNS if plain.name in RECORD_TIMED else set()
    a, b = comparable(want.tables, name, drop), comparable(got.tables, name, drop)
    assert sum(map(len, a.values())) > 0
    for t in a:
        if drop and t != "ingest_errors":
            # a line without a time of its own may give a row only once the record gives it a time
            missing = Counter(a[t]) - Counter(b[t])
            assert not missing, f"{plain.name} wrapped by {name}: {t} lost rows"
        elif drop:
            assert not Counter(b[t]) - Counter(a[t]), f"{plain.name} wrapped by {name}: new errors"
        else:
            assert a[t] == b[t], f"{plain.name} wrapped by {name}: {t} differs"


@pytest.mark.parametrize("i", range(len(LINE_CASES)), ids=[f"{p.parent.name}/{p.name}" for p, _ in LINE_CASES])
def test_every_case_file_wrapped(i):
    plain, opts = LINE_CASES[i]
    names = sorted(WRAP)
    check_parse(plain, names[i % len(names)], opts, chunk_bytes=700)


# Each wrapper reads one of two real logs (a vLLM and an SGLang one, in turn) in small chunks; every wrapper
# reads every real log in test_every_real_log_every_wrapper_into_a_store.
REAL_PAIR = ("vllm_repo-2215860382-VedioSifter.log", "sglang_repo-sostrowsk-dgx-spark-local-llm.log")


@pytest.mark.parametrize("i,name", list(enumerate(sorted(WRAP))),
                         ids=[f"{REAL_PAIR[i % 2].split('-')[0]}-{n}" for i, n in enumerate(sorted(WRAP))])
def test_real_logs_wrapped(i, name):
    check_parse(shared("traces", "real_logs", REAL_PAIR[i % 2]), name, {}, chunk_bytes=4096)


# Pairs that once failed (issue 14's known gaps), one per cause, in the unmarked suite: a JSON line behind a
# time and a stream name read as journald's `host ident:` (the ident now holds no quote or brace); two text
# layouts tied on the head, the first one's unwrapped text unknown (the next one is tried); a few uvicorn
# `INFO:` lines taken for journald's idents; an engine's own 6-digit time taken for compose's 9-digit one.
ONCE_GAPS = [("cloudwatch_tail", "litellm/slp_epoch_floats.jsonl"), ("loki_logcli", "mooncake_trace/start_option.jsonl"),
             ("docker_t", "sglang_metrics/synthetic_keys_v059_v0523.jsonl"),
             ("cloudwatch_tail", "vllm_log/uvicorn_access.log"), ("compose", "vllm_log/dynamo.log")]


@pytest.mark.parametrize("name,case", ONCE_GAPS, ids=[f"{n}-{c}" for n, c in ONCE_GAPS])
def test_once_known_gaps(name, case):
    plain = CASES / case
    check_parse(plain, name, dict((str(p), o) for p, o in LINE_CASES).get(str(plain), {}), chunk_bytes=900)


# Wrappers per case file: each case file under WRAPPERS_PER_CASE wrappers spread over the list (every wrapper
# reads about len(LINE_CASES) * WRAPPERS_PER_CASE / len(WRAP) of them): the first in small chunks in
# test_every_case_file_wrapped (k = 0), the others in the slow product. Every pair costs a parse (about 0.1 s
# of CPU each); ATTRIBUTION_WRAPPERS_PER_CASE=0 runs the whole product (2,500 pairs).
WRAPPERS_PER_CASE = int(os.environ.get("ATTRIBUTION_WRAPPERS_PER_CASE", "3")) or len(WRAP)


def _cases_for(name: str, first: int = 1) -> list[tuple[Path, dict]]:
    names, step = sorted(WRAP), len(WRAP) / WRAPPERS_PER_CASE
    w = names.index(name)
    return [c for i, c in enumerate(LINE_CASES)
            if any((i + round(k * step)) % len(names) == w for k in range(first, WRAPPERS_PER_CASE))]


def test_the_slow_product_gives_every_case_file_its_wrappers():
    names = sorted(WRAP)
    quick = Counter((str(p), names[i % len(names)]) for i, (p, _) in enumerate(LINE_CASES))  # k = 0
    slow = Counter((str(p), name) for name in WRAP for p, _ in _cases_for(name))
    assert not quick & slow  # no pair read twice
    per_case = Counter(p for p, _ in quick + slow)
    assert set(per_case) == {str(p) for p, _ in LINE_CASES}
    assert set(per_case.values()) == {min(WRAPPERS_PER_CASE, len(WRAP))}
    assert Counter(str(p) for name in WRAP for p, _ in _cases_for(name, first=0)) == per_case


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRAP))
def test_every_case_and_real_log_every_wrapper(name):
    # Case files in the ingest's default chunk (test_every_case_file_wrapped reads each once, in small chunks,
    # under its first wrapper), each under its other WRAPPERS_PER_CASE - 1 wrappers; every one gives the plain
    # file's rows. Every real log under every
    # wrapper, in the default chunk, is test_every_real_log_every_wrapper_into_a_store (through an ingest).
    failing = set()
    for plain, opts in _cases_for(name):
        try:
            check_parse(plain, name, opts, chunk_bytes=reader.DEFAULT_CHUNK_BYTES)
        except (AssertionError, InputError):
            failing.add((name, f"{plain.parent.name}/{plain.name}"))
    assert failing == set()


def _store_tables(store: Path) -> dict[str, pl.DataFrame]:
    con = Store.open(store).connect()
    return {t: fetch(con, f"select * from {t}") for t in ("engine_steps", "engine_config", "requests",
                                                           "request_events", "access_log", "ingest_errors")}


def _plain_tables(root: Path, name: str, plains: list[Path]) -> dict[str, pl.DataFrame]:
    """The tables of a store of the plain files, once per session (`across_workers`: under -n 2 the tests that
    compare a wrapper's store with it run on both workers)."""
    def build() -> dict[str, pl.DataFrame]:
        store = root / f"{name}-store"
        shutil.rmtree(store, ignore_errors=True)  # (a worker that failed halfway)
        ingest([str(p) for p in plains], store, year=2025, tz="UTC")
        return _store_tables(store)

    return across_workers(root, name, build)


def check_ingest(plain: dict[str, pl.DataFrame], wrapped: list[Path], name: str, store: Path, **kw) -> None:
    ingest([str(w) for w in wrapped], store, year=2025, tz="UTC", **kw)
    a, b = comparable(plain, name), comparable(_store_tables(store), name)
    assert sum(map(len, a.values())) > 0
    assert a == b


DEEPSEEK = "vllm_repo-jayashan10-Deepseek-qwen-deployment.log"


@pytest.fixture(scope="module")
def plain_real_store(tmp_path_factory) -> dict[str, pl.DataFrame]:
    return _plain_tables(session_root(tmp_path_factory), "plain-real", REAL)


def _under(tables: dict[str, pl.DataFrame], root: Path) -> dict[str, pl.DataFrame]:
    """The rows of `tables` read from files under `root`."""
    return {t: df.filter(pl.col("file").str.starts_with(f"{root}{os.sep}")) for t, df in tables.items()}


@pytest.mark.parametrize("name", ["docker_json", "containerd"])
def test_real_log_wrapped_ingests_into_the_same_store(name, tmp_path, plain_real_store):
    # The DeepSeek log in small chunks against its rows of the plain store (one ingest of every real log).
    plain = shared("traces", "real_logs", DEEPSEEK)
    want = {t: df.filter(pl.col("file").str.ends_with(f"{os.sep}{DEEPSEEK}")) for t, df in plain_real_store.items()}
    check_ingest(want, [wrap_file(plain, name, tmp_path / "in")], name, tmp_path / "s", chunk_bytes=2048)


# Wrappers per ingest in test_every_real_log_every_wrapper_into_a_store: an ingest costs about 0.15 CPU s and
# reading its store back 0.17 whatever it holds, so a few wrappers share one (each compared on its own files).
WRAPPER_GROUPS = 4
_GROUPS = [sorted(WRAP)[i::WRAPPER_GROUPS] for i in range(WRAPPER_GROUPS)]


@pytest.mark.slow
@pytest.mark.parametrize("names", _GROUPS, ids=[f"{g[0]}-and-{len(g) - 1}-more" for g in _GROUPS])
def test_every_real_log_every_wrapper_into_a_store(names, tmp_path, plain_real_store):
    # Issue 14's bar: each wrapper ingests the real logs of ../shared/traces into exactly the tables the plain
    # files give (all of them in one ingest, as a user would point the tool at a folder; here a few wrappers'
    # folders in one ingest, each wrapper's rows compared on their own).
    wrapped = [wrap_file(plain, name, tmp_path / "in" / name / str(i)) for name in names for i, plain in enumerate(REAL)]
    ingest([str(w) for w in wrapped], tmp_path / "s", year=2025, tz="UTC")
    got = _store_tables(tmp_path / "s")
    parts = {name: _under(got, tmp_path / "in" / name) for name in names}
    # every row is read from one wrapper's folder
    assert sum(df.height for p in parts.values() for df in p.values()) == sum(df.height for df in got.values())
    failing = []
    for name in names:
        a, b = comparable(plain_real_store, name), comparable(parts[name], name)
        assert sum(map(len, a.values())) > 0
        if a != b:
            failing.append((name, sorted(t for t in a if a[t] != b.get(t))))
    assert failing == []


@pytest.mark.parametrize("name", sorted(wrapping.WRAP))
def test_census_spans_sum_to_physical_lines(name, tmp_path):
    plain = shared("traces", "real_logs", "vllm_repo-abinavChandar-demo_env_l4.log")
    wrapped = wrap_file(plain, name, tmp_path)
    recs, _ = layer_records(wrapped, chunk_bytes=1500)
    assert recs["span"].sum() == wrapped.read_bytes().count(b"\n")
    assert recs["line"].is_unique().all()
    assert recs["text"].to_list() == [ln.removesuffix("\r") for ln in plain_lines(plain)]


# -- fuzz ------------------------------------------------------------------------------------------------

FUZZ_PLAIN = SHARED / "traces" / "real_logs" / "vllm_repo-jayashan10-Deepseek-qwen-deployment.log"
_SPLITTING = {"docker_json", "containerd", "crio"}


def _junk(real: list[str]) -> st.SearchStrategy[bytes]:
    line = st.sampled_from(real)
    return st.one_of(
        st.text(UTF8, max_size=120).map(lambda s: s.replace("\n", " ").encode("utf-8", "replace")),
        st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
        st.tuples(line, st.integers(0, 400)).map(lambda t: t[0][: t[1]].encode()),  # a real line cut short
        st.tuples(line, st.integers(0, 400), st.characters()).map(  # a real line with one character changed
            lambda t: (t[0][: t[1]] + t[2] + t[0][t[1] + 1:]).replace("\n", " ").encode("utf-8", "replace")),
        st.sampled_from([b'{"log":"(APIServer pid=1) INFO', b"2026-05-12T08:01:39Z stdout P", b"[pod/x/y] ",
                         b"name | ", b"\x1b[0m", b"\r"]),
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_wrapped_split_and_mutated_lines(data):
    real = plain_lines(FUZZ_PLAIN)
    name = data.draw(st.sampled_from(sorted(wrapping.WRAP)), label="wrapper")
    fn = WRAP[name]
    if name in _SPLITTING:
        fn = functools.partial(fn, split=data.draw(st.integers(16, 400), label="split"))
    physical = fn(real, START).split(b"\n")[:-1]
    junk = data.draw(st.lists(st.tuples(st.integers(0, 10**6), _junk(real)), max_size=8), label="junk")
    for pos, j in sorted(junk, reverse=True):
        physical.insert(pos % (len(physical) + 1), j)
    chunk = data.draw(st.integers(1024, 8192), label="chunk")
    fmt = {"containerd": "cri", "crio": "cri", "docker_t": "timestamped", "github_actions": "timestamped",
           "bracketed": "timestamped"}.get(name, name)
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "vllm_log" / FUZZ_PLAIN.name
        f.parent.mkdir()
        f.write_bytes(b"\n".join(physical) + b"\n")
        got = parse_path(f, fmt, year=2025, tz="UTC", chunk_bytes=chunk)
        recs, _ = layer_records(f, chunk_bytes=chunk, fmt=fmt)
        assert recs["span"].sum() == len(physical)  # every physical line counted once
    want = _plain_parse(FUZZ_PLAIN, 2025, "UTC")
    key = ["ts", "running", "waiting", "kv_usage"]
    have = set(got.tables["engine_steps"].select(key).rows())
    assert set(want.tables["engine_steps"].select(key).rows()) <= have


def test_fuzz_plain_file_is_big_enough():
    # The fuzz test means something only if its log has stats rows to lose.
    assert _plain_parse(FUZZ_PLAIN, 2025, "UTC").tables["engine_steps"].height >= 5


@pytest.mark.parametrize("outer,inner", [("docker_json", "containerd"), ("containerd", "docker_json"),
                                         ("compose", "docker_t"), ("docker_json", "kubectl_prefix")])
def test_nested_wrappers_peel_in_layers(outer, inner, tmp_path):
    # A CRI line inside Docker's JSON, Docker's JSON inside a CRI line, ...: partial records at both levels.
    plain = shared("traces", "real_logs", "vllm_repo-2215860382-VedioSifter.log")
    lines = plain_lines(plain)
    inner_lines = WRAP[inner](lines, wrapping.record_times(lines, START)).decode("utf-8", "replace").split("\n")[:-1]
    f = tmp_path / plain.name
    f.write_bytes(WRAP[outer](inner_lines, wrapping.record_times(inner_lines, START)))
    got = parse_path(f, year=2025, tz="UTC", chunk_bytes=3000)
    assert got.source == formats.get(outer if outer != "containerd" else "cri").name
    want = _plain_parse(plain, 2025, "UTC")
    assert comparable(got.tables, "compose") == comparable(want.tables, "compose")
    recs, _ = layer_records(f, chunk_bytes=3000)
    assert recs["span"].sum() == f.read_bytes().count(b"\n")


def test_over_long_partial_record_is_reported_and_the_rest_kept(tmp_path):
    plain = shared("traces", "real_logs", "vllm_repo-2215860382-VedioSifter.log")
    lines = plain_lines(plain)
    lines.insert(3, "x" * 5000)  # 17 partial records of 300 bytes, 5,000 bytes once joined
    f = tmp_path / "logs" / plain.name
    f.parent.mkdir()
    f.write_bytes(wrapping.docker_json(lines, START))
    ingest([str(f)], tmp_path / "s", year=2025, tz="UTC", chunk_bytes=1024, max_line_bytes=4096)
    t = _store_tables(tmp_path / "s")
    err = t["ingest_errors"]
    assert err.select("line", "reason").rows() == [(4, "record of 5,000 bytes is longer than the 4,096-byte limit: skipped")]
    want = _plain_parse(plain, 2025, "UTC")
    assert t["engine_steps"].height == want.tables["engine_steps"].height > 0
    assert t["access_log"].height == want.tables["access_log"].height


def test_wrapped_files_parse_in_worker_processes(tmp_path, monkeypatch):
    # Plan pickles the WrappedSource to the workers: the same rows as a sequential read.
    import attribution.ingest.run as ingest_mod

    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    plain = shared("traces", "real_logs", "vllm_repo-2215860382-VedioSifter.log")
    for name in ("docker_json", "containerd", "kubectl_prefix"):
        wrap_file(plain, name, tmp_path / "in")
    seq = ingest([str(tmp_path / "in")], tmp_path / "seq", jobs=1, year=2025, tz="UTC", chunk_bytes=4096)
    par = ingest([str(tmp_path / "in")], tmp_path / "par", jobs=2, year=2025, tz="UTC", chunk_bytes=4096)
    assert sorted(f.format for f in par.files) == ["cri", "docker_json", "kubectl_prefix"]
    assert par.rows == seq.rows and par.rows["engine_steps"] > 0
    a, b = _store_tables(tmp_path / "seq"), _store_tables(tmp_path / "par")
    for t in a:
        assert a[t].sort(a[t].columns).equals(b[t].sort(b[t].columns)), t


@pytest.mark.parametrize("name", ["containerd", "docker_json"])
def test_wrapped_real_log_appended_in_steps(name, tmp_path, monkeypatch):
    # A live file read by several ingests, each cut mid-line (inside partial records too), with tiny chunks
    # from the environment: the same tables as one ingest of the whole file.
    monkeypatch.setenv("ATTRIBUTION_CHUNK_BYTES", "2000")
    plain = shared("traces", "real_logs", "vllm_repo-abinavChandar-demo_env_l4.log")
    data = WRAP[name](plain_lines(plain), START)
    f = tmp_path / "live" / plain.name
    f.parent.mkdir()
    for cut in (len(data) // 5 + 7, len(data) // 2 + 3, 4 * len(data) // 5 + 11, len(data)):
        f.write_bytes(data[:cut])
        ingest([str(f)], tmp_path / "steps", year=2025, tz="UTC")
    ingest([str(f)], tmp_path / "once", year=2025, tz="UTC")
    a, b = _store_tables(tmp_path / "steps"), _store_tables(tmp_path / "once")
    assert a["engine_steps"].height > 0
    for t in a:
        assert a[t].sort(a[t].columns).equals(b[t].sort(b[t].columns)), t
