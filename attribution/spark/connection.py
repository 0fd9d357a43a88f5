"""A store snapshot as Spark temporary views, named and shaped as attribution.views makes them for DuckDB
(`raw_<table>`, the public tables, `ingest_files`, `workload_map`, `joined_requests`), and the handle the
query runner (attribution.queries) runs queries/*.sql through when the engine is Spark. Data stays in Spark:
only a query's final rows come back to the driver, as Arrow."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from attribution import layout
from attribution.schema import TABLES, empty
from attribution.spark.transpile import relations, to_spark

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from attribution.analyses.common import Window
    from attribution.config import Settings
    from attribution.pruning import Days
    from attribution.queries import Query
    from attribution.store import Snapshot, Store

T = TypeVar("T")


class SparkConnection:
    """Spark temporary views over one store snapshot (or over frames); `run`, `materialize` and `create_view`
    are what attribution.queries calls for a query file."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.commit = 0  # the store commit the views read
        self.scrapes = False  # the store holds Prometheus scrapes (attribution.views.scrapes_stored)
        self._schemas: dict[str, dict[str, str]] = {}
        self._defined: dict[str, int] = {}  # view -> serial of its latest definition
        self._keep: dict[str, DataFrame] = {}  # views computed and kept at their first read (keep_when_read)
        # a query's answer kept for the connection (see _answer_key): rows fetched (the last KEEP_ANSWERS, of at
        # most KEEP_ANSWER_ROWS rows each), and the table each materialized answer went to (its definition then)
        self._answers: OrderedDict[tuple[Any, ...], pl.DataFrame] = OrderedDict()
        self._tables: dict[tuple[Any, ...], tuple[str, int]] = {}
        self._registered: dict[str, pa.Table] = {}  # view -> the rows `register` made it of (its definition now)

    # -- relations
    def schema(self, name: str) -> dict[str, str]:
        if name not in self._schemas:
            self._schemas[name] = {f.name: f.dataType.simpleString() for f in self.spark.table(name).schema}
        return self._schemas[name]

    def defined(self, name: str) -> int:
        """Which definition of the view `name` queries read now (a new number each time it is defined again;
        a view keeps the plan it was defined with, so the views it reads cannot change it)."""
        return self._defined.get(name, 0)

    def has(self, name: str) -> bool:
        return bool(self.spark.catalog.tableExists(name))

    def view(self, name: str, df: DataFrame) -> None:
        df.createOrReplaceTempView(name)
        self._registered.pop(name, None)
        self._schemas.pop(name, None)
        self._defined[name] = next(_DEFINITIONS)
        self._keep.pop(name, None)

    def keep_when_read(self, views: dict[str, DataFrame]) -> None:
        """Each of `views` (name -> its frame) computed once and kept (localCheckpoint, as `materialize`) when a
        query first reads it: a view no query of the command reads is never computed."""
        self._keep.update(views)

    def _reading(self, relations: tuple[str, ...]) -> None:
        # a view kept when read (keep_when_read): its rows now, under its name (the same rows, so the same
        # definition for whatever was selected from it: `defined` does not change)
        for name in relations:
            if (df := self._keep.pop(name, None)) is not None:
                df.localCheckpoint(eager=True).createOrReplaceTempView(name)

    def _answer_key(self, q: Query, params: dict[str, Any] | None) -> tuple[Any, ...] | None:
        """What a query's answer on this connection depends on: its text, its parameters and the definition
        of each relation it reads (a view keeps the plan it was defined with, so the views those read are in
        it); None when it reads a relation this connection did not define (its answer is not kept)."""
        read = relations(q.sql)
        if any(name not in self._defined for name in read):
            return None
        return q.sql, repr(sorted((params or {}).items())), tuple((name, self._defined[name]) for name in read)

    def _kept_answer(self, key: tuple[Any, ...] | None, columns: list[str] | None) -> pl.DataFrame | None:
        """The rows of an answer this connection computed before (fetched, or materialized into a table that
        still holds it), else None."""
        if key is None:
            return None
        if (rows := self._answers.get((key, tuple(columns or ())))) is not None:
            self._answers.move_to_end((key, tuple(columns or ())))
            return rows
        table, definition = self._tables.get(key, ("", 0))
        if not table or self._defined.get(table) != definition:
            return None
        df = self.spark.table(table)
        got = pl.from_arrow((df.select(*columns) if columns else df).toArrow())
        assert isinstance(got, pl.DataFrame)
        return got

    def register(self, name: str, frame: pl.DataFrame | pa.Table) -> None:
        """A Polars frame or Arrow table as the view `name` (small frames: the engine starts and settings, the
        file census, the workload map), as DuckDB's `register`."""
        table = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
        if (same := self._registered.get(name)) is not None and same.equals(table):
            # the same rows (and columns) under the name already: its definition stands, and with it the answers
            # kept over it (the report's thresholds and then its changes register the same engine starts and
            # settings: their int_threshold_requests, a job over the window's requests, is made once)
            return
        self.view(name, self.spark.createDataFrame(table))
        self._registered[name] = table

    # -- queries
    def sql(self, q: Query, params: dict[str, Any] | None) -> DataFrame:
        from pyspark.sql import functions as F

        spark_sql = to_spark(q.sql, self.schema, q.name)
        self._reading(relations(q.sql))
        args = {k: F.lit(v) for k, v in (params or {}).items()}
        return self.spark.sql(spark_sql, args=args) if args else self.spark.sql(spark_sql)

    def fetch(self, q: Query, params: dict[str, Any] | None, columns: list[str] | None = None
              ) -> pl.DataFrame:
        """The query's rows (`columns` of them), computed once per connection: analyses of one command ask
        some queries again (the report: the engine starts three times, the scrape intervals of a window three
        times, a selection's concurrency requests after the sweep materialized them)."""
        key = self._answer_key(q, params)
        if (kept := self._kept_answer(key, columns)) is not None:
            return kept

        def run() -> pl.DataFrame:
            result = self.sql(q, params)
            df = pl.from_arrow((result.select(*columns) if columns else result).toArrow())
            assert isinstance(df, pl.DataFrame)
            return df

        rows = self._planned(q, run)
        if key is not None and rows.height <= KEEP_ANSWER_ROWS:
            self._answers[(key, tuple(columns or ()))] = rows
            while len(self._answers) > KEEP_ANSWERS:
                self._answers.popitem(last=False)
        return rows

    def _planned(self, q: Query, run: Callable[[], T]) -> T:
        """`run()` (which plans and runs `q`) with Spark's optimizer rules, or without RemoveRedundantAliases
        for a query that Spark 4 cannot plan with it (WITHOUT_ALIAS_RULE: known, or found here when the plan
        fails on it; its plan is invalid before any job runs), added to what the caller excluded."""
        if q.name not in WITHOUT_ALIAS_RULE:
            try:
                return run()
            except Exception as exc:
                if "PLAN_VALIDATION_FAILED" not in str(exc) or _REDUNDANT_ALIASES not in str(exc):
                    raise
                WITHOUT_ALIAS_RULE.add(q.name)
        before = self.spark.conf.get(_EXCLUDED_RULES, "") or ""
        excluded = [r for r in before.split(",") if r]
        self.spark.conf.set(_EXCLUDED_RULES, ",".join([*excluded, _REDUNDANT_ALIASES]))
        try:
            return run()
        finally:
            self.spark.conf.set(_EXCLUDED_RULES, before)

    def rows(self, table: str) -> pl.DataFrame:
        df = pl.from_arrow(self.spark.table(table).toArrow())
        assert isinstance(df, pl.DataFrame)
        return df

    def materialize(self, q: Query, params: dict[str, Any] | None, table: str) -> None:
        # computed once (as DuckDB's temporary table), kept on the executors; a table that already holds this
        # answer (same query, parameters and relations' definitions) is left as it is
        key = self._answer_key(q, params)
        if key is not None and self._tables.get(key) == (table, self._defined.get(table)):
            return
        self.view(table, self._planned(q, lambda: self.sql(q, params).localCheckpoint(eager=True)))
        if key is not None:
            self._tables[key] = (table, self._defined[table])

    def create_view(self, q: Query, view: str) -> None:
        self.view(view, self.sql(q, None))

    def alias(self, view: str, table: str) -> None:
        self.view(view, self.spark.table(table))

    def drop(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        self._schemas.pop(name, None)
        self._defined.pop(name, None)
        self._registered.pop(name, None)


_DEFINITIONS = itertools.count(1)
# a connection keeps the rows of the last this many queries it fetched, each of at most this many rows (an
# analysis' answers and small intermediates; a bigger one, per-request rows on a big store, is fetched again)
KEEP_ANSWERS = 64
KEEP_ANSWER_ROWS = 100_000
_DAY = "day"  # the partition directories' key (attribution.layout)
_EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
_REDUNDANT_ALIASES = "org.apache.spark.sql.catalyst.optimizer.RemoveRedundantAliases"
# Spark 4's RemoveRedundantAliases leaves an invalid plan for some query files (PLAN_VALIDATION_FAILED:
# memsplit_demand, store_coverage_by_deployment, goodput_and_slo_terms_by_group's union): they run without it (the rule only drops aliases,
# so that changes no answer; SparkConnection._planned adds a file whose plan fails so). Every other query keeps
# it: without it a column renamed on the way (`raw.* replace (...)`, a `qualify`'s subquery) is no longer the
# attribute its rows were partitioned by, and Spark shuffles them again (the engine x gateway join: once more
# per side, 1M rows each at 1M requests)
WITHOUT_ALIAS_RULE = {"memsplit_demand", "store_coverage_by_deployment", "goodput_and_slo_terms_by_group"}

# Hadoop's connectors name S3 `s3a://` (its `s3://` is EMR's own connector or nothing); the others keep theirs
HADOOP_SCHEMES = {"s3": "s3a", "gcs": "gs", "az": "abfss"}


def data_path(store: Store, rel: str | Path) -> str:
    """Where Spark reads the store's file `rel`: under the local root, or under the store's object-store URL
    with the scheme Hadoop's filesystems know (`s3://b/x` is read as `s3a://b/x`)."""
    if store.url is None:
        return str(store.root / rel)
    scheme, rest = store.url.split("://", 1)
    return f"{HADOOP_SCHEMES.get(scheme.lower(), scheme)}://{rest}/{Path(rel).as_posix()}"


def connect(store: Store, snapshot: Snapshot, spark: SparkSession,
            workloads: pl.DataFrame | None = None, days: dict[str, Days] | None = None,
            keep: tuple[str, ...] = ()) -> SparkConnection:
    """The views of attribution.views.connect, on Spark; `workloads` (match, name) replaces the store's
    workload map (attribution.config.connect_settings); `days` (attribution.pruning.plan): each table named
    reads only those days' partitions; `keep`: views computed once when first read whatever the store's size
    (keep_staged_when_read)."""
    from attribution import queries
    from attribution.views import STAGED, has_scrapes, ingest_files_frame, load_workload_map

    # DuckDB's answers where Spark's defaults differ: x / 0 is NULL (not an error), a map built with a key
    # twice keeps the last value (the `-- @spark` block of queries/stg_engine_config.sql)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
    # a join may read its sides as partitioned on some of its keys (the requests by request_key alone: the
    # `-- @spark` blocks of queries/stg_requests.sql), not shuffled again on all of them; the same rows
    spark.conf.set("spark.sql.requireAllClusterKeysForCoPartition", "false")
    con = SparkConnection(spark)
    con.commit = snapshot.version
    for table in TABLES:
        con.view(f"raw_{table}", _read(store, snapshot, spark, table, (days or {}).get(table)))
    for table in TABLES:
        if table in STAGED:
            queries.create_view(_as_con(con), STAGED[table], table)
        elif table == "engine_steps" and has_scrapes(snapshot):
            con.scrapes = True
            queries.create_view(_as_con(con), "stg_engine_steps", table)
        else:
            con.view(table, spark.table(f"raw_{table}"))
    con.register("ingest_files", ingest_files_frame(snapshot))
    con.register("workload_map", workloads if workloads is not None else load_workload_map(store))
    queries.create_view(_as_con(con), "stg_joined_requests", "joined_requests")
    keep_staged_when_read(con, snapshot, keep)
    return con


def _read(store: Store, snapshot: Snapshot, spark: SparkSession, table: str, rng: Days | None) -> DataFrame:
    """`raw_<table>`: the snapshot's live files (never a listing of the directory: an ingest may be adding
    files), read with the table's schema: a column a file lacks (written before the column existed) is NULL,
    as DuckDB's union_by_name gives, and no file footer is read to infer one. With `rng` (first, last day;
    None open) only the days' files are named (layout.prune: no file of another day is even looked up, a
    request each on object storage), the `day=` directories are Spark's partition column and the days a
    filter on it: the plan says which partitions it reads (`PartitionFilters`), as over the bare dataset.
    The null partition (rows without a time) is always read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    live = sorted(snapshot.live(table))
    schema = _spark_schema(table)
    if not live:
        return spark.createDataFrame([], schema=schema)
    if rng is None or rng == (None, None):
        return spark.read.schema(schema).parquet(*[data_path(store, p) for p in live])
    if any(layout.day_of(p) is None for p in live):  # (a layout-1 file has no partition: prune by name)
        return spark.read.schema(schema).parquet(*[data_path(store, p) for p in layout.prune(live, *rng)])
    # (a string column: `day=2026-05-18` stays text, and the null partition reads as NULL)
    kept = layout.prune(live, *rng)
    if not kept:
        return spark.createDataFrame([], schema=schema)
    with_day = StructType([*schema.fields, StructField(_DAY, StringType(), True)])
    df = (spark.read.schema(with_day).option("basePath", data_path(store, f"data/{table}"))
          .parquet(*[data_path(store, p) for p in kept]))
    first, last = rng
    keep = F.col(_DAY).isNull()
    inside = F.lit(True)
    if first is not None:
        inside = inside & (F.col(_DAY) >= first)
    if last is not None:
        inside = inside & (F.col(_DAY) <= last)
    return df.where(keep | inside).select(*schema.fieldNames())


# At most this many rows in the snapshot, the staged views are computed once, into the executors' memory.
SMALL_STORE_ROWS = 250_000
KEPT_VIEWS = ("requests", "engine_config", "engine_steps", "joined_requests")
# The report's analyses read the requests' join in about fifteen queries (its five selections, the window's
# anchor, the memory split's demand, binding and arrivals, the prompt cache, the drift, the join's coverage):
# above SMALL_STORE_ROWS each of them joined the files again; kept, the join is made once (bench/scale/README.md)
REPORT_KEEPS = ("joined_requests",)


def keep_staged_when_read(con: SparkConnection, snapshot: Snapshot, keep: tuple[str, ...] = ()) -> None:
    """Marks the staged views kept_views names (every one on a small store, else those in `keep`) to be computed
    once and kept (localCheckpoint, as `materialize`) when a query first reads them (keep_when_read). Each is a
    plan of joins and windows over the files, which every query reading it plans and runs again, and an
    analysis runs tens of queries over them; a view the command does not read (engine_steps for `lengths`, all
    but the join for a relative window's probe) costs nothing. The same rows, so the same answers. A bigger
    store's views read the files in each query, as on a cluster, but for those in `keep`: a caller that reads
    them many times (the report: the requests' join, REPORT_KEEPS) keeps them at any size, in the executors'
    storage (memory, spilling to their disks)."""
    if names := kept_views(snapshot, keep):
        con.keep_when_read({name: con.spark.table(name) for name in names})


def kept_views(snapshot: Snapshot, keep: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The staged views keep_staged_when_read keeps: all of KEPT_VIEWS on a small store, else those of them in
    `keep`."""
    if sum(int(e.get("rows") or 0) for e in snapshot.data.values()) <= SMALL_STORE_ROWS:
        return KEPT_VIEWS
    return tuple(name for name in KEPT_VIEWS if name in keep)


# At most this many `requests` rows (engine and gateway sides) in the snapshot, a local JVM started for it
# compiles with C1 alone (attribution.spark.session.LOCAL_CONF): measured 0.60-0.64x the CPU at 206k rows (the
# sample store), 1.15x at 2.06M (C2's code pays there); the threshold sits below the crossover (~1M rows if the
# tasks' share grows linearly: not measured between).
QUICK_JIT_ROWS = 600_000


def connect_settings(store: Store, snapshot: Snapshot, settings: Settings,
                     days: dict[str, Days] | None = None, keep: tuple[str, ...] = ()) -> SparkConnection:
    """The Spark views of `snapshot` (only `days`' partitions, where given) with the settings' workload names,
    on the session the settings ask for (`spark_master`, `spark_conf`): what `--engine spark` runs an analysis
    or the report on (`keep`: views kept at any size, keep_staged_when_read)."""
    from attribution.config import workload_map
    from attribution.spark.session import get_session, parse_conf

    quick = sum(int(e.get("rows") or 0) for e in snapshot.data.values() if e.get("table") == "requests") <= QUICK_JIT_ROWS
    session = get_session(settings.spark_master, parse_conf(settings.spark_conf), quick_jit=quick)
    return connect(store, snapshot, session, workload_map(settings), days, keep)


def _spark_schema(table: str) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(empty(table).to_arrow().schema)


def _as_con(con: SparkConnection) -> Any:
    """A Spark connection where attribution.queries takes a DuckDB one (queries tells them apart)."""
    return con


def connect_window(store: Store, settings: Settings, since: Any = None, until: Any = None,
                   *, extra_before: timedelta | None = None) -> tuple[SparkConnection, Window]:
    """attribution.pruning.connect on Spark: the window resolved (a relative one from the newest days alone,
    read by Spark), then views reading only the days it needs (`extra_before`: also that much before it).
    Spark does not use the commit's cached join, so the requests are pruned whether or not it exists."""
    from attribution.analyses.common import parse_when, resolve_window
    from attribution.pruning import anchor_days, plan, resolve

    snap = store.snapshot()
    s, u = parse_when(since), parse_when(until)
    probe = None
    if isinstance(s, timedelta) or isinstance(u, timedelta):
        probe = connect_settings(store, snap, settings, anchor_days(store, snap, join_cache=False))
        window = resolve_window(_as_con(probe), since, until)
    else:  # (absolute: no data is read)
        window = resolve(store, snap, since, until)
    start = window.since - extra_before if (window.since is not None and extra_before) else window.since
    days = plan(store, snap, start, window.until, join_cache=False)
    if probe is not None and days is None and anchor_days(store, snap, join_cache=False) is None:
        return probe, window  # (the probe already reads the whole snapshot)
    return connect_settings(store, snap, settings, days), window
