"""`attribution dashboard`: start the Streamlit app over a store (attribution.dashboard_launch launches it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attribution import dashboard_launch, render
from attribution.cli import options as opt
from attribution.cli.app import app, resolve
from attribution.errors import UsageError
from attribution.spark import duckdb_only_note
from attribution.store import default_store_path


@app.command("dashboard")
def dashboard_cmd(
    store: opt.StoreOpt = None,
    port: Annotated[int, typer.Option(help="Port to serve on.")] = dashboard_launch.DEFAULT_PORT,
    host: Annotated[str, typer.Option(help="Address to bind; the default serves this machine only. Use "
                                           "0.0.0.0 to share it (anyone who reaches the port reads the store).")]
    = "127.0.0.1",
    config: opt.ConfigOpt = None,
) -> None:
    """Explore the store in a browser: filter to a time range, deployment, workload, label or engine version
    and see lengths, concurrency, latency, feature thresholds, the memory split and a cohort comparison.
    Read-only; it may run while an ingest writes.

    Example: attribution dashboard --store demo-store --port 8501
    """
    st = resolve(config, store=store)  # a bad setting is a usage error here, not a broken page later
    path = default_store_path(st.store)
    if isinstance(path, str):  # an object-store URL
        raise UsageError(f"{path}: the dashboard reads local stores only (analyses and report read URLs)")
    if dashboard_launch.store_version(path) is None:
        render.err.print(f"[yellow]note:[/] no store at {path} yet; the pages stay empty until an ingest fills it",
                         highlight=False)
    if (note := duckdb_only_note(st, "the dashboard")) is not None:
        render.err.print(f"[yellow]note:[/] {note}", highlight=False)
    render.err.print(f"dashboard on http://{host}:{port}  (Ctrl-C stops it)", highlight=False)
    found = Path(st.config_file) if st.config_file else None
    dashboard_launch.launch(path, host=host, port=port, config=config or found)
