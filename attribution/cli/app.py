"""The Typer application and what every command shares: the store and format options, opening the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from attribution.config import Settings, connect_settings, load_settings
from attribution.render import Format
from attribution.store import Store, default_store_path

if TYPE_CHECKING:
    import duckdb

app = typer.Typer(
    name="attribution",
    help="Answers from LLM-serving logs: ingest vLLM/SGLang/gateway logs and traces, then query them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

StoreOpt = Annotated[
    str | None,  # (not a Path: it would make s3://bucket/prefix s3:/bucket/prefix)
    typer.Option("--store", help="Store directory, or an s3://, gs:// or abfs:// URL for reading (default: "
                                 "$ATTRIBUTION_STORE, else ./attribution-store).",
                 show_default=False),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]


def _version(value: bool) -> None:
    if value:
        from attribution import __version__

        typer.echo(f"attribution {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Answers from LLM-serving logs: ingest vLLM/SGLang/gateway logs and traces, then query them."""


def open_store(store: str | Path | None) -> Store:
    return Store.open(default_store_path(store))
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (default: $ATTRIBUTION_CONFIG, else the nearest attribution.toml, "
                                  "or pyproject.toml with a tool.attribution table).", show_default=False),
]


def resolve(config: Path | None, **flags: object) -> Settings:
    """Every setting a command uses, one precedence: its flag, else $ATTRIBUTION_<KEY>, else the config file,
    else the default (attribution.config.load_settings)."""
    return load_settings(flags, config=config)


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A connection to the settings' store with the settings' workload names applied."""
    con = open_store(default_store_path(settings.store)).connect()
    connect_settings(con, settings)
    return con
