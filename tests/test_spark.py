"""`--engine spark`: the analyses on Spark give DuckDB's answers over the same store (issue 20). The test
session's one SparkSession (conftest's spark_session, shared with test_spark_ingest.py) over a small simulated
store; the JVM start is what costs. The transpiler and the Spark blocks written in DuckDB SQL too are checked
without Spark."""

from __future__ import annotations

import math
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import SPARK_ARGS, run_cli

from attribution import analyses, queries
from attribution.db import fetch
from attribution.spark.transpile import NotPortable, to_spark
from attribution.store import Store

# the analyses `--engine spark` runs
ANALYSES = ("lengths", "latency", "concurrency", "thresholds", "capacity", "compare", "memsplit")
QUERIES = Path(__file__).parent.parent / "queries"
# the query files with a `-- @spark` block (queries.load resolves it): one file per question for both engines
SPARK_BLOCKS = sorted(p.stem for p in QUERIES.glob("*.sql") if "-- @spark" in p.read_text())


def assert_same(a: pl.DataFrame, b: pl.DataFrame, where: str) -> None:
    """Exact same rows in the same order; floats equal to 1e-9 relative (Spark and DuckDB may sum in
    another order)."""
    assert a.columns == b.columns, f"{where}: columns {a.columns} != {b.columns}"
    assert a.height == b.height, f"{where}: {a.height} rows != {b.height}"
    for col in a.columns:
        for i, (x, y) in enumerate(zip(a[col].to_list(), b[col].to_list(), strict=True)):
            assert _close(x, y), f"{where}: {col} row {i}: {x!r} != {y!r}"


def _close(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(u, v) for u, v in zip(x, y, strict=True))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k]) for k in x)
    return x == y


def duck_schema(con):  # a relation's columns as DuckDB types them (the transpiler needs names only)
    return lambda name: dict(con.execute(f"select column_name, column_type from (describe {name})"
                                         ).fetchall())


# -- without Spark ----------------------------------------------------------------------------------------


def _steps_con(rows: list[tuple[str | None, str, int]]):
    """A DuckDB connection whose raw_engine_steps holds (deployment, kind, seconds) rows."""
    from datetime import UTC, datetime, timedelta

    import duckdb

    from attribution.schema import conform

    t0 = datetime(2026, 1, 5, tzinfo=UTC)
    frame = conform("engine_steps", pl.DataFrame(
        {"deployment": [r[0] for r in rows], "kind": [r[1] for r in rows],
         "ts": [t0 + timedelta(seconds=r[2]) for r in rows], "file": [f"f{r[1]}" for r in rows],
         "line": list(range(len(rows))), "running": [i % 3 for i in range(len(rows))]}))
    con = duckdb.connect()
    con.register("raw_engine_steps", frame.to_arrow())
    return con


def test_the_window_form_of_the_scrape_asof_keeps_the_same_scrapes():
    """stg_engine_steps.sql's Spark block (window functions for the ASOF joins) is DuckDB SQL too, and gives exactly
    the file's rows: a scrape within 120 s of a log line on either side is dropped, a log line at the same
    instant counts, a deployment without log lines or without a name keeps its scrapes."""
    logs = [("d1", "stats", t) for t in (0, 100, 1000)] + [("d3", "stats", 0)]
    scrapes = [("d1", "scrape", t) for t in (50, 300, 1000, 1110, 1121, 2000)] + [
        ("d2", "scrape", 10), (None, "scrape", 20), ("d3", "scrape", 121)]
    con = _steps_con(logs + scrapes)
    want = queries.run(con, "stg_engine_steps")
    got = fetch(con, queries.load("stg_engine_steps", "spark").sql)
    kept = want.filter(pl.col("kind") == "scrape").sort("deployment", "ts")
    assert [(r["deployment"], r["ts"].timestamp() % 86400) for r in kept.iter_rows(named=True)] == [
        (None, 20), ("d1", 300), ("d1", 1121), ("d1", 2000), ("d2", 10), ("d3", 121)]
    assert_same(got.sort(got.columns, nulls_last=True), want.sort(want.columns, nulls_last=True),
                "stg_engine_steps")


def test_the_scrape_intervals_count_log_lines_by_a_join():
    """scrape_intervals_by_deployment.sql (one text for both engines: the log line count as a join, not a
    correlated subquery in the aggregate, which Spark rejects): a deployment's log lines counted, one without
    log lines or without a name 0."""
    logs = [("d1", "stats", t) for t in (0, 100, 1000)]
    scrapes = [("d1", "scrape", t) for t in (50, 80, 140)] + [("d2", "scrape", t) for t in (10, 25)] + [
        (None, "scrape", 20), (None, "scrape", 30)]
    con = _steps_con(logs + scrapes)
    con.execute("create view engine_steps as select * from raw_engine_steps")
    got = queries.run(con, "scrape_intervals_by_deployment", since=None, until=None)
    assert [(r["deployment"], r["scrapes"], r["interval_s"], r["log_lines"]) for r in got.iter_rows(named=True)
            ] == [("d1", 3, 45.0, 3), ("d2", 2, 15.0, 0), (None, 2, 10.0, 0)]
    assert "scrape_intervals_by_deployment" not in SPARK_BLOCKS
    text = to_spark(queries.load("scrape_intervals_by_deployment").sql, duck_schema(con), "x").lower()
    assert "select count(*) from" not in text and "left join" in text


def test_each_spark_block_names_the_construct_that_does_not_transpile():
    """A query whose engines need different lines says why in its header: under `-- Not transpiled:` each DuckDB
    `construct` it names (in backticks) is in the file's DuckDB SQL, or `-- Engine:` says the Spark lines are
    kept for cost; no `.spark.sql` twin is left beside a file."""
    assert not list(QUERIES.glob("*.spark.sql"))
    assert {"stg_engine_steps", "stg_joined_requests", "memsplit_binding"} <= set(SPARK_BLOCKS)
    for name in SPARK_BLOCKS:
        header = queries.load(name).doc
        assert queries.load(name).sql != queries.load(name, "spark").sql
        if "Not transpiled:" not in header:
            assert "kept for cost" in header[header.find("Engine:"):], f"queries/{name}.sql: no reason for its blocks"
            continue
        reason = header[header.find("Not transpiled:"):]
        named = re.findall(r"`([^`]+)`", reason.split("\n\n")[0])
        duck = "\n".join(line for line in queries.load(name).sql.lower().splitlines() if not line.startswith("--"))
        assert named, f"queries/{name}.sql: the reason names no `construct`"
        for construct in named:
            assert construct.lower() in duck, f"queries/{name}.sql has no `{construct}`"


@pytest.fixture(scope="module")
def memsplit_con(sample_store):
    """A DuckDB connection to the sample store holding memsplit's int_memsplit_* tables (its starts and step
    frames: memsplit itself drops the step tables once read), made once for the two tests reading them."""
    from attribution.memsplit.diagnosis import Settings, load_starts, step_frames

    con = Store.open(sample_store).connect()
    load_starts(con, engine=None, deployments=None, since=None, until=None)
    step_frames(con, Settings())
    return con


def test_the_range_join_form_of_memsplit_binding_finds_the_same_episode_requests(memsplit_con):
    """memsplit_binding.sql's Spark block (each arrival joined to the merged episode span holding it, not an ASOF join
    to the latest one beginning before it) is DuckDB SQL too and gives the file's rows on sample_logs, whose
    vLLM starts have binding episodes with arrivals inside them."""
    con = memsplit_con
    want = queries.run(con, "memsplit_binding")
    got = fetch(con, queries.load("memsplit_binding", "spark").sql)
    assert want["episode_requests"].sum() > 0 and (want["episode_requests"] < want["requests"]).all()
    assert_same(got, want, "memsplit_binding")


def test_every_query_of_the_analyses_transpiles(memsplit_con):
    """Each file the analyses run has a Spark text: sqlglot's, of its Spark blocks where it has some (no
    DuckDB-only function left behind)."""
    con = memsplit_con  # with the int_memsplit_* tables memsplit_binding's form reads
    sel = analyses.select(con)
    sel.materialize("int_request_length_counts")
    con.execute("create or replace temp view int_length_counts as select * from int_request_length_counts")
    sel.materialize("int_concurrency_step_lines", deployments=[], max_gap_s=30.0)  # its columns
    sel.materialize("int_concurrency_step_hist")  # concurrency_sampled's form reads it
    sel.materialize("int_arrival_times", overall=True)  # arrival_profile_by_group's form reads it
    sel.materialize("concurrency_requests")  # int_concurrency_sweep's forms read it, the histogram's the sweep
    sel.materialize("int_concurrency_sweep", per_group=True)
    queries.materialize(con, "int_metric_series", kind="histogram", until=None)  # metric_increase*'s forms read it
    for name in ("stg_requests", "stg_joined_requests", "stg_ingest_line_shapes", "int_analysis_requests",
                 "window_newest_request", "window_newest_log_line", "engine_responses",
                 "engine_request_rows_by_deployment", "analysis_requests_in_window", "int_request_length_counts",
                 "length_stats_from_counts", "length_histogram_from_counts", "latency_by_group_and_prompt_bucket",
                 "latency_exact_by_deployment_model", "concurrency_sampled_timeseries", "int_concurrency_step_hist",
                 *SPARK_BLOCKS):
        q = queries.load(name, "spark")
        text = to_spark(q.sql, duck_schema(con), q.name).lower()
        for duck in ("quantile_cont", "epoch_us", "version_label", "group_label", "list_position", "unpivot (select",
                     " exclude ", " replace (", "by name", "asof", "timezone("):
            assert duck not in text, f"{name}: {duck} left in the Spark text"


def test_a_files_spark_text_is_kept_per_relations_columns():
    """to_spark's text is kept for the process (each connection transpiles the same files): the same SQL over
    relations of other columns is transpiled again (its stars expand to them), over the same columns it is the
    kept text."""
    sql = "select * exclude (b) from t"
    one = to_spark(sql, {"t": {"a": "int", "b": "int", "c": "string"}}.__getitem__, "x")
    two = to_spark(sql, {"t": {"a": "int", "b": "int", "d": "double"}}.__getitem__, "x")
    assert "`c`" in one and "`d`" not in one and "`d`" in two and "`c`" not in two
    assert to_spark(sql, {"t": {"a": "int", "b": "int", "c": "string"}}.__getitem__, "x") is one


def test_a_duckdb_form_without_a_spark_translation_is_named():
    with pytest.raises(NotPortable, match=r"queries/x\.sql.*quantile_disc"):
        to_spark("select quantile_disc(a, 0.5) as q from t", lambda _: {"a": "int"}, "x")


def test_engine_spark_without_pyspark_is_a_usage_error(sample_store, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # `import pyspark` raises ImportError
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    code, out, err = run_cli(capsys, "lengths", "--store", str(sample_store), "--engine", "spark")
    assert code == 2 and out == ""
    assert "pyspark" in err and len(err.strip().splitlines()) == 1


def test_engine_spark_without_java_is_a_usage_error(sample_store, capsys, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda _: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    code, _, err = run_cli(capsys, "latency", "--store", str(sample_store), "--engine", "spark")
    assert code == 2 and "Java" in err and len(err.strip().splitlines()) == 1


# every command that reads the store for an analysis and has no Spark path (each passes its own name to
# cli/app.connect; none may fall back to DuckDB silently)
NO_SPARK_PATH = ("analyze", "replay")
# the report's commands beyond ANALYSES with a Spark path (tests/test_spark.py's report test covers their analyses)
REPORT_COMMANDS = ("arrivals", "cache", "changes", "health", "metrics", "report")


@pytest.mark.parametrize("command", NO_SPARK_PATH)
def test_engine_spark_from_the_environment_is_refused_by_a_command_without_a_spark_path(
        sample_store, capsys, monkeypatch, tmp_path, command):
    """ATTRIBUTION_ENGINE=spark stops the command before any Spark session, naming it and the commands that
    have a Spark path."""
    monkeypatch.setenv("ATTRIBUTION_ENGINE", "spark")
    extra = ("--out", str(tmp_path / "r.md")) if command == "report" else ()
    code, out, err = run_cli(capsys, command, "--store", str(sample_store), *extra)
    assert code == 2 and out == ""
    assert f"`attribution {command}`" in err and "concurrency" in err and "thresholds" in err
    assert "ATTRIBUTION_ENGINE" in err


@pytest.mark.parametrize("command", REPORT_COMMANDS)
def test_the_report_commands_take_engine_spark(sample_store, capsys, monkeypatch, tmp_path, command):
    """`--engine spark` on a command of the report goes to Spark (here: the usage error of a missing pyspark),
    not to the refusal of a command without a Spark path."""
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    extra = ("--out", str(tmp_path / "r.md")) if command == "report" else ()
    code, out, err = run_cli(capsys, command, "--store", str(sample_store), "--engine", "spark", *extra)
    assert code == 2 and out == ""
    assert "pyspark" in err and "does not run on Spark" not in err


def test_the_transpiler_tells_a_list_from_a_string_and_unnests_with_subscripts():
    """len() of a list column is Spark's size(), of a string length(); `unnest(x) as v, generate_subscripts(x, 1)
    as i` is one generator of (value, 1-based index) pairs (Spark allows one per select)."""
    cols = {"t": {"h": "array<string>", "s": "string"}}
    text = to_spark("select len(h) as a, len(s) as b from t", cols.__getitem__, "x").lower()
    assert "size(`t`.`h`)" in text and "length(`t`.`s`)" in text
    text = to_spark("select s, unnest(h) as k, generate_subscripts(h, 1) as i from t", cols.__getitem__, "x").lower()
    assert "inline(transform(`t`.`h`, (_v, _i) -> struct(_v as k, _i + 1 as i)))" in text
    assert "generate_subscripts" not in text and "explode" not in text
    with pytest.raises(NotPortable, match="generate_subscripts"):
        to_spark("select generate_subscripts(h, 1) as i from t", cols.__getitem__, "x")
    # a Spark block's `distribute by` keeps its keys without the null order DuckDB's reader gives them
    text = to_spark("select s from t distribute by s, h", cols.__getitem__, "x").lower()
    assert text.endswith("distribute by `s`, `t`.`h`")


def test_a_query_spark_cannot_plan_with_remove_redundant_aliases_runs_without_it(monkeypatch):
    """The optimizer rule RemoveRedundantAliases stays on (without it a renamed column no longer names the
    partitioning its rows have, and the engine x gateway join shuffles them again); a query whose plan the rule
    breaks (Spark 4: PLAN_VALIDATION_FAILED) runs again without it, added to what the caller excluded, then
    restored, and is remembered; any other error passes through. (No JVM: a stand-in session.)"""
    from attribution.queries import Query
    from attribution.spark import connection

    rule, key = connection._REDUNDANT_ALIASES, "spark.sql.optimizer.excludedRules"

    class Conf(dict):
        def set(self, k: str, v: str) -> None:
            self[k] = v

    class Session:
        conf = Conf({key: "a.Rule"})

    con = connection.SparkConnection(Session())  # type: ignore[arg-type]
    monkeypatch.setattr(connection, "WITHOUT_ALIAS_RULE", set(connection.WITHOUT_ALIAS_RULE))
    seen: list[str] = []

    def run() -> int:
        seen.append(con.spark.conf.get(key))
        if rule not in seen[-1]:
            raise RuntimeError(f"[PLAN_VALIDATION_FAILED_RULE_IN_BATCH] Rule {rule} in batch ... an invalid plan")
        return 7

    assert con._planned(Query("q", "", "", ()), run) == 7
    assert seen == ["a.Rule", f"a.Rule,{rule}"] and con.spark.conf.get(key) == "a.Rule"
    assert "q" in connection.WITHOUT_ALIAS_RULE and "memsplit_demand" in connection.WITHOUT_ALIAS_RULE
    seen.clear()
    assert con._planned(Query("q", "", "", ()), run) == 7 and seen == [f"a.Rule,{rule}"]  # planned once now

    def other() -> int:
        raise RuntimeError("[DIVIDE_BY_ZERO]")

    with pytest.raises(RuntimeError, match="DIVIDE_BY_ZERO"):
        con._planned(Query("p", "", "", ()), other)
    assert "p" not in connection.WITHOUT_ALIAS_RULE and con.spark.conf.get(key) == "a.Rule"


def test_a_local_session_on_a_small_store_jits_with_the_quick_compiler_alone(sample_store, monkeypatch):
    """On a local master (the default) and a small store the JVM starts with C1 alone and the serial collector
    (a command's JVM is too short-lived for C2 to pay back there); not on a bigger store, not on a cluster's
    master, and the caller's own JVM options win. connect_settings decides by the snapshot's request rows."""
    from attribution.config import load_settings
    from attribution.spark import connection, session
    from attribution.spark.session import DEFAULT_CONF, session_conf

    quick = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    for master in (None, "local[2]", "local[*]"):
        conf = session_conf(master, {"spark.sql.shuffle.partitions": "3"}, quick_jit=True)
        assert conf["spark.driver.extraJavaOptions"] == quick and conf["spark.sql.shuffle.partitions"] == "3"
        assert {k: v for k, v in DEFAULT_CONF.items() if k != "spark.sql.shuffle.partitions"}.items() <= conf.items()
        assert "spark.driver.extraJavaOptions" not in session_conf(master)
    assert "spark.driver.extraJavaOptions" not in session_conf("spark://head:7077", quick_jit=True)
    assert session_conf("local[2]", {"spark.driver.extraJavaOptions": "-Xss4m"}, quick_jit=True
                        )["spark.driver.extraJavaOptions"] == "-Xss4m"
    asked: list[bool] = []

    def fake_session(master, conf, *, quick_jit=False):
        asked.append(quick_jit)
        raise RuntimeError("no Spark here")

    monkeypatch.setattr(session, "get_session", fake_session)
    store = Store.open(sample_store)  # 205,702 request rows
    for rows, want in ((300_000, True), (205_702, True), (205_701, False)):
        monkeypatch.setattr(connection, "QUICK_JIT_ROWS", rows)
        with pytest.raises(RuntimeError):
            connection.connect_settings(store, store.snapshot(), load_settings({}))
        assert asked[-1] is want


def test_the_dashboard_under_engine_spark_says_it_reads_with_duckdb(monkeypatch):
    """The dashboard has no Spark path: under engine = spark it says so in one line (CLI and sidebar)."""
    from attribution.config import load_settings
    from attribution.spark import duckdb_only_note

    assert duckdb_only_note(load_settings({}), "the dashboard") is None
    monkeypatch.setenv("ATTRIBUTION_ENGINE", "spark")
    note = duckdb_only_note(load_settings({}), "the dashboard")
    assert note is not None and "\n" not in note and "DuckDB" in note and "ATTRIBUTION_ENGINE" in note


# -- on Spark ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_sample(tmp_path_factory) -> Path:
    """The `sample` scenario simulated small (vLLM before/after, SGLang, the LiteLLM gateway and Prometheus
    scrapes, 400 requests) and ingested: every source kind the views join, at a size Spark runs quickly."""
    from attribution.ingest import ingest
    from attribution.simulate.output import simulate_to_dir

    root = tmp_path_factory.mktemp("spark")
    truth = simulate_to_dir("sample", root / "logs", requests=400, seed=5)
    ingest([str(root / "logs")], root / "store", year=truth["year"], tz=truth["tz"])
    return root / "store"


@pytest.fixture(scope="module")
def both(small_sample, reports):
    """A DuckDB connection to the small store and the Spark connection the Spark report made over it (the
    store's views, its workload map: one connection per store as in a command; a second one on the session
    would replace the first's views, session-wide, and plan and keep them again)."""
    spark = reports["spark_con"]
    assert queries.spark_connection(spark) is not None and spark.has("joined_requests")
    return Store.open(small_sample).connect(), spark


def _analysis(name: str, con):
    if name == "thresholds":  # the built-in catalogue over every request, as the command runs it
        from attribution.thresholds import load_catalogue, thresholds

        return thresholds(analyses.select(con, by="all"), load_catalogue([], []))
    if name == "capacity":  # as the command: each pod as a whole, with a GPU price (the cost table)
        return analyses.capacity(analyses.select(con, by="all"), gpu_hour_cost=2.0)
    if name == "compare":  # the store's two vLLM versions; on Spark the bootstrap is drawn on executors
        from attribution.compare import compare

        return compare(analyses.select(con, by="all"), by="version", before="0.15.1", after="0.20.1",
                       resamples=200)
    if name == "memsplit":  # each engine start's split from its own logged model, with the what-if replay
        from attribution.memsplit import memsplit

        return memsplit(con, None)
    return getattr(analyses, name)(analyses.select(con))


# The analyses the report asks in the command's form (its window, seven days back from the newest request,
# holds the whole small store; the report test runs the what-if, as `memsplit` does by default): their Spark
# answer is the report's, each query run once in the suite; the DuckDB answer is the command's own.
FROM_THE_REPORT = ("lengths", "latency", "thresholds", "memsplit")


@pytest.mark.parametrize("name", ANALYSES)
def test_the_analysis_on_spark_is_duckdbs(both, reports, name):
    duck, spark = both
    want = _analysis(name, duck)
    got = getattr(reports["spark"][1], name) if name in FROM_THE_REPORT else _analysis(name, spark)
    assert list(got.tables) == list(want.tables)
    for table in want.tables:
        assert_same(got.tables[table], want.tables[table], f"{name}.{table}")
    assert got.notes == want.notes


def test_a_row_condition_and_aggregate_columns_on_spark_are_duckdbs(both):
    """queries.run_columns' `where` (a DuckDB condition with its own parameters, NULL ones too) and expression
    columns run on Spark as the file's query inside another, transpiled: the sweep's one-deployment fetches
    (NULL deployment included), its aggregate bounds and memsplit's arrival count give DuckDB's rows."""
    from attribution.analyses import sweep

    duck, spark = both
    analyses.select(duck, by="all")
    analyses.select(spark, by="all")
    first, last = queries.inline(duck, "select min(t_arrival), max(t_end) from int_analysis_requests").row(0)
    mid = datetime.fromtimestamp((first + last) / 2e6, UTC)
    for since, until in ((None, None), (mid, None), (None, mid)):
        deployments = sweep.request_deployments(duck, since, until)
        every = sweep.interval_requests(spark, since, until, False, kv=False)  # (Spark's order: DuckDB's may differ)
        assert deployments and set(every["deployment"]) == set(deployments)
        assert len(deployments) > 1 or since or until  # (the whole store: every deployment)
        for dep in [*deployments, None]:
            got = sweep.deployment_requests(spark, since, until, dep, sweep.TIME_COLUMNS)
            assert_same(got, every.filter(pl.col("deployment").eq_missing(dep)).select(sweep.TIME_COLUMNS), str(dep))
            assert_same(got.sort(sweep.TIME_COLUMNS),
                        sweep.deployment_requests(duck, since, until, dep, sweep.TIME_COLUMNS).sort(sweep.TIME_COLUMNS),
                        str(dep))
        assert sweep.request_bounds(spark, since, until) == sweep.request_bounds(duck, since, until)
        lo, hi = sweep.epoch_us(mid), None
        counts = [queries.run_columns(con, "concurrency_requests", ["count(*) as n", "min(t_end) as first_end"],
                                      since=since, until=until,
                                      where=("($lo::bigint is null or t_arrival >= $lo) and "
                                             "($hi::bigint is null or t_arrival < $hi)", {"lo": lo, "hi": hi}))
                  for con in (duck, spark)]
        assert counts[0]["n"].item() > 0 or since is None
        assert counts[1].rows() == counts[0].rows()


def test_the_window_sweep_on_spark_is_the_numpy_sweep(spark_session):
    """The concurrency sweep as Spark window functions (attribution.analyses.sweep_sql) gives the NumPy sweep's
    stats and series on the adversarial requests of tests/test_sweep_sql.py (ties at one instant, zero-length
    requests, a deployment with one request, unknown queue times), per group and in a window cutting them:
    KV tokens too, exactly (Spark's running sums add in time order, as NumPy's)."""
    from test_sweep_sql import ADVERSARIAL, PERCENTILES, T0, assert_same_sweep, requests

    from attribution.analyses.common import frames_connection
    from attribution.analyses.exact import exact_frames
    from attribution.analyses.sweep_sql import sweep_frames
    from attribution.db import fetch
    from attribution.spark.connection import SparkConnection

    duck = frames_connection(requests(ADVERSARIAL))
    spark = spark_session
    spark.conf.set("spark.sql.ansi.enabled", "false")  # as attribution.spark.connection.connect
    con = SparkConnection(spark)
    for window in ({}, {"since": T0 + timedelta(seconds=1), "until": T0 + timedelta(seconds=4.5)}):
        sel = analyses.select(duck, by="workload", **window)
        con.register("int_analysis_requests", fetch(duck, "select * from int_analysis_requests"))
        want = exact_frames(sel, per_group=True, timeseries=True, bucket_s=1, percentiles=PERCENTILES)
        got = sweep_frames(con, sel.window.since, sel.window.until, per_group=True, timeseries=True, bucket_s=1,
                           percentiles=PERCENTILES)
        assert got[0].height > 0
        assert_same_sweep(want, got)


def test_a_frame_registered_again_with_the_same_rows_keeps_its_view(spark_session):
    """SparkConnection.register: the same rows again under a name leave its view (and the answers kept over it)
    as they are; other rows, or the same rows after another definition of the name, make it anew."""
    from attribution.spark.connection import SparkConnection

    con = SparkConnection(spark_session)
    one, other = pl.DataFrame({"a": [1, 2], "b": ["x", None]}), pl.DataFrame({"a": [1, 3], "b": ["x", None]})
    con.register("t_registered", one)
    first = con.defined("t_registered")
    con.register("t_registered", pl.DataFrame({"a": [1, 2], "b": ["x", None]}))
    assert con.defined("t_registered") == first
    con.register("t_registered", other)
    assert con.defined("t_registered") != first and con.rows("t_registered").equals(other)
    con.register("t_registered", one)
    again = con.defined("t_registered")
    con.view("t_registered", spark_session.sql("select 5 as a, 'y' as b"))
    con.register("t_registered", one)
    assert con.defined("t_registered") not in (first, again) and con.rows("t_registered").equals(one)
    con.drop("t_registered")


def test_quantile_cont_on_spark_is_duckdbs_and_sparks_own_percentile(spark_session):
    """quantile_cont on Spark (each group's values collected and sorted once: attribution.spark.transpile's
    _quantile) gives DuckDB's quantiles and exactly the doubles of Spark's `percentile`, which it replaces: a
    list of fractions (0 and 1 included) and a single one, doubles with ties and NULLs, a BIGINT column, groups
    of one and two values and a group of NULLs alone (NULL); under FILTER it stays `percentile`."""
    import duckdb
    import numpy as np

    from attribution.spark.connection import SparkConnection

    rng = np.random.default_rng(3)
    xs = [*np.round(rng.gamma(2.0, 0.3, 60), 3).tolist(), None, None, 0.7, None, 1.25, 3.5]
    frame = pl.DataFrame({"g": ["a"] * 60 + ["a", "b", "b", "c", "d", "d"], "x": xs,
                          "n": [int(v * 1000) if v is not None else 5 for v in xs]})
    sql = ("select g, quantile_cont(x, [0.0, 0.1, 0.5, 0.9, 0.999, 1.0]) as q, quantile_cont(x, 0.25) as m, "
           "quantile_cont(n, [0.5, 0.75]) as nq, quantile_cont(x, 0.5) filter (where n > 800) as f "
           "from t group by g order by g")
    text = to_spark(sql, {"t": {"g": "string", "x": "double", "n": "bigint"}}.__getitem__, "x")
    assert text.lower().count("collect_list(") == 3 and text.lower().count("percentile(") == 1
    duck = duckdb.connect()
    duck.register("t", frame.to_arrow())
    SparkConnection(spark_session).register("t", frame)
    got = pl.from_arrow(spark_session.sql(text).toArrow())
    assert isinstance(got, pl.DataFrame) and got["q"][2] is None and got["q"][1].to_list() == [0.7] * 6
    assert_same(got, fetch(duck, sql), "quantile_cont")
    own = spark_session.sql("select g, percentile(x, array(0.0, 0.1, 0.5, 0.9, 0.999, 1.0)) as q, "
                            "percentile(x, 0.25) as m, percentile(n, array(0.5, 0.75)) as nq, "
                            "percentile(x, 0.5) filter (where n > 800) as f from t group by g order by g")
    assert [tuple(r) for r in spark_session.sql(text).collect()] == [tuple(r) for r in own.collect()]


def test_the_bootstrap_drawn_on_executors_is_the_in_process_one(spark_session, monkeypatch):
    # compare --engine spark draws its resamples on the executors, block by block, from each block's own
    # stream: the same draws as in-process, whatever the number of tasks
    import numpy as np
    from test_compare_resample import _columns_and_asks

    from attribution.compare.resample import local_draws
    from attribution.spark import bootstrap

    cols, asks = _columns_and_asks(2)
    want = local_draws(cols, asks)
    for per_core in (1, 5):  # 2 and 10 tasks on local[2]: other slices of the (ask, block) items
        monkeypatch.setattr(bootstrap, "TASKS_PER_CORE", per_core)
        got = bootstrap.SparkDraws(spark_session)(cols, asks)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def _plain_report(text: str) -> dict:
    """A report's JSON without what names the engine (the settings it ran with)."""
    import json

    doc = json.loads(text)
    for key in ("engine", "spark_master", "spark_conf"):
        doc["settings"].pop(key, None)
        doc["settings"]["from"].pop(key, None)
    return doc


@pytest.fixture(scope="module")
def reports(small_sample, spark_session) -> dict[str, tuple[str, object]]:
    """`attribution report --format json --whatif` on DuckDB and with `--engine spark` (on the session's
    SparkSession): each engine's JSON and the analyses it was made of (build.Inputs). The one Spark report of
    the suite: each query of its analyses runs once."""
    from typer.testing import CliRunner

    from attribution.cli import app
    from attribution.report import build
    from attribution.spark import connection
    from attribution.spark.connection import SparkConnection

    inputs: list = []
    run = build.run_analyses
    args = ["report", "--store", str(small_sample), "--out", "-", "--format", "json", "-q", "--whatif"]
    out: dict = {"materialized": [], "computed": []}
    materialize, sql = SparkConnection.materialize, SparkConnection.sql
    connect = connection.connect_settings

    def connected(*a, **k):  # the report's Spark connection, for the analyses' tests (`both`)
        out["spark_con"], out["keep"] = connect(*a, **k), k.get("keep")
        return out["spark_con"]

    def counted(con, q, params, table):  # each query the Spark report computes into a table
        out["materialized"].append((q.name, params))
        materialize(con, q, params, table)

    def computed(con, q, params):  # each query Spark plans and runs (fetched or materialized)
        out["computed"].append((q.name, con._answer_key(q, params)))
        return sql(con, q, params)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(build, "run_analyses", lambda *a, **k: inputs.append(run(*a, **k)) or inputs[-1])
        m.setattr(SparkConnection, "materialize", counted)
        m.setattr(SparkConnection, "sql", computed)
        m.setattr(connection, "connect_settings", connected)
        for engine, extra in (("duck", []), ("spark", ["--engine", "spark", *SPARK_ARGS])):
            res = CliRunner().invoke(app, [*args, *extra])
            assert res.exit_code == 0, (res.output, res.exception)
            out[engine] = (res.stdout, inputs[-1])
    return out


def test_the_report_on_spark_selects_each_window_and_grouping_once(reports):
    """The Spark report's analyses ask eight times for five selections here (the window by workload, by version
    and overall, the previous window by workload, the memory split's period): each is computed once
    (analyses.common._prepare keeps them on the connection, build.SPARK_SELECTIONS)."""
    selections = [tuple(sorted(params.items())) for name, params in reports["materialized"]
                  if name == "int_analysis_requests"]
    assert len(selections) == len(set(selections)) == 5


def test_the_report_on_spark_keeps_the_requests_join_at_any_size(small_sample, reports, monkeypatch):
    """The report's analyses read joined_requests in about fifteen queries: its connection keeps the join once
    read whatever the store's size (REPORT_KEEPS), where a command's connection on a store above
    SMALL_STORE_ROWS reads the files in each query; a small store keeps every staged view."""
    from attribution.spark import connection

    snap = Store.open(small_sample).snapshot()
    assert connection.kept_views(snap) == connection.kept_views(snap, connection.REPORT_KEEPS) == connection.KEPT_VIEWS
    monkeypatch.setattr(connection, "SMALL_STORE_ROWS", 0)
    assert connection.kept_views(snap) == ()
    assert connection.kept_views(snap, connection.REPORT_KEEPS) == ("joined_requests",)
    assert reports["keep"] == connection.REPORT_KEEPS


def test_the_report_on_spark_computes_each_answer_once(reports):
    """The Spark report's analyses ask some queries again over the same views and parameters (the engine starts:
    thresholds, compare, changes; the window's scrape intervals: concurrency, thresholds, memsplit; the window
    anchor twice; a selection's concurrency requests: the sweep materializes them, capacity's estimates fetch
    them; the thresholds' requests, which the changes' compare reads after registering the same engine starts
    again: SparkConnection.register keeps a view of the same rows as it is): the connection keeps each answer
    (SparkConnection.fetch), so Spark computes each once."""
    from collections import Counter

    computed = reports["computed"]
    times = Counter(key for _, key in computed if key is not None)
    assert not [name for name, key in computed if key is not None and times[key] > 1]
    names = Counter(name for name, _ in computed)
    assert names["engine_starts"] == names["scrape_intervals_by_deployment"] == names["window_newest_request"] == 1
    assert names["concurrency_requests"] == 2  # (the window's, then the memory split's period)
    assert names["int_threshold_requests"] == 1
    assert all(key is not None for name, key in computed if name != "<inline>")


def test_the_report_on_spark_is_duckdbs(reports):
    """`attribution report --engine spark --format json`: every analysis the report is made of gives DuckDB's
    tables (same rows and order, numbers to 1e-9 relative) and notes, and the JSON is DuckDB's (its numbers are
    rounded to 6 significant digits: equal to one unit of the last, where a sum in another order falls on
    the other side of a rounding), the same findings and actions; only the settings' engine differs."""
    (want, duck_in), (got, spark_in) = reports["duck"], reports["spark"]
    assert duck_in is not spark_in and duck_in.memsplit.tables["whatif"].height > 0  # (the what-if ran)
    for name, value in vars(duck_in).items():
        other = getattr(spark_in, name)
        if isinstance(value, pl.DataFrame):
            assert_same(other, value, name)
        elif isinstance(value, analyses.Analysis):
            assert list(other.tables) == list(value.tables), name
            for table in value.tables:
                assert_same(other.tables[table], value.tables[table], f"{name}.{table}")
            assert other.notes == value.notes, name
    spark, duck = _plain_report(got), _plain_report(want)
    assert json_settings_engine(got) == "spark" and json_settings_engine(want) == "duckdb"
    assert [s["id"] for s in spark["sections"]] == [s["id"] for s in duck["sections"]]
    assert spark["found"] == duck["found"] and spark["actions"] == duck["actions"]
    assert not (diff := _first_difference(spark, duck)), diff


def json_settings_engine(text: str) -> str:
    import json

    return json.loads(text)["settings"]["engine"]


def _first_difference(a: object, b: object, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())}"
        return next((d for k in a if (d := _first_difference(a[k], b[k], f"{path}.{k}"))), "")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b, strict=True))
                     if (d := _first_difference(x, y, f"{path}[{i}]"))), "")
    return "" if _close(a, b) or _same_rounded(a, b) else f"{path}: {a!r} != {b!r}"


def _same_rounded(x: object, y: object) -> bool:
    """Two numbers of the report's JSON (6 significant digits) one unit of the last digit apart at most."""
    if not (isinstance(x, float) and isinstance(y, float)) or not (math.isfinite(x) and math.isfinite(y)):
        return False
    top = max(abs(x), abs(y))
    return top > 0 and abs(x - y) <= 10 ** (math.floor(math.log10(top)) - 5) * (1 + 1e-9)
