"""`attribution arrivals`: how requests arrive per group and overall (rate, per-minute counts, burstiness,
profiles, fitted inter-arrival distributions, multi-turn structure). Parses options, calls
attribution.analyses.arrivals and renders the result like the other analyses."""

from __future__ import annotations

from typing import Annotated

import typer

from attribution.cli import options as opt
from attribution.cli.analyses import select, show, with_by, with_settings
from attribution.cli.app import app, engine_flags, resolve
from attribution.render import Format

TzOpt = Annotated[str | None, typer.Option(
    "--tz", help="Time zone of the hour-of-day and weekday profiles (default: the `tz` setting, UTC).",
    show_default=False)]


@app.command("arrivals")
def arrivals_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                 by: opt.ByOpt = None, fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                 config: opt.ConfigOpt = None, tz: TzOpt = None,
                 timeseries: Annotated[bool, typer.Option(help="Add requests per minute over time (JSON/CSV: "
                                                                "--table per_minute).")] = False,
                 bucket: Annotated[int | None, typer.Option(help="Per-minute series bucket in minutes (default: "
                                                                 "at most 500 buckets).", show_default=False)] = None,
                 profiles: Annotated[bool, typer.Option(help="Also print the hour-of-day and weekday "
                                                              "tables.")] = False,
                 engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                 spark_conf: opt.SparkConfOpt = None) -> None:
    """Arrival rate and burstiness per group and overall: mean rate, requests per clock minute (min, p50, p99,
    max; empty minutes count as 0), inter-arrival CV, index of dispersion over 1/10/60 s, longest gap, fitted
    exponential/Gamma/Weibull gaps with KS distance, hour and weekday profiles, turns per conversation.

    Example: attribution arrivals --by deployment --since 7d --tz Europe/Berlin
    """
    from attribution import analyses

    st = with_by(resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, tz=tz), by)
    res = analyses.arrivals(select(st, since, until, command="arrivals"), tz=st.tz, timeseries=timeseries,
                             bucket_minutes=bucket)
    with_settings(res, st, ("by", "tz", "workloads"))
    show(res, fmt, table, hide=() if profiles else ("diurnal", "weekday", "per_minute"))
