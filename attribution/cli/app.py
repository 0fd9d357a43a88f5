"""The Typer application and what every command shares: the store and format options, opening the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attribution.render import Format
from attribution.store import Store, default_store_path

app = typer.Typer(
    name="attribution",
    help="Answers from LLM-serving logs: ingest vLLM/SGLang/gateway logs and traces, then query them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory (default: $ATTRIBUTION_STORE, else ./attribution-store).",
                 show_default=False),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]


def open_store(store: Path | None) -> Store:
    return Store.open(default_store_path(store))
