"""A source's parse run like the ingest runs it, for the parser tests: the lines in chunks sharing one
ParseContext, whose state goes through JSON between chunks as the ingest persists it."""

from __future__ import annotations

import json

import polars as pl

from attribution import schema
from attribution.sources.base import ParseContext, Source


def parse_in_chunks(src: Source, lines: pl.DataFrame, *, year: int | None, tz: str, chunk: int | None = None
                    ) -> tuple[dict[str, pl.DataFrame], list[pl.DataFrame], list[int], ParseContext]:
    """`lines` through `src.parse` in chunks of `chunk` lines (default: one chunk): every table conformed
    and concatenated in chunk order, the error frames, the consumed line numbers and the context at the end."""
    ctx = ParseContext(path="x.log", deployment="d", label=None, year=year, tz=tz, file_mtime=0.0)
    tables: dict[str, list[pl.DataFrame]] = {}
    errors: list[pl.DataFrame] = []
    consumed: list[int] = []
    step = chunk or max(lines.height, 1)
    for off in range(0, lines.height, step):
        res = src.parse(lines.slice(off, step), ctx)
        for name, df in res.tables.items():
            tables.setdefault(name, []).append(schema.conform(name, df))
        if res.errors is not None:
            errors.append(res.errors)
        if res.consumed is not None:
            consumed.extend(res.consumed.to_list())
        ctx.state = json.loads(json.dumps(ctx.state))
    return {name: pl.concat(dfs) for name, dfs in tables.items()}, errors, consumed, ctx
