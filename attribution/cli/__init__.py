"""The `attribution` command: a thin client of the library. Each command parses options, calls one or two
library functions and renders the result; errors become one line on stderr and a documented exit code.
Commands live in the modules imported below, each registering on the one Typer `app`."""

from __future__ import annotations

import sys

from attribution import render
from attribution.cli import (
    analyses,  # noqa: F401
    arrivals_cmd,  # noqa: F401
    cache_cmd,  # noqa: F401
    dashboard_cmd,  # noqa: F401
    memsplit_cmd,  # noqa: F401
    metrics_cmd,  # noqa: F401  (registers metrics: Prometheus histograms and counters)
    replay_cmd,  # noqa: F401
    report_cmd,  # noqa: F401
    simulate_cmd,  # noqa: F401
    store_cmds,  # noqa: F401  (registers ingest, status, query, export)
    store_upgrade_cmd,  # noqa: F401  (registers store upgrade)
    thresholds_compare_cmds,  # noqa: F401  (registers thresholds, compare)
    window_cmds,  # noqa: F401  (registers changes, health)
)
from attribution.cli.app import app
from attribution.config import env
from attribution.errors import AttributionError

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()  # standalone: Typer prints usage errors itself (exit 2) and turns Ctrl-C into an abort
    except AttributionError as exc:
        render.err.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: one line, the traceback only on request
        if env("ATTRIBUTION_DEBUG"):
            raise
        render.err.print(
            f"[red]internal error:[/] {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(a bug: please report it with the command line; ATTRIBUTION_DEBUG=1 shows the traceback)",
            highlight=False, soft_wrap=True,
        )
        sys.exit(1)
