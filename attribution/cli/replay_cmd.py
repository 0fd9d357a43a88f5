"""`attribution replay`: the store's requests as a trace a load generator replays (attribution.replay), the
summary of what was exported and each generator's command line on stderr (stdout, without --out, is the trace)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attribution import render
from attribution.choices import Sessions, TraceFormat
from attribution.cli import options as opt
from attribution.cli.app import app, connect, resolve
from attribution.errors import UsageError


def _many(help_text: str) -> object:
    return typer.Option(help=help_text + " (repeatable; `(none)` for requests whose source does not say).",
                        show_default=False)


WorkloadOpt = Annotated[list[str] | None, _many("Only this workload")]
DeploymentOpt = Annotated[list[str] | None, _many("Only this deployment")]
LabelOpt = Annotated[list[str] | None, _many("Only this label (cohort tag)")]
VersionOpt = Annotated[list[str] | None, typer.Option(
    "--engine-version", help="Only requests served by this engine version, as `status` names it (e.g. "
                             "'vllm 0.20.1'; repeatable).", show_default=False)]


@app.command("replay")
def replay_cmd(
    store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
    workload: WorkloadOpt = None, deployment: DeploymentOpt = None, label: LabelOpt = None,
    version: VersionOpt = None, config: opt.ConfigOpt = None,
    speed: Annotated[float, typer.Option(help="Replay this many times faster: arrival times are divided by it "
                                              "(2.5 replays an incident 2.5x faster).")] = 1.0,
    fmt: Annotated[TraceFormat, typer.Option("--format", "-f", help="Trace format: mooncake (JSONL, ms, "
                                             "hash_ids), aiperf (mooncake_trace with session_id), sglang "
                                             "(bench_serving mooncake), vllm (bench serve timed_trace), burstgpt "
                                             "(CSV, s) or csv (this tool's, for simulate --replay).")]
    = TraceFormat.mooncake,
    out: Annotated[Path | None, typer.Option(help="File to write (default: stdout).", show_default=False)] = None,
    sessions: Annotated[Sessions, typer.Option(help="What groups requests into conversations: none, or user "
                                                    "(the store's `user`: LiteLLM's user_api_key_user_id; the store has no session id).")]
    = Sessions.none,
) -> None:
    """Export the window's requests as a trace a load generator replays: one request per line in arrival
    order, times relative to the first arrival (divided by --speed), lengths and Mooncake block ids. The
    summary (stderr) gives requests, span before and after --speed, counts per workload, and the command line
    of each load generator that reads the format.

    Example: attribution replay --since 2026-05-04T10:00 --until 2026-05-04T11:00 --speed 2.5 --format mooncake --out incident.jsonl
    """
    from attribution import joincache
    from attribution.dashboard import Filters, narrow
    from attribution.replay import replay_requests, write

    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise UsageError(f"--out {out}: " + ("is a directory" if out.is_dir() else "its directory does not exist"))
    st = resolve(config, store=store)
    flt = Filters(deployments=tuple(deployment or ()), workloads=tuple(workload or ()), labels=tuple(label or ()),
                  versions=tuple(version or ()))
    con = connect(st, "replay")
    joincache.use(con)  # the commit's cached engine x gateway join, before the filters narrow it
    rep = replay_requests(narrow(con, flt), since=since, until=until, speed=speed, sessions=sessions)
    text = write(rep, fmt, out)
    if text is not None:
        typer.echo(text, nl=False)
    shown = Filters(rep.window.since, rep.window.until, flt.deployments, flt.workloads, flt.labels, flt.versions)
    _summary(rep, fmt, str(out) if out else "TRACE", shown.describe())


def _summary(rep, fmt: TraceFormat, path: str, filters: str) -> None:  # noqa: ANN001 (a Replay)
    from attribution.replay import commands

    s = rep.summary()
    say = render.err.print
    if not s["requests"]:
        say("note: no request with an arrival time and a prompt length in the window "
            f"({filters}); the trace is empty", highlight=False)
        return
    say(f"{s['requests']:,} requests ({filters}) from {s['first_arrival']:%Y-%m-%d %H:%M:%S} UTC, span "
        f"{s['span_s']:,.3f} s; at --speed {s['speed']:g} the replay spans {s['replay_span_s']:,.3f} s; "
        f"{s['input_tokens']:,} input and {s['output_tokens']:,} output tokens", highlight=False)
    if fmt != TraceFormat.burstgpt:
        whole = s["with_hash_ids"] - s["hash_ids_whole_blocks"]
        say(f"block hashes (512-token Mooncake blocks) carried for {s['with_hash_ids']:,} requests"
            + (f" ({whole:,} of them not one id per block: a reader may reject them)" if whole else "")
            + ("" if fmt == TraceFormat.csv else
               f"; {s['requests'] - s['with_hash_ids']:,} without get fresh ids (no prefix reuse)"), highlight=False)
    if s["sessions"] is not None:
        say(f"{s['sessions']:,} sessions (by {rep.sessions.value}; a request without one is a session of its own), "
            "turns in arrival order", highlight=False)
    for what, n in s["left_out"].items():
        say(f"note: {n:,} requests left out ({what.replace('_', ' ')})", highlight=False)
    say(render.table(rep.per_workload(), "per workload"))
    say(f"replay it ({fmt.value} format; MODEL is the served model's name):", highlight=False)
    for c in commands(fmt, path, rep):
        say(f"  {c['generator']}: {c['command']}\n    time: {c['time knob']}", highlight=False, markup=False)
