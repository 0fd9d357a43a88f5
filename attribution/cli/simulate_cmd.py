"""`attribution simulate`: write the engine and gateway logs of a simulated deployment, and its ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from attribution import render
from attribution.cli.app import app


def _summary(truth: dict[str, Any], out: Path) -> None:
    files = pl.DataFrame(truth["files"]).select(
        "path", pl.col("engine_version").alias("version"), "requests", (pl.col("bytes") / 1e6).round(2).alias("MB"))
    render.err.print(render.table(files, f"written to {out}"))
    t = truth["totals"]
    render.err.print(f"{t['requests']:,} requests from {t['first_arrival']} to {t['last_finished']}, "
                     f"{files['MB'].sum():,.1f} MB; ground truth: {out / 'ground_truth.json'}", highlight=False)


@app.command("simulate")
def simulate_cmd(
    scenario: Annotated[str, typer.Option(help="A packaged scenario or bundle (sample, sample-hybrid, "
                                               "hybrid-before-after, ...) or a .toml file.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Directory to write; the files of an earlier run there are replaced.",
                                      show_default=False)],
    requests: Annotated[int | None, typer.Option(help="Requests at the mean rate, which sets the days (the daily "
                                                      "cycle makes the count differ); split over a bundle's "
                                                      "members.", show_default=False)] = None,
    days: Annotated[float | None, typer.Option(help="Days of traffic, keeping the rate; with --requests, the "
                                                    "rate follows.", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (member i of a bundle gets seed + i); default: the "
                                                  "scenario's own.", show_default=False)] = None,
    gzip: Annotated[bool, typer.Option("--gzip/--no-gzip", help="Compress the logs.")] = True,
) -> None:
    """Simulate a deployment and write the logs it would keep: a vLLM or SGLang log per pod and engine start
    (<engine>/<label>/<pod>/<engine>.log.gz), the LiteLLM gateway log, and ground_truth.json.

    Example: attribution simulate --scenario sample --out sample_logs --seed 7
    """
    from attribution.simulate.output import simulate_to_dir

    truth = simulate_to_dir(scenario, out, requests=requests, days=days, seed=seed, compress=gzip,
                            progress=lambda msg: render.err.print(msg, highlight=False))
    _summary(truth, out)
