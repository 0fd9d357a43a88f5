"""The query runner's one error behaviour (attribution.queries): a missing query file or parameter and DuckDB
failing on a shipped file are bugs (exit 1, the file named); DuckDB failing on the user's own SQL is a usage
error (exit 2); running out of memory passes through unchanged."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from conftest import run_cli

from attribution import queries
from attribution.errors import UsageError
from attribution.queries import QueryBug


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    c.execute("create table ingest_errors as select * from (values ('a.log', 'vllm', 'bad time', 3), "
              "('a.log', 'vllm', 'bad time', 9), ('b.log', 'sglang', 'cut', 1)) t(file, source, reason, line)")
    yield c
    c.close()


def test_a_query_file_runs_and_lands_in_a_temp_table_of_its_name(con):
    rows = queries.run(con, "ingest_errors_by_reason", since=None)  # a parameter it does not name is ignored
    assert rows.to_dicts()[0] == {"file": "a.log", "source": "vllm", "reason": "bad time", "count": 2,
                                  "first_line": 3}
    queries.materialize(con, "ingest_errors_by_reason")
    kept = con.execute("select table_name from duckdb_tables() where temporary").fetchall()
    assert kept == [("ingest_errors_by_reason",)]
    queries.materialize(con, "ingest_errors_by_reason", "errs")
    assert con.execute("select sum(count) from errs").fetchone() == (3,)


def test_a_query_folded_batch_by_batch_gives_its_rows_and_an_empty_one_its_columns(con):
    """run_folded streams the rows in batches of at most `batch_rows` through `fold`; a query without rows
    still gives `fold` one empty batch with the columns' types."""
    cols = ["file", "first_line"]
    whole = queries.run_columns(con, "ingest_errors_by_reason", cols, since=None)
    parts = queries.run_folded(con, "ingest_errors_by_reason", cols, lambda df: df, batch_rows=1, since=None)
    assert len(parts) == whole.height == 2 and all(p.height == 1 for p in parts)
    assert pl.concat(parts).sort(cols).equals(whole.sort(cols))
    con.execute("delete from ingest_errors")
    empty = queries.run_folded(con, "ingest_errors_by_reason", cols, lambda df: df.schema, since=None)
    assert empty == [whole.schema]


def test_a_missing_query_file_is_a_bug_naming_it(con):
    for call in (lambda: queries.run(con, "no_such_question"),
                 lambda: queries.materialize(con, "no_such_question"),
                 lambda: queries.create_view(con, "no_such_question")):
        with pytest.raises(QueryBug, match=r"queries/no_such_question\.sql") as err:
            call()
        assert err.value.exit_code == 1


def test_a_missing_parameter_is_a_bug_naming_the_file_and_parameter(con):
    for call in (lambda: queries.run(con, "log_gaps", since=None, until=None),
                 lambda: queries.materialize(con, "log_gaps", since=None, until=None)):
        with pytest.raises(QueryBug, match=r"queries/log_gaps\.sql needs parameters: min_gap_s") as err:
            call()
        assert err.value.exit_code == 1
    assert not con.execute("select * from duckdb_tables() where temporary").fetchall()


def test_duckdb_failing_on_a_query_file_is_a_bug_naming_the_file():
    bare = duckdb.connect(":memory:")  # no ingest_errors relation: the file's SQL cannot bind
    with pytest.raises(QueryBug, match=r"queries/ingest_errors_by_reason\.sql failed: CatalogException") as err:
        queries.run(bare, "ingest_errors_by_reason")
    assert err.value.exit_code == 1 and isinstance(err.value.__cause__, duckdb.CatalogException)
    with pytest.raises(QueryBug, match=r"queries/stg_requests\.sql failed"):
        queries.create_view(bare, "stg_requests", "requests")
    with pytest.raises(QueryBug, match=r"queries/int_analysis_requests\.sql failed"):
        queries.materialize(bare, "int_analysis_requests", since=None, until=None, by="workload")


def test_running_out_of_memory_is_not_called_a_bug(con, monkeypatch):
    def oom(*_a, **_k):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    monkeypatch.setattr(queries, "fetch", oom)
    monkeypatch.setattr(queries, "frame", oom)  # user_sql reads its relation through db.frame
    with pytest.raises(duckdb.OutOfMemoryException):
        queries.run(con, "ingest_errors_by_reason")
    with pytest.raises(duckdb.OutOfMemoryException):
        queries.user_sql(con, "select 1")


def test_the_users_own_sql_failing_is_a_usage_error(con):
    assert queries.user_sql(con, "select count(*) as n from ingest_errors")["n"].to_list() == [3]
    with pytest.raises(UsageError, match=r"^query failed: Catalog Error: Table with name nope does not exist") \
            as err:
        queries.user_sql(con, "select * from nope")
    assert err.value.exit_code == 2


def test_the_users_intervals_come_back_as_text_not_an_internal_error(con):
    """Polars cannot import DuckDB's INTERVAL (top level or nested): those columns come back as DuckDB's text,
    the others untouched."""
    df = queries.user_sql(con, 'select interval 1 day as d, [interval 2 hour] as "l""q", 7 as n')
    assert df.columns == ["d", 'l"q', "n"]
    assert df.row(0) == ("1 day", "['02:00:00']", 7)


def test_a_query_file_without_its_header_is_a_bug(monkeypatch, tmp_path):
    (tmp_path / "headless.sql").write_text("select 1 as x\n")
    monkeypatch.setattr(queries.resources, "files", lambda _pkg: tmp_path)
    queries.load.cache_clear()
    try:
        with pytest.raises(QueryBug, match=r"queries/headless\.sql:1: the file must open with a `-- Question:`"):
            queries.load("headless")
    finally:
        queries.load.cache_clear()


def test_engine_blocks_keep_each_engines_lines_and_a_misplaced_marker_is_a_bug(monkeypatch, tmp_path):
    """One file per question: `-- @duckdb` ... `-- @spark` ... `-- @end` around the lines that differ, either
    engine's block alone too; the parameters are those of the engine's own text."""
    head = "-- Question: q?\n-- Grain: g.\n-- Parameters: $a, $b.\n-- Columns: x.\n"
    (tmp_path / "two.sql").write_text(head + "with final as (\n-- @duckdb\n    select $a as x\n-- @spark\n"
                                      "    select $b as x\n-- @end\n)\n-- @spark\n-- spark only\n-- @end\n"
                                      "select * from final\n")
    bad = {"end_alone": "select 1 as x\n-- @end\n", "spark_twice": "-- @spark\n-- @spark\n-- @end\n",
           "duckdb_after_spark": "-- @spark\n-- @duckdb\n-- @end\n", "unclosed": "  -- @duckdb\nselect 1\n"}
    for name, body in bad.items():
        (tmp_path / f"{name}.sql").write_text(head + body)
    monkeypatch.setattr(queries.resources, "files", lambda _pkg: tmp_path)
    queries.load.cache_clear()
    try:
        duck, spark = queries.load("two"), queries.load("two", "spark")
        assert duck.sql == head + "with final as (\n    select $a as x\n)\nselect * from final\n"
        assert spark.sql == head + "with final as (\n    select $b as x\n)\n-- spark only\nselect * from final\n"
        assert (duck.params, spark.params, duck.doc) == (("a",), ("b",), spark.doc)
        for name, line in (("end_alone", 6), ("spark_twice", 6), ("duckdb_after_spark", 6), ("unclosed", 5)):
            with pytest.raises(QueryBug, match=rf"queries/{name}\.sql:{line}: `-- @"):
                queries.load(name)
        with pytest.raises(QueryBug, match="no engine 'polars'"):
            queries.load("two", "polars")
    finally:
        queries.load.cache_clear()


def test_the_cli_exits_2_on_bad_user_sql_and_1_on_a_failing_query_file(capsys, sample_store, monkeypatch):
    code, out, err = run_cli(capsys, "query", "select nope from requests", "--store", str(sample_store))
    assert code == 2 and not out and "error: query failed: Binder Error" in err
    code, out, _ = run_cli(capsys, "query", "select count(*) as n from ingest_files", "--store", str(sample_store),
                           "--format", "json")
    assert code == 0 and '"n"' in out

    real = queries.load

    def broken(name):  # one shipped file gone wrong: what a user sees
        q = real(name)
        return q if name != "ingest_errors_by_reason" else queries.Query(
            q.name, q.sql.replace("from ingest_errors", "from ingest_errorz"), q.doc, q.params)

    monkeypatch.setattr(queries, "load", broken)
    code, _, err = run_cli(capsys, "status", "--store", str(sample_store))
    assert code == 1
    assert "error: queries/ingest_errors_by_reason.sql failed: CatalogException" in err
    assert "a bug: please report it" in err


