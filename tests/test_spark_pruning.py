"""A date window on Spark reads only its days' partitions (attribution.spark.connection.connect_window, the
days of attribution.pruning.plan) and gives DuckDB's whole-store answer for the same window: the `sample`
scenario simulated small over its days (conftest.days_master, the store test_pruning.py reads too) with windows
cut at midnight, inside a day and relative to the newest request; Spark's plan prunes by the `day=` partition
(`PartitionFilters`) and lists only the window's files. The `lengths` command with a window runs on the sample
store itself (issue 20: the command's JSON on Spark is DuckDB's there), and so does the plan of the join (above
SMALL_STORE_ROWS the views read the files in each query). On the test session's one SparkSession (conftest's
spark_session)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SPARK_ARGS, SPARK_CONF, run_cli
from test_pruning import ANALYSES, INSIDE, MIDNIGHT, RELATIVE
from test_spark import _close, assert_same

from attribution import pruning
from attribution.analyses.common import resolve_window
from attribution.config import Settings
from attribution.layout import NULL_DAY, day_of
from attribution.store import Store


def _pruned(path: Path):
    """(store, snapshot, DuckDB over the whole store, a function window -> (Spark connection, window))."""
    from attribution.spark.connection import connect_window

    store = Store.open(path)
    settings = Settings(engine="spark")
    return store, store.snapshot(), store.connect(), lambda w: connect_window(store, settings, *w)


@pytest.fixture(scope="module")
def pruned(sample_store, spark_session):
    return _pruned(sample_store)


@pytest.fixture(scope="module")
def pruned_days(days_store, spark_session):
    return _pruned(days_store)


@pytest.mark.parametrize(("name", "window"), [("lengths", MIDNIGHT), ("concurrency", INSIDE),
                                              ("latency", RELATIVE)])
def test_the_pruned_analysis_on_spark_is_duckdbs_on_the_whole_store(pruned_days, name, window):
    _, _, duck, spark_window = pruned_days
    con, w = spark_window(window)
    assert w == resolve_window(duck, *window)  # (a relative window's anchor from the newest days alone)
    want, got = ANALYSES[name](duck, w), ANALYSES[name](con, w)
    assert list(got.tables) == list(want.tables)
    for table in want.tables:
        assert_same(got.tables[table], want.tables[table], f"{name}.{table}")
    assert got.notes == want.notes


def _files(con, view: str) -> list[str]:
    return sorted(con.spark.table(view).inputFiles())


def test_spark_reads_only_the_windows_partitions_by_a_partition_filter(pruned_days):
    store, snap, _, spark_window = pruned_days
    con, w = spark_window(MIDNIGHT)
    days = pruning.plan(store, snap, w.since, w.until, join_cache=False)
    assert days is not None and days["engine_steps"] == ("2026-05-05", "2026-05-07")
    first, last = days["engine_steps"]
    live = snap.live("engine_steps")
    kept = [p for p in live if day_of(p) == NULL_DAY or first <= str(day_of(p)) <= last]
    assert 0 < len(kept) < len(live)
    # the plan filters on the partition column, and only the kept days' files are scanned
    plan = con.spark.table("raw_engine_steps")._jdf.queryExecution().executedPlan().toString()
    assert "PartitionFilters: [" in plan and "day#" in plan.split("PartitionFilters: [", 1)[1].split("]")[0]
    assert sorted(f.rsplit("/", 1)[-1] for f in _files(con, "raw_engine_steps")) == sorted(
        p.rsplit("/", 1)[-1] for p in kept)
    # the requests too, although the commit's join is cached: Spark does not read the cache
    assert len(_files(con, "raw_requests")) < len(snap.live("requests"))
    # no window: every live file, no partition filter
    whole, none = spark_window((None, None))
    assert none.since is None and none.until is None
    assert len(_files(whole, "raw_engine_steps")) == len(live)
    assert "PartitionFilters: []" in whole.spark.table("raw_engine_steps")._jdf.queryExecution(
        ).executedPlan().toString()


# Spark's own defaults for compiling the queries (whole-stage code generation, Janino, falling back to
# interpreted expressions): on the sample store's ~100k requests (its join and Prometheus histograms) compiled code
# pays back; on the tests' small stores it does not (conftest.SPARK_CONF turns it off for the session)
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def test_the_lengths_command_on_spark_with_a_window_is_duckdbs(sample_store, spark_session, capsys):
    args = ["lengths", "--store", str(sample_store), "--since", MIDNIGHT[0], "--until", MIDNIGHT[1],
            "--format", "json"]
    code, duck, err = run_cli(capsys, *args)
    assert code == 0, err
    try:  # (the command's --spark-conf is set on the session: the tests' own settings back after it)
        code, spark, err = run_cli(capsys, *args, "--engine", "spark", *SPARK_ARGS,
                                   *(f"--spark-conf={k}={v}" for k, v in COMPILED.items()))
    finally:
        for key in COMPILED:
            spark_session.conf.set(key, SPARK_CONF[key])
    assert code == 0, err
    # (numbers equal to 1e-9 relative: Spark and DuckDB may sum in another order)
    assert '"lengths"' in duck and _close(json.loads(spark), json.loads(duck))


def test_the_cost_form_of_the_join_gives_the_files_rows(days_store, tmp_path):
    """stg_joined_requests.sql's Spark blocks (each side ranked by one window over every key, read once: Spark
    computes a CTE again at each use) are DuckDB SQL too and give the DuckDB text's rows: on the days store (every
    source kind of sample_logs: engines, the gateway, access lines) and on a store where keys appear twice on a
    side (the row with the most timings, else the first by file and line, wins)."""
    from attribution import queries
    assert "kept for cost" in queries.load("stg_joined_requests").doc
    con = Store.open(days_store).connect()
    order = "order by request_key nulls first, source, file, line"
    for extra in ("", _DUPLICATES):
        if extra:
            con.execute(f"create or replace temporary table requests as select * from requests {extra}")
        want = con.sql(f"select * from ({queries.load('stg_joined_requests').sql}) {order}").pl()
        got = con.sql(f"select * from ({queries.load('stg_joined_requests', 'spark').sql}) {order}").pl()
        assert want.height > 0 and got.equals(want)
    assert con.execute("select count(*) from (select request_key from requests where request_key is not null "
                       "group by request_key, source_kind having count(*) > 1)").fetchone()[0] > 0


# every keyed row again with one timing less and a later line: the kept row must be the original
_DUPLICATES = ("union all select * replace (null as ttft_s, line + 100000 as line) from requests "
               "where request_key is not null")


def test_the_join_on_spark_reads_each_side_of_the_requests_once(pruned):
    """The Spark text's plan scans the requests three times (engine side, gateway side, rows without a key),
    the DuckDB text's, transpiled, five (a CTE is planned again at each use; seven before the requests were
    distributed by key, an exchange Spark now reuses between identical uses)."""
    from attribution import queries

    _, _, _, spark_window = pruned
    con, _ = spark_window((None, None))
    # (a DataFrame another test of the session cached over the same files would be read instead: not a scan)
    con.spark.catalog.clearCache()
    # a scan's Location is cut at 100 characters by default: under xdist the store's path (.../popen-gw0/...)
    # is longer, and `data/requests/` would fall past the cut
    before = con.spark.conf.get("spark.sql.maxMetadataStringLength")
    con.spark.conf.set("spark.sql.maxMetadataStringLength", "100000")

    def scans(engine: str) -> int:
        plan = con.sql(queries.load("stg_joined_requests", engine), None)._jdf.queryExecution().executedPlan().toString()
        return len(re.findall(r"FileScan parquet [^\n]*data/requests/", plan))

    try:
        assert scans("spark") == 3
        assert scans("duckdb") == 5
    finally:
        con.spark.conf.set("spark.sql.maxMetadataStringLength", before)
