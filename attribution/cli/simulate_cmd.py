"""`attribution simulate`: write the engine and gateway logs of a simulated deployment, and its ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from attribution import render
from attribution.cli.app import app
from attribution.errors import UsageError


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
    out: Annotated[Path | None, typer.Option(help="Directory to write; the files of an earlier run there are "
                                                  "replaced (optional with --replay).", show_default=False)] = None,
    requests: Annotated[int | None, typer.Option(help="Requests at the mean rate, which sets the days (the daily "
                                                      "cycle makes the count differ); split over a bundle's "
                                                      "members.", show_default=False)] = None,
    days: Annotated[float | None, typer.Option(help="Days of traffic, keeping the rate; with --requests, the "
                                                    "rate follows.", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (member i of a bundle gets seed + i); default: the "
                                                  "scenario's own.", show_default=False)] = None,
    gzip: Annotated[bool, typer.Option("--gzip/--no-gzip", help="Compress the logs.")] = True,
    replay: Annotated[Path | None, typer.Option(help="Replay this trace's arrivals instead of generating traffic: "
                                                     "an `attribution replay` export, a Mooncake, BurstGPT or Azure "
                                                     "trace, or any log the ingest reads.", show_default=False)] = None,
    kv_tokens: Annotated[int | None, typer.Option(help="With --replay: KV pool tokens per pod (a memory split).",
                                                  show_default=False)] = None,
    state_slots: Annotated[int | None, typer.Option(help="With --replay: state slots per pod (hybrid models).",
                                                    show_default=False)] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="With --replay: running requests per pod at most.",
                                                     show_default=False)] = None,
    prefill_speedup: Annotated[float | None, typer.Option(help="With --replay: prefill this many times faster.",
                                                          show_default=False)] = None,
    pods: Annotated[int | None, typer.Option(help="With --replay: pods (requests are dealt round robin).",
                                             show_default=False)] = None,
) -> None:
    """Simulate a deployment and write the logs it would keep: a vLLM or SGLang log per pod and engine start
    (<engine>/<label>/<pod>/<engine>.log.gz), the LiteLLM gateway log, and ground_truth.json.

    With --replay, the scenario's engine serves a real arrival sequence instead, changed by --kv-tokens,
    --state-slots, --max-num-seqs, --prefill-speedup or --pods; the latency per workload goes to stdout (--out
    also writes the logs).

    Example: attribution simulate --scenario sample --out sample_logs --seed 7

    Example: attribution simulate --scenario vllm-chat-small --replay incident.jsonl --max-num-seqs 64
    """
    if replay is not None:
        _replay(scenario, replay, out, seed, gzip, requests, days,
                (kv_tokens, state_slots, max_num_seqs, prefill_speedup, pods))
        return
    if any(v is not None for v in (kv_tokens, state_slots, max_num_seqs, prefill_speedup, pods)):
        raise UsageError("--kv-tokens, --state-slots, --max-num-seqs, --prefill-speedup and --pods go with --replay")
    if out is None:
        raise UsageError("--out DIR is needed (without --replay the logs are the output)")
    from attribution.simulate.output import simulate_to_dir

    truth = simulate_to_dir(scenario, out, requests=requests, days=days, seed=seed, compress=gzip,
                            progress=lambda msg: render.err.print(msg, highlight=False))
    _summary(truth, out)


def _replay(scenario: str, trace: Path, out: Path | None, seed: int | None, gzip: bool, requests: int | None,
            days: float | None, changes: tuple[int | None, int | None, int | None, float | None, int | None]) -> None:
    from attribution.simulate.output import write_outputs
    from attribution.simulate.replay import WhatIf, simulate_replay

    if requests is not None or days is not None:
        raise UsageError("--requests and --days do not apply to --replay: the trace has its own arrivals")
    res, summary, notes = simulate_replay(trace, scenario, WhatIf(*changes), seed=seed)
    render.out.print(render.table(summary, f"{res.scenario.name} replaying {trace.name} (simulated; seconds; peak running over all pods)"))
    for note in notes:
        render.err.print(f"note: {note}", highlight=False)
    if out is not None:
        truth = write_outputs([res], out, compress=gzip, meta={"scenario": res.scenario.name, "replay": str(trace)})
        _summary(truth, out)
