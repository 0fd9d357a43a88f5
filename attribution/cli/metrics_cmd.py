"""`attribution metrics`: what the Prometheus histograms and counters of a window answer per deployment and
model (latency and length percentiles with their bucket edges, requests above length thresholds, goodput,
prefix-cache hit rate), and the same window against a baseline window. Everything labelled bucket-interpolated."""

from __future__ import annotations

from typing import Annotated

import typer

from attribution.cli import options as opt
from attribution.cli.analyses import show, with_settings
from attribution.cli.app import app, connect, engine_flags, resolve
from attribution.render import Format

ThresholdOpt = Annotated[list[float] | None, typer.Option(
    "--threshold", help="A length in tokens: how many requests had a prompt (and output) above it; exact when "
                        "it is a bucket edge, else a bound. Repeat for more.", show_default=False)]
BaselineSinceOpt = Annotated[str | None, typer.Option(
    "--baseline-since", help="Compare the window against this baseline window's start (same forms as --since).",
    show_default=False)]
BaselineUntilOpt = Annotated[str | None, typer.Option(
    "--baseline-until", help="End (exclusive) of the baseline window.", show_default=False)]


@app.command("metrics")
def metrics_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None, config: opt.ConfigOpt = None,
                percentiles: opt.PercentilesOpt = None, threshold: ThresholdOpt = None,
                slo: opt.SloOpt = None,
                baseline_since: BaselineSinceOpt = None, baseline_until: BaselineUntilOpt = None,
                engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
                spark_conf: opt.SparkConfOpt = None) -> None:
    """Prometheus histograms and counters per deployment and model: TTFT/TPOT/ITL/e2e/queue and length
    percentiles (bucket-interpolated, with the bucket edges around each), requests above --threshold,
    goodput for --slo, prefix-cache hit rate; with --baseline-since, the window against the baseline.

    Example: attribution metrics --since 24h --threshold 95000 --slo ttft=0.5 --baseline-since 48h --baseline-until 24h
    """
    from attribution import analyses, histograms

    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, percentiles=percentiles)
    con = connect(st, "metrics")
    terms = analyses.parse_slo(slo).terms if slo else ()
    res = histograms.metrics(con, since=since, until=until, percentiles=st.percentiles,
                             thresholds=threshold or (), slo=terms)
    if baseline_since is not None or baseline_until is not None:
        base = histograms.metric_window(con, baseline_since, baseline_until)
        window = histograms.metric_window(con, since, until)
        cmp = histograms.compare_windows(con, base, window, st.percentiles)
        res.tables["compare"] = cmp.tables["compare"]
        res.titles["compare"] = "this window (B) against the baseline (A): " + cmp.titles["compare"]
        res.definitions.update(cmp.definitions)
        res.notes.extend(cmp.notes)
        res.params["baseline"] = base.to_dict()
    with_settings(res, st, ("percentiles",))
    show(res, fmt, table)
