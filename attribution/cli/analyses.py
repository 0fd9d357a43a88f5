"""Commands that answer questions from the store: lengths, concurrency, latency, capacity, and analyze (ingest,
then a one-screen summary). Each parses its options, calls attribution.analyses and renders the result; the
numbers are the library's, the same in the table, CSV and JSON forms. The analyses are imported inside the
commands (the CLI starts without NumPy and DuckDB; `--help` needs only the options)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attribution import render
from attribution.choices import GroupBy
from attribution.cli import options as opt
from attribution.cli.app import app, connect, connect_window, engine_flags, resolve
from attribution.cli.store_cmds import IngestProgress, print_summary
from attribution.columns import is_share
from attribution.config import Settings, describe
from attribution.errors import UsageError
from attribution.render import Format
from attribution.store import default_store_path

if TYPE_CHECKING:
    import polars as pl

    from attribution.analyses import Analysis, Selection

def select(settings: Settings, since: str | None, until: str | None, by: GroupBy | str | None = None, *,
           command: str, prune: bool = True) -> Selection:
    """The window's requests on the settings' store, grouped by `by` (default: the `by` setting), for the
    analysis `command` (app.connect: only some run on Spark); `prune`: read only the window's days."""
    from attribution import analyses

    # only the window's days (pruning.py), the window resolved on the whole store
    con, window = connect_window(settings, command, since, until) if prune else (connect(settings, command), None)
    return analyses.select(con, since=window or since, until=until, by=by or settings.by)


def with_by(settings: Settings, by: GroupBy | None, own_default: GroupBy = GroupBy.workload) -> Settings:
    """The settings with `by` resolved like every setting (--by, else $ATTRIBUTION_BY, else the file); a command
    whose own default is not the setting's (capacity: per pod, all) keeps it when nothing gave one."""
    if by is not None:
        return replace(settings, by=by.value, sources={**settings.sources, "by": "flag"})
    if settings.sources.get("by", "default") == "default":
        return replace(settings, by=own_default.value)
    return settings


def with_settings(res: Analysis, settings: Settings, keys: tuple[str, ...]) -> Analysis:
    """Say in the result (its JSON params) which settings it used, their values and where each came from."""
    res.params["settings"] = describe(settings, keys)
    return res


def _cell(v: object, column: str) -> str:
    """Display only: shares as percentages, large numbers without exponents (the data keeps full precision)."""
    if isinstance(v, float) and v == v:
        if is_share(column):
            return f"{v:.1%}"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
    return render.cell(v)


def table_of(df: pl.DataFrame, title: str) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in df.columns:
        t.add_column(c, justify="right" if df.schema[c].is_numeric() else "left", overflow="fold")
    for row in df.iter_rows():
        t.add_row(*(_cell(v, c) for v, c in zip(row, df.columns, strict=True)))
    return t


def show_data(result: Analysis, fmt: Format, table: str | None) -> bool:
    """Write `result` as JSON (everything) or CSV (one table, `--table` or the main one); False for a table
    format, which the caller renders its own way."""
    if fmt == Format.json:
        render.data(result.to_dict())
        return True
    if fmt == Format.csv:
        name = table or result.main
        if name not in result.tables:
            raise UsageError(f"--table {name!r}: this result has {', '.join(result.tables)}")
        render.frame(result.tables[name], Format.csv)
        _notes(result, render.err)  # stdout holds the CSV alone
        return True
    return False


def show(result: Analysis, fmt: Format, table: str | None = None, hide: tuple[str, ...] = ()) -> None:
    """Write `result`: every table (but `hide`; an empty one as a line saying so) and the notes as Rich tables, one
    table as CSV, all as JSON."""
    if show_data(result, fmt, table):
        return
    for name, df in result.tables.items():
        if name in hide:
            continue
        title = result.titles.get(name, name)
        if df.height:
            render.out.print(table_of(df, title))
        else:  # a header over no rows reads as a broken table; the notes say why it is empty
            render.out.print(f"{escape(title)}: no rows", highlight=False)
    _notes(result, render.out)


def _notes(result: Analysis, console: Console) -> None:
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


@app.command("lengths")
def lengths_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                by: opt.ByOpt = None, fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                config: opt.ConfigOpt = None, percentiles: opt.PercentilesOpt = None,
                bins_per_decade: Annotated[int, typer.Option(help="Histogram bins per power of ten.")] = 10,
                histogram: Annotated[bool, typer.Option(help="Also print the histogram table.")] = False,
                engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                spark_conf: opt.SparkConfOpt = None) -> None:
    """Prompt, output and cached tokens per group: count, mean, p50/p90/p99/p99.9, max, token-weighted
    percentiles and the token share of the longest 1%; log-binned histogram in JSON/CSV (--table histogram).

    Example: attribution lengths --by workload --since 7d
    """
    from attribution import analyses

    st = with_by(resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store,
                                 percentiles=percentiles), by)
    res = analyses.lengths(select(st, since, until, command="lengths"), bins_per_decade=bins_per_decade,
                           percentiles=st.percentiles)
    with_settings(res, st, ("by", "percentiles", "workloads"))
    show(res, fmt, table, hide=() if histogram else ("histogram",))


@app.command("concurrency")
def concurrency_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                    by: opt.ByOpt = None, fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                    config: opt.ConfigOpt = None, percentiles: opt.PercentilesOpt = None,
                    per_group: Annotated[bool, typer.Option(help="Also sweep each group on its own.")] = True,
                    timeseries: Annotated[bool, typer.Option(help="Add running/waiting over time.")] = False,
                    bucket: Annotated[int | None, typer.Option(help="Time-series bucket in seconds (default: "
                                                                    "about 500 buckets).", show_default=False)] = None,
                    estimate: Annotated[bool, typer.Option(help="Estimate arrival-only traces with the "
                                                                "simulator.")] = True,
                    service_model: Annotated[str, typer.Option(help="Simulator scenario used as the service model "
                                                                    "for estimates.")] = "vllm-chat-small",
                    engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                    spark_conf: opt.SparkConfOpt = None) -> None:
    """Requests running and waiting at once per deployment (and group): peak, time-weighted mean and
    percentiles (--percentiles), concurrency seen at each arrival, live KV tokens; exact, sampled or estimated (labelled).

    Example: attribution concurrency --by workload --timeseries --format json
    """
    from attribution import analyses

    st = with_by(resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store,
                         percentiles=percentiles), by)
    res = analyses.concurrency(select(st, since, until, command="concurrency"), per_group=per_group, estimate=estimate,
                               service_model=service_model, timeseries=timeseries, bucket_s=bucket,
                               percentiles=st.percentiles)
    with_settings(res, st, ("by", "percentiles", "workloads"))
    show(res, fmt, table)


@app.command("latency")
def latency_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                by: opt.ByOpt = None, fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                slo: opt.SloOpt = None, preset: opt.PresetOpt = None, config: opt.ConfigOpt = None,
                percentiles: opt.PercentilesOpt = None,
                score: Annotated[list[str] | None, typer.Option(help="Score preset (default: all, e.g. ers).",
                                                                show_default=False)] = None,
                buckets: Annotated[str, typer.Option(help="Prompt-length bucket edges in tokens.")]
                = "256,1024,4096,16384,65536",
                engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                spark_conf: opt.SparkConfOpt = None) -> None:
    """Queue, TTFT, TPOT and end-to-end percentiles per group and prompt-length bucket; goodput for a joint
    SLO; per-request scores (the contest score ERS).

    Example: attribution latency --by label --slo ttft=0.5 --slo tpot=0.05
    """
    from attribution import analyses

    try:
        edges = [int(x) for x in buckets.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--buckets {buckets!r}: write token counts separated by commas") from None
    st = with_by(resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, slo=slo,
                                 slo_preset=preset, percentiles=percentiles), by)
    sel = select(st, since, until, command="latency")
    res = analyses.latency(sel, slo=analyses.parse_slo(list(st.slo) or None, st.slo_preset),
                           scores=analyses.score_presets(score), bucket_edges=edges, percentiles=st.percentiles)
    with_settings(res, st, ("by", "slo", "slo_preset", "percentiles", "workloads"))
    show(res, fmt, table)


@app.command("capacity")
def capacity_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                 by: Annotated[GroupBy | None, typer.Option(
                     "--by", help="Group requests as --by of the other commands (default: all, each pod as a "
                                  "whole, unless $ATTRIBUTION_BY or the config file sets `by`).",
                     show_default=False)] = None,
                 fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                 gpu_hour_cost: opt.CostOpt = None, gpus_per_pod: opt.GpusOpt = None,
                 config: opt.ConfigOpt = None,
                 engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                 spark_conf: opt.SparkConfOpt = None) -> None:
    """Completed requests per pod per day, the requests per day it could complete at its running limit (measured
    at saturation, else extrapolated from service times, with a 95% interval), and the cost per million
    input and output tokens; where a gateway logged the requests, what it billed (USD) next to the GPU cost.

    Example: attribution capacity --gpu-hour-cost 2.0
    """
    from attribution import analyses

    st = with_by(resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store,
                         gpu_hour_cost=gpu_hour_cost, gpus_per_pod=gpus_per_pod), by,
                 own_default=GroupBy.all)
    res = analyses.capacity(select(st, since, until, command="capacity"), gpu_hour_cost=st.gpu_hour_cost,
                            gpus_per_pod=st.gpus_per_pod)
    with_settings(res, st, ("by", "gpu_hour_cost", "gpus_per_pod", "workloads"))
    show(res, fmt, table)


@app.command("analyze")
def analyze_cmd(
    paths: Annotated[list[str] | None, typer.Argument(help="Logs to ingest first (files, directories, globs); "
                                                           "none: summarise the store as it is.")] = None,
    store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None, by: opt.ByOpt = None,
    fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None, slo: opt.SloOpt = None,
    preset: opt.PresetOpt = None,
    gpu_hour_cost: opt.CostOpt = None, gpus_per_pod: opt.GpusOpt = None, config: opt.ConfigOpt = None,
    percentiles: opt.PercentilesOpt = None,
    year: Annotated[int | None, typer.Option(help="Year of vLLM timestamps (they have none).")] = None,
    tz: Annotated[str | None, typer.Option(help="Zone of naive log timestamps; default: this machine's.")] = None,
    label: Annotated[str | None, typer.Option(help="Cohort tag for the ingested files.")] = None,
    deployment: Annotated[str | None, typer.Option(help="Deployment name for the ingested files.")] = None,
) -> None:
    """Ingest PATHs, then print one screen: lengths per workload, concurrency and capacity per pod, latency
    per cohort, goodput, and the findings worth a look.

    Example: attribution analyze sample_logs/ --store demo-store --year 2026 --tz UTC
    """
    from attribution import analyses

    st = with_by(resolve(config, store=store, slo=slo, slo_preset=preset, gpu_hour_cost=gpu_hour_cost,
                         gpus_per_pod=gpus_per_pod, percentiles=percentiles), by)
    if paths:
        from attribution.ingest import ingest

        prog = IngestProgress()
        with prog.p:
            summary = ingest(paths, default_store_path(st.store), deployment=deployment, label=label, year=year, tz=tz,
                             progress=prog)
        print_summary(summary)
    con, window = connect_window(st, "analyze", since, until)  # (resolved on the whole store, then pruned)
    res = analyses.analyze(con, since=window or since, until=until, by=st.by,
                           slo=analyses.parse_slo(list(st.slo) or None, st.slo_preset), gpu_hour_cost=st.gpu_hour_cost,
                           gpus_per_pod=st.gpus_per_pod, ceiling_share=st.ceiling_share, percentiles=st.percentiles)
    with_settings(res, st, ("by", "slo", "slo_preset", "gpu_hour_cost", "gpus_per_pod", "ceiling_share",
                             "percentiles", "workloads"))
    show(res, fmt, table)
