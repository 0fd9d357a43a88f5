"""cli/app.bound_memory: the commands whose DuckDB side grows with the store cap it and spill to a scratch
directory; the others keep DuckDB's default."""

import os

import duckdb

from attribution.cli.app import BOUNDED_COMMANDS, bound_memory


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    return str(con.execute("select current_setting($n)", {"n": name}).fetchone()[0])


def test_bounded_commands_cap_duckdb_and_spill(monkeypatch):
    assert {"concurrency", "thresholds", "capacity"} <= BOUNDED_COMMANDS
    free = duckdb.connect()
    default = _setting(free, "memory_limit")
    bound_memory(free, "lengths")
    assert _setting(free, "memory_limit") == default
    con = duckdb.connect()
    monkeypatch.setenv("ATTRIBUTION_DUCKDB_MEMORY_MB", "300")
    bound_memory(con, "thresholds")
    limit = _setting(con, "memory_limit")
    assert limit != default and limit.startswith("286")  # 300 MB in DuckDB's MiB
    scratch = _setting(con, "temp_directory")
    assert os.path.isdir(scratch) and "attribution-spill-" in scratch
    # over the cap DuckDB spills instead of failing: a sort of ~80 MB of rows under a 64 MB limit
    con.execute("set memory_limit = '64MB'")
    n = con.execute("select count(*) from (select i, random() as r from range(5000000) t(i) order by r)").fetchone()
    assert n == (5_000_000,)



def test_shed_cache_evicts_the_cached_blocks_of_a_database_file_and_keeps_the_cap(tmp_path, monkeypatch):
    from attribution.db import bound_memory as bound_connection
    from attribution.db import shed_cache

    monkeypatch.setenv("ATTRIBUTION_DUCKDB_MEMORY_MB", "300")

    def filled(name: str, **shed: bool) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        shed_cache(con)  # a connection without a cap of ours: nothing changes
        bound_connection(con, 1024, **shed)
        con.execute("attach $f as kept", {"f": str(tmp_path / f"{name}.duckdb")})
        con.execute("create table kept.t as select i, random() as r from range(10000000) t(i)")
        con.execute("create temp table small as select 1 as x")
        assert con.execute("select sum(r) > 0 from kept.t").fetchone() == (True,)  # its blocks in the pool
        return con

    def held(con: duckdb.DuckDBPyConnection) -> int:
        return int(con.execute("select sum(memory_usage_bytes) from duckdb_memory()").fetchone()[0])

    kept = filled("kept")  # capped without `shed` (a dashboard's connection): its blocks stay for the next page
    before = held(kept)
    shed_cache(kept)
    assert held(kept) == before
    con = filled("shed", shed=True)
    before = held(con)
    assert before > 64 << 20
    shed_cache(con)
    assert held(con) < before / 2
    assert _setting(con, "memory_limit") == "286.1 MiB"
    assert con.execute("select count(*) from kept.t join small on true").fetchone() == (10_000_000,)
