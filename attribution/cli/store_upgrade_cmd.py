"""`attribution store upgrade`: bring a store's layout to this version's, in place (what the next ingest would
do first), crash-safe like any commit."""

from __future__ import annotations

import typer

from attribution import render
from attribution.cli import options as opt
from attribution.cli.app import app, open_store

store_app = typer.Typer(help="Commands over the store's layout.", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("upgrade")
def upgrade_cmd(store: opt.StoreOpt = None) -> None:
    """Upgrade the store's layout in place (layout 1's flat data files become day partitions); a no-op on a
    current store. Readers work meanwhile; an interrupted upgrade is finished by the next run or ingest.

    Example: attribution store upgrade --store attribution-store
    """
    from attribution.store import LAYOUT_VERSION

    st = open_store(store)
    before = st.layout
    with st.writer() as w:  # (the writer upgrades an older layout as it opens the store)
        pass
    if before == LAYOUT_VERSION:
        render.err.print(f"{st}: layout {LAYOUT_VERSION} already, nothing to do")
    else:
        render.err.print(f"{st}: upgraded from layout {before} to {LAYOUT_VERSION} (commit {w.snapshot.version})")
