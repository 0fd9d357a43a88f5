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
