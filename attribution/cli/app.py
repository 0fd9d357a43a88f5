"""The Typer application and what every command shares: resolving its settings, opening the store and
connecting to it (the shared options are attribution.cli.options)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from attribution.config import Settings, connect_settings, load_settings
from attribution.errors import UsageError
from attribution.store import Store, default_store_path

if TYPE_CHECKING:
    from collections.abc import Callable

    import duckdb

    from attribution.analyses.common import Window
    from attribution.store import Snapshot

app = typer.Typer(
    name="attribution",
    help="Answers from LLM-serving logs: ingest vLLM/SGLang/gateway logs and traces, then query them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from attribution import __version__

        typer.echo(f"attribution {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Answers from LLM-serving logs: ingest vLLM/SGLang/gateway logs and traces, then query them."""


def open_store(store: str | Path | None) -> Store:
    return Store.open(default_store_path(store))
def resolve(config: Path | None, **flags: object) -> Settings:
    """Every setting a command uses, one precedence: its flag, else $ATTRIBUTION_<KEY>, else the config file,
    else the default (attribution.config.load_settings)."""
    return load_settings(flags, config=config)


# with a Spark path (tested equal to DuckDB's)
SPARK_COMMANDS = ("lengths", "latency", "concurrency", "thresholds", "capacity", "compare", "memsplit", "arrivals",
                  "cache", "changes", "health", "metrics", "report")


def refuse_spark(settings: Settings, command: str) -> None:
    """`engine = spark` (a flag, $ATTRIBUTION_ENGINE or the config file) on a command without a Spark path:
    a usage error naming where the setting came from, never a silent DuckDB run."""
    if settings.engine == "spark" and command not in SPARK_COMMANDS:
        where = settings.sources.get("engine", "setting")
        raise UsageError(f"engine = spark (from {where}): `attribution {command}` does not run "
                         f"on Spark yet ({', '.join(SPARK_COMMANDS)} do); set --engine duckdb")


def connect(settings: Settings, command: str,
            days: Callable[[Store, Snapshot], Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the settings' store with the settings' workload names applied: DuckDB in this
    process, or Spark temporary views under `--engine spark` (attribution.spark.connection; the analyses run
    the same query files on either). `command` names the caller: one without a Spark path refuses an
    `engine = "spark"` that came from the environment or a config file instead of failing inside Spark
    (every command passes its name: no guessing from the running click context)."""
    store = open_store(default_store_path(settings.store))
    refuse_spark(settings, command)
    if settings.engine == "spark":
        from attribution.spark.connection import connect_settings as spark_connect

        spark_con: Any = spark_connect(store, store.snapshot(), settings)
        # the analyses take either connection (attribution.queries tells them apart)
        return cast("duckdb.DuckDBPyConnection", spark_con)
    if days is not None:  # the days to read, from the store and its snapshot (attribution.pruning)
        snap = store.snapshot()
        con = store.connect(snap, days=days(store, snap))
    else:
        con = store.connect()
    connect_settings(con, settings)
    bound_memory(con, command)
    return con


# The commands whose DuckDB side grows with the store (the selection's temporary tables, the step lines'
# joins: with the Python side, 5 GB at 6M requests): DuckDB takes 80% of the machine unless told, so they cap
# it and spill to a scratch directory beyond (ATTRIBUTION_DUCKDB_MEMORY_MB; the report and the dashboard set
# their own).
BOUNDED_COMMANDS = frozenset({"concurrency", "thresholds", "capacity"})
DUCKDB_MEMORY_MB = 1024


def bound_memory(con: duckdb.DuckDBPyConnection, command: str) -> None:
    """Cap DuckDB's memory on `con` for a BOUNDED_COMMANDS command (attribution.db.bound_memory: it spills to
    a scratch directory removed with the connection)."""
    if command in BOUNDED_COMMANDS:
        from attribution.db import bound_memory as bounded

        bounded(con, DUCKDB_MEMORY_MB)


def connect_window(settings: Settings, command: str, since: Any, until: Any
                   ) -> tuple[duckdb.DuckDBPyConnection, Window | None]:
    """`connect` reading only the days the window --since/--until needs (attribution.pruning; Spark's views
    too), and the window resolved on the whole store (a pruned connection may not hold the newest arrival,
    so the analysis takes this window, not its own resolution); (con, None) when there is no window."""
    if since is None and until is None:
        return connect(settings, command), None
    store = open_store(default_store_path(settings.store))
    refuse_spark(settings, command)
    if settings.engine == "spark":
        from attribution.spark.connection import connect_window as spark_window

        spark_con, window = spark_window(store, settings, since, until)
        return cast("duckdb.DuckDBPyConnection", spark_con), window
    from attribution.pruning import connect as pruned

    con, window = pruned(store, since, until)
    connect_settings(con, settings)
    bound_memory(con, command)
    return con, window


def engine_flags(engine: str | None, spark_master: str | None, spark_conf: list[str] | None
                 ) -> dict[str, object]:
    """The engine flags of a command as `resolve` keywords."""
    return {"engine": engine, "spark_master": spark_master, "spark_conf": spark_conf}
