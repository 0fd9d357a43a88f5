"""The store as a plain dataset: day partitions any engine reads without the commit log, `data/` holding exactly
the last commit's live files (removed ones wait in `_trash/` for readers of older snapshots), a date window
reading only its days, and the in-place upgrade of layout-1 stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import assert_plain_equals_ours, litellm_line, ours, run_cli
from synthetic_source import register

from attribution import layout
from attribution.db import fetch
from attribution.errors import StoreError
from attribution.ingest import ingest
from attribution.schema import conform
from attribution.store import LAYOUT_VERSION, MARKER, Store

register()
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store_layout1"
DAY0 = 1767225600.0  # 2026-01-01 00:00 UTC


def steps(path: Path, start: float, count: int, every: float = 60.0, header: bool = True) -> None:
    """Synthetic engine steps (tests/synthetic_source.py) every `every` seconds from epoch second `start`."""
    ts = (pl.Series([start + every * i for i in range(count)]) * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    body = "".join(f"ts={t.strftime('%Y-%m-%dT%H:%M:%S')} n={i}\n" for i, t in enumerate(ts))
    with open(path, "a") as fh:
        fh.write(("SYNTH v1\n" if header else "") + body)


def test_partitions_trash_and_plain_readers_after_growth_tails_and_compaction(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_GRACE_S", "3600")
    log = tmp_path / "pod.log"
    # steps every 60 s from 22:00 on day 0: the first run crosses midnight, so a batch splits by day
    steps(log, DAY0 + 22 * 3600, 200)
    with open(log, "a") as fh:
        fh.write("partial line without a newline")
    ingest([str(log)], tmp_path / "s")
    store = tmp_path / "s"
    assert_plain_equals_ours(store)
    assert {layout.day_of(p) for p in Store.open(store).snapshot().live("engine_steps")} == {
        "2026-01-01", "2026-01-02"}
    old = Store.open(store)
    old_snap = old.snapshot()
    old_con = old.connect(old_snap)
    before = fetch(old_con, "select count(*) as n from engine_steps")["n"][0]
    with open(log, "a") as fh:  # completes the tail: its rows are superseded, the old files go to the trash
        fh.write(" now ended\n")
    for i in range(18):  # many small commits: compaction merges each day's files and trashes the parts
        steps(tmp_path / f"pod{i}.log", DAY0 + 86400 * (i % 3), 5)
        ingest([str(tmp_path / f"pod{i}.log")], store)
    ingest([str(log)], store)
    assert_plain_equals_ours(store)
    trashed = list((store / layout.TRASH).rglob("*.parquet"))
    assert trashed, "removed files wait in the trash"
    # a reader holding the old snapshot still reads it: its files are found in the trash
    assert fetch(old_con, "select count(*) as n from engine_steps")["n"][0] == before
    assert fetch(old.connect(old_snap), "select count(*) as n from engine_steps")["n"][0] == before
    for rel in old_snap.data:
        assert old.locate(rel).exists()
    monkeypatch.setenv("ATTRIBUTION_GRACE_S", "0")
    ingest([str(log)], store)  # the next writer purges the expired trash
    assert not list((store / layout.TRASH).rglob("*.parquet"))
    assert_plain_equals_ours(store)


def test_a_day_window_reads_its_days_files_only(tmp_path):
    """Seven days of requests: a one-day window reads 1/7 of the files, through our views' file list and
    through DuckDB's own hive partition pruning on the plain dataset."""
    n = 7 * 24
    t = (pl.Series([DAY0 + 3600 * i for i in range(n)]) * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    df = conform("requests", pl.DataFrame({"request_id": [f"r{i}" for i in range(n)], "arrival": t,
                                           "prompt_tokens": list(range(n))}))
    st = Store.open(tmp_path / "s", create=True)
    with st.writer() as w:
        for part in df.iter_slices(60):  # three commits of 60 hours: days 1-3, 3-5 and 6-7
            w.commit(w.write("requests", part, file_key=None, sealed=True), [], {})
    snap = st.snapshot()
    live = snap.live("requests")
    one = layout.prune(live, "2026-01-04", "2026-01-04")
    assert len(live) == 8 and len(one) == 1
    con = st.connect(snap, days=("2026-01-04", "2026-01-04"))
    got = fetch(con, "select count(*) as n, min(arrival) as lo from raw_requests")
    assert got["n"][0] == 24 and str(got["lo"][0]).startswith("2026-01-04 00:00")
    # any engine: DuckDB prunes the hive partitions of a `day` filter before opening files
    plan = duckdb.sql(f"explain analyze select count(*) from read_parquet('{st.root}/data/requests/**/*.parquet', "
                      "hive_partitioning=true) where day = '2026-01-04'").fetchall()[0][1]
    total = duckdb.sql(f"select count(*) from read_parquet('{st.root}/data/requests/**/*.parquet', "
                       "hive_partitioning=true)").fetchall()[0][0]
    assert total == n
    assert "Total Files Read: 1" in plan


def test_rows_without_a_time_go_to_the_null_partition(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    df = pl.DataFrame({"request_id": ["a", "b"], "arrival": [None, DAY0 * 1e6]}).with_columns(
        pl.col("arrival").cast(pl.Int64).cast(pl.Datetime("us", "UTC")))
    with st.writer() as w:
        w.commit(w.write("requests", df, file_key=None, sealed=True), [], {})
    assert sorted(layout.day_of(p) for p in st.snapshot().live("requests")) == ["2026-01-01", layout.NULL_DAY]
    got = pl.scan_parquet(f"{st.root}/data/requests/**/*.parquet", hive_partitioning=True).collect()
    days = got.sort("request_id")["day"].to_list()
    assert days[0] is None and days[1].isoformat() == "2026-01-01"


def _layout1(tmp_path: Path) -> Path:
    store = tmp_path / "old"
    shutil.copytree(FIXTURE, store, ignore=shutil.ignore_patterns("README.md", "*.part"))
    for sub in ("_tmp",):
        (store / sub).mkdir()
    return store


def _all_rows(store: Path) -> dict[str, pl.DataFrame]:
    return {t: ours(store, t) for t in ("requests", "ingest_errors", "ingest_line_shapes")}


def test_upgrade_keeps_every_row_and_the_next_ingest_supersedes_the_old_tail(tmp_path, capsys):
    store = _layout1(tmp_path)
    assert Store.open(store).layout == 1
    before = _all_rows(store)
    assert before["requests"].height == 23
    code, _out, err = run_cli(capsys, "store", "upgrade", "--store", str(store))
    assert code == 0 and "upgraded from layout 1" in err
    assert json.loads((store / MARKER).read_text())["layout"] == LAYOUT_VERSION
    after = _all_rows(store)
    for t in before:
        assert before[t].equals(after[t]), t
    assert_plain_equals_ours(store)
    assert all(layout.day_of(p) for p in Store.open(store).snapshot().data)
    code, _out, err = run_cli(capsys, "store", "upgrade", "--store", str(store))
    assert code == 0 and "nothing to do" in err
    # the unsealed tail of layout 1, moved into partitions, is still superseded when the line completes
    # (the log's input path is gone: the grown copy here is found by its fingerprints, as a rotated log)
    base = DAY0 - 3600
    last = litellm_line(23, "batch", 300.0 * 23, 300.0 * 23 + 0.4, 300.0 * 23 + 3.0, 123, 33, base)
    grown = tmp_path / "gw.jsonl"
    grown.write_text((FIXTURE / "gw.jsonl.part").read_text() + last[50:] + "\n")
    ingest([str(grown)], store, tz="UTC", deployment="gw")
    fresh = tmp_path / "fresh"
    ingest([str(grown)], fresh, tz="UTC", deployment="gw")
    for t in ("requests", "ingest_errors"):
        a, b = ours(store, t).drop("file"), ours(fresh, t).drop("file")
        assert a.height == b.height and a.equals(b), t
    assert ours(store, "requests").height == 24


def test_upgrade_interrupted_at_any_step_leaves_a_readable_store_the_rerun_finishes(tmp_path, monkeypatch):
    from attribution import store as store_mod
    from attribution import upgrade as upgrade_mod

    expected = _all_rows(_layout1(tmp_path / "ref"))
    real_commit, real_write = store_mod.Writer.commit, store_mod._atomic_write

    class Killed(Exception):
        pass

    def die_before_commit(self, *a, **k):
        raise Killed

    def die_at_marker(dest, obj, tmp):
        if dest.name == MARKER:
            raise Killed
        real_write(dest, obj, tmp)

    for step, patch in (("commit", ("attribution.store.Writer.commit", die_before_commit)),
                        ("marker", ("attribution.store._atomic_write", die_at_marker))):
        store = _layout1(tmp_path / step)
        with monkeypatch.context() as m:
            m.setattr(*patch)
            with pytest.raises(Killed):
                with Store.open(store).writer():
                    pass
        assert Store.open(store).layout == 1, step  # not upgraded yet, and readable as it is
        got = _all_rows(store)
        assert all(got[t].equals(expected[t]) for t in expected), step
        with Store.open(store).writer():  # the rerun finishes
            pass
        assert Store.open(store).layout == LAYOUT_VERSION
        got = _all_rows(store)
        assert all(got[t].equals(expected[t]) for t in expected), step
        assert_plain_equals_ours(store)
    assert store_mod.Writer.commit is real_commit and upgrade_mod.upgrade


def test_a_store_from_a_newer_layout_is_a_clear_error(tmp_path):
    store = _layout1(tmp_path)
    (store / MARKER).write_text(json.dumps({"layout": LAYOUT_VERSION + 1}))
    with pytest.raises(StoreError, match="newer than this attribution"):
        Store.open(store)
