"""`attribution export --duckdb FILE`: every table of the store in one DuckDB file, rows equal to the store's
views, written atomically (a failed export leaves no partial file behind)."""

from __future__ import annotations

import duckdb
from conftest import litellm_line, run_cli

from attribution.db import fetch
from attribution.store import Store


def test_export_writes_every_table_with_the_stores_rows(capsys, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "litellm.jsonl").write_text("".join(
        litellm_line(i, f"team-{i % 3}", i, i + 0.2, i + 1.5, 100 + i, 10 + i) + "\n" for i in range(40)))
    store = tmp_path / "store"
    assert run_cli(capsys, "ingest", str(logs), "--store", str(store))[0] == 0
    out = tmp_path / "traffic.duckdb"
    out.write_text("an older export")  # replaced
    code, _, err = run_cli(capsys, "export", "--duckdb", str(out), "--store", str(store))
    assert code == 0 and "requests 40" in err, err
    assert not (tmp_path / "traffic.duckdb.partial").exists()

    con = Store.open(store).connect()
    with duckdb.connect(str(out), read_only=True) as db:
        tables = {r[0] for r in db.execute("select table_name from duckdb_tables()").fetchall()}
        assert {"requests", "access_log", "engine_steps", "ingest_files", "ingest_errors"} <= tables
        for table in ("requests", "access_log", "engine_steps", "ingest_errors"):
            exported = fetch(db, f"select * from {table}")
            assert exported.height == (40 if table == "requests" else 0), table
            mine = fetch(con, f"select * from {table}")
            assert exported.sort(exported.columns).equals(mine.sort(mine.columns)), table


def test_export_onto_a_directory_is_a_usage_error(capsys, tmp_path):
    store = tmp_path / "store"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "l.jsonl").write_text(litellm_line(1, "a", 0, 0.1, 1, 10, 5) + "\n")
    assert run_cli(capsys, "ingest", str(tmp_path / "logs"), "--store", str(store))[0] == 0
    code, _, err = run_cli(capsys, "export", "--duckdb", str(tmp_path), "--store", str(store))
    assert code == 2 and "is a directory" in err and "Traceback" not in err
