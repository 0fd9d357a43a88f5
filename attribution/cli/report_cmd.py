"""`attribution report`: the weekly report as one self-contained HTML file, Markdown or JSON (attribution.report
builds it; this resolves the settings, optionally ingests first, writes the files and sets the exit code a
scheduler alerts on: 5 when a --fail-on condition held, see attribution.report.output)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from attribution import render
from attribution.choices import FailOn, GroupBy, ReportFormat
from attribution.cli import options as opt
from attribution.cli.app import app, refuse_spark
from attribution.cli.store_cmds import IngestProgress, print_summary
from attribution.config import load_settings
from attribution.errors import StoreLocked
from attribution.store import Store, default_store_path

STALE = timedelta(days=1)


def _ingest(paths: list[str], store: Path | str, year: int | None, tz: str | None) -> dict[str, Any] | None:
    """Ingest first; when another ingest holds the store, go on with what it has committed (the report says so)."""
    from attribution.ingest import ingest

    prog = IngestProgress()
    try:
        with prog.p:
            summary = ingest(paths, store, year=year, tz=tz, progress=prog)
    except StoreLocked as exc:
        render.err.print(f"[yellow]warning:[/] {exc}; reporting on the last commit", highlight=False)
        return {"skipped": True, "text": f"the ingest before this report was skipped: {exc}"}
    print_summary(summary)
    return None


@app.command("report")
def report_cmd(
    store: opt.StoreOpt = None,
    since: Annotated[str | None, typer.Option(
        "--since", "--from", help="Start: an ISO date or time (UTC unless it has a zone) or a span back from the "
                                  "newest request (7d). Default: the `window` setting, 7d.", show_default=False)] = None,
    until: opt.UntilOpt = None,
    week: Annotated[str | None, typer.Option(
        help="An ISO week (2026-W19, Monday to Monday UTC) or `last` (the last whole week before the newest "
             "request).", show_default=False)] = None,
    out: Annotated[str | None, typer.Option(
        "--out", "-o", help="File to write; .html, .md or .json says the format (`-` = stdout).",
        show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Option(
        help="Directory for attribution-report-<ISO week>.{html,md,json} (every format unless --format).",
        show_default=False)] = None,
    fmt: Annotated[ReportFormat | None, typer.Option("--format", "-f", help="Format, when --out does not say it.",
                                                     show_default=False)] = None,
    ingest: Annotated[list[str] | None, typer.Option(
        help="Ingest these logs first (repeatable: --ingest DIR --ingest FILE).", show_default=False)] = None,
    year: Annotated[int | None, typer.Option(help="With --ingest: year of vLLM timestamps.")] = None,
    tz: Annotated[str | None, typer.Option(help="With --ingest: zone of naive timestamps.")] = None,
    config: Annotated[Path | None, typer.Option(
        help="Settings file (default: $ATTRIBUTION_CONFIG, else the nearest attribution.toml, or pyproject.toml "
             "with a tool.attribution table).", show_default=False)] = None,
    slo: opt.SloOpt = None, preset: opt.PresetOpt = None, gpu_hour_cost: opt.CostOpt = None,
    gpus_per_pod: Annotated[int | None, typer.Option(help="GPUs per pod for the cost.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(help="Model profile for the memory split (preset or config.json).",
                                              show_default=False)] = None,
    by: Annotated[GroupBy | None, typer.Option(help="Grouping of the per-group tables (default: workload).",
                                               show_default=False)] = None,
    whatif: Annotated[bool | None, typer.Option("--whatif/--no-whatif", help="Replay the arrivals under the "
                                                "recommended memory split.", show_default=False)] = None,
    fail_on: Annotated[list[FailOn] | None, typer.Option(
        help="Exit with 5 (after writing) when this holds: regression, drift, health, empty, action. "
             "Repeatable.", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None, spark_conf: opt.SparkConfOpt = None,
) -> None:
    """The week at a glance, and what changed: traffic, lengths, concurrency, latency and goodput, capacity,
    feature thresholds, memory split, changes against the previous window, ingest health. Same store and
    window, same bytes: safe to rerun from cron, also while an ingest runs.

    Example: attribution report --since 7d --out week.html
    """
    from attribution.report import EXIT_FOUND, build_report, triggered, write
    from attribution.report.output import check

    check(out, out_dir, fmt)
    settings = load_settings({"store": store, "slo": slo, "slo_preset": preset, "gpu_hour_cost": gpu_hour_cost,
                              "gpus_per_pod": gpus_per_pod, "model": model, "by": by and by.value,
                              "whatif": whatif, "engine": engine, "spark_master": spark_master,
                              "spark_conf": spark_conf}, config=config)
    refuse_spark(settings, "report")
    path = default_store_path(settings.store)
    note = _ingest(ingest, path, year, tz) if ingest else None
    progress = None if quiet else (lambda step: render.err.print(f"[dim]report: {step}[/]", highlight=False))
    report = build_report(Store.open(path), settings, since=since, until=until, week=week, ingest=note,
                          progress=progress)
    for p in write(report, out=out, out_dir=out_dir, fmt=fmt):
        render.err.print(f"wrote {p}", highlight=False)
    newest = report.window.get("newest_request")
    if newest is not None and datetime.now(UTC) - newest > STALE:
        # on stderr only: the report itself holds no wall-clock time, so reruns give the same bytes
        what = ("the newest request in the store arrived" if report.window.get("requests") else
                "the store holds no request rows; its newest step or access line was logged")
        render.err.print(f"[yellow]note:[/] {what} {newest:%Y-%m-%d %H:%M} UTC, "
                         f"more than {STALE.days} day ago: are the logs still being ingested?", highlight=False)
    held = triggered(report, fail_on)
    if held:
        render.err.print(f"[yellow]found:[/] {', '.join(held)} (exit {EXIT_FOUND})", highlight=False)
        raise typer.Exit(EXIT_FOUND)
