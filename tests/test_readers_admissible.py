"""Readers never fail on what the schema admits (issue 16): hypothesis draws rows for every table within the
column domains of attribution.schema (extremes included: counts at the domain's top, times in 2015 and a day
after now, nulls in every column), writes them as a store, and runs every reader through the library API:
status, the analyses (lengths, concurrency, latency, capacity, analyze), thresholds, memsplit and the
report (built for a drawn window and rendered in a drawn format; the extremes store: both windows, every
format). None may raise."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from attribution.analyses import analyze, capacity, concurrency, latency, lengths, select
from attribution.choices import ReportFormat
from attribution.config import load_settings
from attribution.errors import InputError, UsageError
from attribution.memsplit import memsplit
from attribution.report import assemble, run_analyses, write
from attribution.schema import TABLES, TS, TS_MIN, Domain, conform, domain_of
from attribution.status import store_status
from attribution.store import Store
from attribution.thresholds import thresholds

WORDS = {
    "source": ["vllm_log", "sglang_log", "litellm"], "source_kind": ["engine", "gateway"],
    "file": ["/logs/a.log", "/logs/b.jsonl"], "deployment": ["pod-a", "pod-b"], "engine": ["vllm", "sglang"],
    "status": ["ok", "error", "aborted", "failed", "received"], "event": ["received", "added", "finished", "aborted"],
    "kind": ["stats", "prefill", "decode", "iteration", "spec_decode", "prefix_cache", "scrape"],
    "part": ["bucket", "sum", "count"], "metric": ["vllm:time_to_first_token_seconds", "vllm:prefix_cache_hits_total"],
    "class": ["parsed", "skipped", "unrecognised"], "model": ["org/m", "Qwen3-Next-80B-A3B", ""],
    "request_id": ["r1", "r2", "r3"], "request_key": ["r1", "r2", "r3"], "served_model": ["org/m"],
}


# The times drawn: TS_MIN to the top of the domain, TOP (the clock, a minute short of a day ahead, read once per
# process: every draw of a run, a failure's replays and its shrinking see one top). The random ones come from a
# span with fixed ends, so that the derandomized choices give the same times on every run whatever the clock:
# each is its distance into the span either after TS_MIN (the same time every run) or before TOP (the same
# distance from the clock every run: the readers compare times with today, pruning.anchor_days). Together they
# cover TS_MIN to TOP while TOP is at most eleven years after SPAN_END. (st.datetimes(TS_MIN, TOP) drew other
# times once the clock was in another month, and its top, read at each draw, differed within one example.)
LO = TS_MIN.replace(tzinfo=None)
TOP = datetime.fromtimestamp(time.time() + 86400 - 60, UTC).replace(tzinfo=None)
SPAN_END = datetime(2026, 1, 1)


def times() -> st.SearchStrategy[datetime]:
    span = st.datetimes(LO, SPAN_END)
    return st.one_of(st.sampled_from([LO, TOP, TOP - timedelta(days=3)]), span.map(lambda t: min(t, TOP)),
                     span.map(lambda t: max(TOP - (t - LO), LO)))


def values(table: str, name: str, dtype: pl.DataType) -> st.SearchStrategy:
    dom = domain_of(table, name)
    if dom == "ts":
        v = times()
    elif isinstance(dom, Domain) and isinstance(dtype, pl.List):
        v = st.lists(st.floats(dom.lo, dom.hi), max_size=3)
    elif isinstance(dom, Domain) and dom.integral:
        v = st.one_of(st.sampled_from([int(dom.lo), int(dom.hi)]), st.integers(int(dom.lo), int(dom.hi)))
    elif isinstance(dom, Domain):
        v = st.one_of(st.sampled_from([dom.lo, dom.hi]), st.floats(dom.lo, dom.hi))
    elif name in WORDS:
        v = st.sampled_from(WORDS[name])
    elif dtype == pl.Utf8:
        v = st.text(max_size=8)
    elif dtype == pl.Boolean:
        v = st.booleans()
    elif name in ("line", "first_line", "lines"):
        v = st.integers(1, 10**6)
    elif dtype == pl.List(pl.Int64):
        v = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3)
    elif isinstance(dtype, pl.List):  # flags
        v = st.lists(st.fixed_dictionaries({"key": st.sampled_from(["max_num_seqs", "block_size", "model"]),
                                            "value": st.sampled_from(["8", "16", "org/m", "x"])}), max_size=2)
    else:
        raise AssertionError(f"no strategy for {table}.{name} ({dtype})")
    return st.none() | v


@st.composite
def tables(draw) -> dict[str, pl.DataFrame]:
    out = {}
    for table, schema in TABLES.items():
        n = draw(st.integers(0, 5))
        cols = {name: draw(st.lists(values(table, name, dtype), min_size=n, max_size=n))
                for name, dtype in schema.items()}
        df = pl.DataFrame(cols, schema={n: (pl.Datetime("us") if t == TS else t) for n, t in schema.items()})
        out[table] = conform(table, df.with_columns(
            [pl.col(n).dt.replace_time_zone("UTC") for n, t in schema.items() if t == TS]))
    return out


def write_store(root, rows: dict[str, pl.DataFrame]) -> Store:
    st_ = Store.open(root, create=True)
    with st_.writer() as w:
        add = [w.write(t, df, file_key=None, sealed=True) for t, df in rows.items() if df.height]
        w.commit(add, [], {})
    return st_


def read_everything(store: Store, out_dir, windows=(None, "7d"), fmt: ReportFormat | None = None) -> None:
    """Every reader over `store`; the report for each of `windows` (all time, the last 7 days), written in
    `fmt` (every format when None)."""
    store_status(store)
    con = store.connect()
    try:
        sel = select(con, since="7d")
    except UsageError:  # no request with a time: a relative window has nothing to count back from
        sel = select(con)
    for analysis in (lengths, concurrency, latency, capacity, thresholds):
        analysis(sel)
    analyze(con, since=sel.window)
    try:
        memsplit(con)
    except UsageError:  # no engine start, or none with a known model: said so, not a failure
        pass
    cfg = out_dir / "attribution.toml"
    cfg.write_text("")
    for since in windows:
        try:
            inp = run_analyses(store, load_settings({}, config=cfg, env={}), since=since)
        except UsageError:  # an empty window: the report says so (exit 2)
            continue
        except InputError as exc:  # a store without requests: nothing to report (exit 3)
            assert "holds no requests" in str(exc)
            continue
        write(assemble(inp, store), out_dir=out_dir, fmt=fmt)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("ATTRIBUTION_HYPOTHESIS_EXAMPLES", "6")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(rows=tables(), since=st.sampled_from([None, "7d"]), fmt=st.sampled_from(list(ReportFormat)))
def test_readers_tolerate_every_admissible_store(rows, since, fmt, tmp_path_factory):
    # one report window and one format per example (each costs as much as all the other readers together):
    # hypothesis draws them like the rows; test_extremes_at_once writes both windows in every format
    note(f"times drawn from {LO} to {TOP} (TOP: the clock a day ahead, as the test started)")
    root = tmp_path_factory.mktemp("adm")
    read_everything(write_store(root / "store", rows), root, windows=(since,), fmt=fmt)


def test_extremes_at_once(tmp_path):
    """Every numeric column at its domain's top, every time at both ends: one store, every reader."""
    rows = {}
    for table, schema in TABLES.items():
        cols = {}
        for name, dtype in schema.items():
            dom = domain_of(table, name)
            if dom == "ts":
                cols[name] = [TS_MIN, TOP.replace(tzinfo=UTC), None]
            elif isinstance(dom, Domain) and not isinstance(dtype, pl.List):
                cols[name] = [dom.hi, dom.lo, None] if not dom.integral else [int(dom.hi), int(dom.lo), None]
            elif name in WORDS:
                cols[name] = WORDS[name][:1] * 2 + [None]
        rows[table] = conform(table, pl.DataFrame(cols, schema_overrides={
            n: (TS if t == TS else t) for n, t in schema.items() if n in cols}))
    read_everything(write_store(tmp_path / "store", rows), tmp_path)


def test_an_engine_start_without_a_time_is_reported(tmp_path):
    """An engine start whose first line had no time (engine_config.ts null, admitted), with what the memory split
    needs: its section says "time unknown" in every format (the property test found the report raising on it)."""
    t = datetime(2026, 5, 4, 12, tzinfo=UTC)
    rows = {
        "requests": conform("requests", pl.DataFrame({
            "request_id": ["r1"], "source": ["vllm_log"], "source_kind": ["engine"], "deployment": ["pod-a"],
            "arrival": [t], "finished": [t], "prompt_tokens": [100], "output_tokens": [10], "status": ["ok"]})),
        "engine_config": conform("engine_config", pl.DataFrame({
            "start_line": [1], "line": [1], "file": ["/logs/a.log"], "ts": pl.Series([None], dtype=TS),
            "source": ["vllm_log"], "source_kind": ["engine"], "deployment": ["pod-a"], "engine": ["vllm"],
            "model": ["Qwen3-Next-80B-A3B"], "kv_pool_tokens": [100_000], "available_kv_bytes": [10**10],
            "max_running_requests": [64]})),
    }
    read_everything(write_store(tmp_path / "store", rows), tmp_path, windows=(None,))
    md = next(tmp_path.glob("attribution-report-*.md")).read_text()
    assert "pod-a (vllm, from time unknown)" in md


def test_an_engine_config_row_without_a_line_number_keeps_its_values(tmp_path):
    """engine_config rows whose `line` is null (admitted) give the start their values: alone (the start's only
    row), and beside a numbered row, which wins where both give a fact. The view took each fact from the row
    with the highest line, and a null line is no line to DuckDB's arg_max: such a start read back all nulls."""
    def cfg(start: int, line: int | None, **facts) -> dict:
        return {"start_line": start, "line": line, "file": "/logs/a.log", "source": "vllm_log",
                "source_kind": "engine", "deployment": "pod-a", **facts}

    rows = [cfg(1, None, engine="vllm", model="m-lone", kv_pool_tokens=100, max_model_len=4096),
            cfg(50, None, engine="vllm", model="m-old", kv_pool_tokens=200),
            cfg(50, 52, model="m-new", max_model_len=8192)]
    store = write_store(tmp_path / "store", {"engine_config": conform("engine_config", pl.DataFrame(rows))})
    got = store.connect().execute(
        "select start_line, deployment, engine, model, kv_pool_tokens, max_model_len from engine_config "
        "order by start_line").fetchall()
    assert got == [(1, "pod-a", "vllm", "m-lone", 100, 4096), (50, "pod-a", "vllm", "m-new", 200, 8192)]


@pytest.mark.parametrize("table", list(TABLES))
def test_every_column_has_a_strategy(table):
    """A column added to the schema gets a domain (or a word list) here, or this fails."""
    for name, dtype in TABLES[table].items():
        values(table, name, dtype)
