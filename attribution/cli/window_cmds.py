"""`attribution changes` and `attribution health`: the report's "what changed" and "ingest health" analyses
on their own, for one window (default: the `window` setting, 7d back from the newest request), with the same
options and output forms as the other analysis commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attribution.choices import GroupBy
from attribution.cli import options as opt
from attribution.cli.analyses import show
from attribution.cli.app import app, connect, engine_flags, open_store, resolve
from attribution.columns import view
from attribution.render import Format
from attribution.store import default_store_path

if TYPE_CHECKING:
    from attribution.analyses import Analysis

# Columns of the terminal view of the wide tables (by the end of their name); JSON and CSV carry all of them.
VIEW = {
    "summary": ["metric", "percentile", "before", "after", "ratio", "ratio_lo", "ratio_hi", "verdict", "n_before",
                "n_after"],
    "by_workload": ["workload", "metric", "percentile", "before", "after", "ratio", "ratio_lo", "ratio_hi",
                    "verdict"],
    "attribution": ["feature", "metric", "threshold", "share_before", "share_after", "crossing_ratio",
                    "other_ratio", "verdict"],
}


def _shown(res: Analysis, fmt: Format, table: str | None) -> None:
    """The result; on a terminal the main columns of the wide tables and no empty tables (a window without a
    previous one has no drift)."""
    if fmt == Format.table:
        for name, df in res.tables.items():
            cols = next((v for k, v in VIEW.items() if name.endswith(k)), df.columns)
            res.tables[name] = view(df, cols)
    show(res, fmt, table, hide=tuple(n for n, df in res.tables.items() if df.is_empty()))


@app.command("changes")
def changes_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                by: Annotated[GroupBy | None, typer.Option(
                    "--by", help="Group the traffic and length drift by workload, model, deployment, label, day, "
                                 "version or all (default: the `by` setting, workload).", show_default=False)] = None,
                fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None, config: opt.ConfigOpt = None,
                engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                spark_conf: opt.SparkConfOpt = None) -> None:
    """What changed: this window against the one before it (traffic and length drift per group, latency
    ratios with bootstrap intervals overall and per workload, material regressions) and inside it (engine
    starts, a before/after when it holds two versions or labels). The report's "what changed" section.

    Example: attribution changes --since 7d --format json
    """
    from attribution.report.build import window_changes

    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, by=by.value if by else None)
    con, window = _window_connection(st, "changes", since, until)
    res = window_changes(con, window, st)
    _shown(res, fmt, table)


@app.command("health")
def health_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
               gap_minutes: Annotated[float | None, typer.Option(
                   help="A pod's logs silent for longer than this inside the window is a gap (default: the "
                        "`gap_minutes` setting, 120).", show_default=False)] = None,
               fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None, config: opt.ConfigOpt = None,
               engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
               spark_conf: opt.SparkConfOpt = None) -> None:
    """Can the numbers be trusted: input files by status, ingest problems, engine <-> gateway matches per
    source, rows per deployment, and log gaps in the window. The report's "ingest health" section.

    Example: attribution health --since 7d --gap-minutes 60
    """
    from attribution.report.build import window_health

    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, gap_minutes=gap_minutes)
    con, window = _window_connection(st, "health", since, until)
    _shown(window_health(open_store(default_store_path(st.store)), con, window, st), fmt, table)


def _window_connection(st: Any, command: str, since: str | None, until: str | None) -> tuple[Any, Any]:
    """The report's window (resolved from the newest days alone) and a connection reading only its days and
    the previous window's (report.build.report_days)."""
    from attribution.pruning import anchor_days
    from attribution.report.build import report_days, report_window

    if st.engine == "spark":  # one set of Spark views over the whole snapshot (no days to leave out)
        con = connect(st, command)
        return con, report_window(con, since=since, until=until, default=st.window)
    window = report_window(connect(st, command, days=anchor_days), since=since, until=until,
                           default=st.window)
    return connect(st, command, days=lambda store, snap: report_days(store, snap, window)), window
