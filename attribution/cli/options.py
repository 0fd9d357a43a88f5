"""The options more than one command takes, defined once: the store, window, output, settings-file and engine
options. A command module imports this module (`from attribution.cli import options as opt`) and names each
one as `opt.StoreOpt`; options of a single command stay with it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attribution.choices import GroupBy
from attribution.render import Format

StoreOpt = Annotated[
    str | None,  # (not a Path: it would make s3://bucket/prefix s3:/bucket/prefix)
    typer.Option("--store", help="Store directory, or an s3://, gs:// or abfs:// URL for reading (default: "
                                 "$ATTRIBUTION_STORE, else ./attribution-store).",
                 show_default=False),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (default: $ATTRIBUTION_CONFIG, else the nearest attribution.toml, "
                                  "or pyproject.toml with a tool.attribution table).", show_default=False),
]

EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help="Where the analysis runs: duckdb (in this process, the default) or spark (Spark SQL "
                     "over the same store; default: $ATTRIBUTION_ENGINE, else the `engine` setting).",
    show_default=False)]
SparkMasterOpt = Annotated[str | None, typer.Option(
    "--spark-master", help="Spark master URL for --engine spark (default: local[*]).", show_default=False)]
SparkConfOpt = Annotated[list[str] | None, typer.Option(
    "--spark-conf", help="A Spark setting for --engine spark, KEY=VALUE; repeat for more.",
    show_default=False)]

SinceOpt = Annotated[str | None, typer.Option(
    "--since", help="Start: an ISO date or time (UTC unless it has a zone) or a span back from the newest request "
                    "(7d, 24h, 30m, 2w).", show_default=False)]
UntilOpt = Annotated[str | None, typer.Option(
    "--until", help="End (exclusive), in the same forms as --since.", show_default=False)]
ByOpt = Annotated[GroupBy | None, typer.Option(
    "--by", help="Group requests by workload, model, deployment, label, day (UTC), version (engine) or all "
                 "(default: the `by` setting, workload).", show_default=False)]
TableOpt = Annotated[str | None, typer.Option(
    "--table", help="With --format csv: which of the result's tables to write (default: the first).",
    show_default=False)]
SloOpt = Annotated[list[str] | None, typer.Option(
    "--slo", help="A term of the joint SLO, METRIC=SECONDS (queue, ttft, tpot, e2e); repeat for more terms, e.g. "
                  "--slo ttft=0.5 --slo tpot=0.05. Default: the `chat` preset.", show_default=False)]
PresetOpt = Annotated[str | None, typer.Option(
    "--preset", help="A named SLO from presets.toml (chat, ...).", show_default=False)]
CostOpt = Annotated[float | None, typer.Option(
    "--gpu-hour-cost", help="Price of one GPU-hour (e.g. 2.0) for the cost per million tokens.", show_default=False)]
PercentilesOpt = Annotated[str | None, typer.Option(
    "--percentiles", help="Percentiles to show besides p50, p90 and p99, e.g. 50,90,95,99,99.9 (default: the "
                          "`percentiles` setting, 50,90,95,99,99.9).", show_default=False)]
GpusOpt = Annotated[int | None, typer.Option(help="GPUs per pod (default: the engine's tp_size, else 1).",
                                             show_default=False)]
