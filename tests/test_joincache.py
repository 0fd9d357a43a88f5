"""The per-commit cache of the engine x gateway join (attribution.joincache): the same rows as the staging
views, built once per commit under the store's _cache/ by readers (never under the writer's lock, also while an
ingest holds it), rebuilt for a newer commit with the older one removed, a private copy where the store cannot
be written, and never in place of a joined_requests the caller redefined."""

from __future__ import annotations

import fcntl

import polars as pl
import pytest
from conftest import litellm_line
from test_join import _slp, _store, _vllm_line

from attribution import joincache
from attribution.analyses import select
from attribution.analyses.common import keep_selections, selections_on_disk
from attribution.dashboard import Filters, narrow
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.store import Store

# the ingests here prepare the commit's join as a user's do (off by default in tests: conftest)
pytestmark = pytest.mark.summaries


def _rows(con, table: str) -> pl.DataFrame:
    return fetch(con, f"select * exclude (block_hashes) from {table}").sort(pl.all(), nulls_last=True)


def _cached(store: Store) -> list[str]:
    d = joincache.cache_dir(store.root)
    return sorted(p.name for p in d.glob("joined_requests-*")) if d.is_dir() else []


def test_the_cache_holds_the_staging_rows_and_is_built_once_per_commit(sample_store):
    store = Store.open(sample_store)
    plain = store.connect()
    cached = store.connect()
    assert joincache.use(cached) and joincache.attached(cached) and not joincache.attached(plain)
    for table in ("joined_requests", "requests"):
        assert _rows(cached, table).equals(_rows(plain, table))
    (name,) = _cached(store)
    assert name.startswith(f"joined_requests-{store.snapshot().version:020d}-")
    built = (joincache.cache_dir(store.root) / name).stat().st_mtime_ns
    again = store.connect()
    select(again)  # analyses attach it themselves
    assert joincache.attached(again) and _cached(store) == [name]
    assert (joincache.cache_dir(store.root) / name).stat().st_mtime_ns == built  # read, not rebuilt


def test_duplicate_keys_keep_one_row_per_side(tmp_path):
    """The same request in two engine logs and twice in the gateway log: one joined row, from the engine row with
    the most timings, then the first file; the gateway's first line."""
    store, _ = _store(tmp_path)
    logs = tmp_path / "logs"
    (logs / "pod-a" / "vllm2.log").write_text(_vllm_line("02-13 11:33:33", "a269fdcb7c6ce890"))
    (logs / "litellm2.jsonl").write_text(_slp("a269fdcb7c6ce890", 1739446413.0, "other-alias", None, 812))
    ingest([str(logs)], store.root, year=2025, tz="UTC")
    con = store.connect()
    joincache.use(con)
    rows = fetch(con, "select request_key, file, key_alias from joined_requests where request_key = "
                      "'a269fdcb7c6ce890'")
    assert rows.height == 1
    assert rows["file"][0].endswith("pod-a/vllm.log") and rows["key_alias"][0] == "search-backend"
    assert _rows(con, "joined_requests").equals(_rows(store.connect(), "joined_requests"))


def test_readers_build_it_while_an_ingest_holds_the_lock_and_drop_older_commits(tmp_path):
    store, _ = _store(tmp_path)
    con = store.connect()
    assert joincache.use(con)
    (first,) = _cached(store)
    (tmp_path / "logs" / "litellm.jsonl").open("a").write(_slp("e269fdcb7c6ce894", 1739446420.0, "late", None, 9))
    ingest([str(tmp_path / "logs")], store.root, year=2025, tz="UTC")
    with open(store.root / "_lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # an ingest is writing
        newer = store.connect()
        sel = select(newer)
        assert sel.requests == 5 and joincache.attached(newer)
    (second,) = _cached(store)  # the older commit's file is gone
    assert second != first and f"-{store.snapshot().version:020d}-" in second
    # the connection that attached the older file still reads it
    assert fetch(con, "select count(*) from joined_requests").item() == 4


def test_a_store_that_cannot_be_written_gets_a_private_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")  # the ingest prepares nothing: only the reader builds
    store, _ = _store(tmp_path)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setattr(joincache, "cache_dir", lambda root: blocked / "_cache")
    con = store.connect()
    assert joincache.use(con, fallback_dir=tmp_path)
    private = [p for p in tmp_path.iterdir() if p.name.startswith("attribution-join-")]
    assert len(private) == 1 and not (store.root / "_cache").exists()
    assert _rows(con, "joined_requests").equals(_rows(store.connect(), "joined_requests"))
    con.close()
    del con
    import gc

    gc.collect()
    assert not private[0].exists()


def test_a_redefined_join_is_left_alone_and_workload_names_have_their_own_cache(tmp_path):
    store, _ = _store(tmp_path)
    con = narrow(store.connect(), Filters(workloads=("batch",)))
    assert not joincache.use(con) and select(con).requests == 1
    named = store.connect()
    named.register("_workload_map", pl.DataFrame({"match": ["search-backend"], "name": ["search"]}).to_arrow())
    plain = store.connect()
    assert joincache.use(named) and joincache.use(plain)
    assert len(_cached(store)) == 2
    workloads = set(fetch(named, "select workload from joined_requests")["workload"])
    assert "search" in workloads and "search" not in set(fetch(plain, "select workload from joined_requests")[
        "workload"])


def _groups(con, name: str) -> dict[str, int]:
    """Row groups of each table of the attached cache file `name`."""
    db = fetch(con, "select database_name from duckdb_databases() where path like $p", {"p": f"%{name}"}).item()
    return {t: fetch(con, f"select count(distinct row_group_id) from pragma_storage_info('{db}.{t}')").item()
            for t in joincache.TABLES}


def test_a_store_below_a_row_group_is_written_in_several_row_groups_with_the_same_rows(tmp_path, monkeypatch):
    """Below one DuckDB row group a table went through DuckDB's write-ahead log and was then written again when
    the log was checkpointed: the file of a store of fewer requests than a row group is built with row groups of
    a quarter of its requests (whole vectors), written once; its rows are the staging views' own."""
    monkeypatch.setenv("ATTRIBUTION_SUMMARIES", "0")
    logs = tmp_path / "logs"
    logs.mkdir()
    n = 4_500  # a quarter rounded up to a vector: 2,048 rows, so 3 row groups of requests (and of the join)
    (logs / "litellm.jsonl").write_text("\n".join(
        litellm_line(i, f"alias-{i % 3}", i * 0.5, i * 0.5 + 0.1, i * 0.5 + 1.0, 100 + i, 10) for i in range(n)) + "\n")
    ingest([str(logs)], tmp_path / "s", year=2025, tz="UTC")
    store = Store.open(tmp_path / "s")
    plain, cached = store.connect(), store.connect()
    assert joincache.row_group_size(cached) == 2_048
    assert joincache.use(cached)
    (name,) = _cached(store)
    assert _groups(cached, name) == {"requests": 3, "joined_requests": 3}
    for table in ("joined_requests", "requests"):
        assert _rows(cached, table).equals(_rows(plain, table))
    assert fetch(cached, "select count(*) from joined_requests").item() == n
    # a DuckDB that refuses the option (before it had one; here a size it does not take): built in its own
    monkeypatch.setattr(joincache, "row_group_size", lambda con: 1_000)
    cached.close()
    (joincache.cache_dir(store.root) / name).unlink()
    again = store.connect()
    assert joincache.use(again) and _cached(store) == [name]
    assert _groups(again, name) == {"requests": 1, "joined_requests": 1}
    assert _rows(again, "joined_requests").equals(_rows(plain, "joined_requests"))
    monkeypatch.undo()
    monkeypatch.setattr(joincache, "ROW_GROUP", 4_096)  # at a row group of requests or more: DuckDB's own
    assert joincache.row_group_size(plain) == 4_096


def test_selections_on_disk_are_tables_of_a_file_with_the_same_rows_in_the_same_order(sample_store, tmp_path):
    store = Store.open(sample_store)
    in_memory, on_disk = store.connect(), store.connect()
    selections_on_disk(on_disk, tmp_path)
    keep_selections(on_disk, 1)
    select(in_memory, by="model")
    select(on_disk, by="model")
    read = "select * from int_analysis_requests"
    assert fetch(on_disk, read).equals(fetch(in_memory, read))  # row order too (ties keep it)

    def tables(con) -> list[tuple[str, bool]]:
        return fetch(con, "select database_name, temporary from duckdb_tables() "
                          "where table_name like 'int_analysis_requests_%'").rows()

    ((database, temporary),) = tables(on_disk)
    assert database.startswith("selections_") and not temporary
    assert (tmp_path / f"{database}.duckdb").is_file()
    assert [t for _, t in tables(in_memory)] == [True]
    select(on_disk, by="all")  # the one kept replaces the other in the file
    assert tables(on_disk) == [(database, False)]
    assert fetch(on_disk, "select count(*) from int_analysis_requests").item() == \
        fetch(in_memory, "select count(*) from int_analysis_requests").item()


def test_a_kept_window_grouped_otherwise_is_a_view_over_its_table_with_the_same_rows_in_the_same_order(
        sample_store, tmp_path):
    store = Store.open(sample_store)
    in_memory, on_disk = store.connect(), store.connect()
    selections_on_disk(on_disk, tmp_path)
    keep_selections(on_disk, 1)
    read = "select * from int_analysis_requests"

    def tables() -> int:
        return fetch(on_disk, "select count(*) from duckdb_tables() "
                              "where table_name like 'int_analysis_requests_%'").item()

    def views() -> int:
        return fetch(on_disk, "select count(*) from duckdb_views() "
                              "where view_name like 'int_analysis_requests_%'").item()

    for by in ("workload", "all", "model", "version", "label", "deployment", "workload"):
        got, want = select(on_disk, by=by), select(in_memory, by=by)
        assert got.requests == want.requests
        assert fetch(on_disk, read).equals(fetch(in_memory, read)), by
        assert tables() == 1
    assert views() == 5  # one table made, five views over it
    select(on_disk, by="day")  # (its group needs a time the table does not keep): a table of its own, which
    select(in_memory, by="day")  # replaces the other and the views over it
    assert fetch(on_disk, read).equals(fetch(in_memory, read))
    assert (tables(), views()) == (1, 0)
