"""Parsing one file without a store: choosing its source, running it over chunks of lines (or the whole file,
or a document in batches), and conforming the result to the canonical tables with provenance, value checks
and the line census. `parse_path` is the whole path for one file (tests, previews)."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import polars as pl

from attribution import census, detect, discovery, domains, formats, reader, sources
from attribution.errors import AttributionError, InputError
from attribution.ingest.framing import lines_frame, strip_nul
from attribution.ingest.naming import default_deployment
from attribution.schema import META_TABLES, TABLES, conform, empty
from attribution.sources.base import ParseContext, ParseResult, Source, rules_for
from attribution.wrappers.layer import BYTE_ESCAPE, WrappedSource

WHOLE_MAX_BYTES = 2 << 30


@dataclass
class ParsedFile:
    """A file read without a store (tests, previews): every table's rows and the errors."""

    source: str
    tables: dict[str, pl.DataFrame]

    @property
    def errors(self) -> pl.DataFrame:
        return self.tables["ingest_errors"]

    @property
    def census(self) -> dict[str, int]:
        """Lines (records) per class: parsed, skipped, unrecognised."""
        return census.totals(self.tables["ingest_line_shapes"])


# -- one file ------------------------------------------------------------------------------------------


def choose_source(path: Path, head: bytes, fmt: str | None) -> Source | None:
    if fmt:
        return formats.get(fmt)
    if discovery.DOC_NAME_RE.search(path.name):  # documentation quotes log lines; --format still reads it
        return None
    mtime = path.stat().st_mtime
    found = formats.sniff(head.decode("utf-8", errors="replace"), str(path), mtime)
    if found is None and len(head) >= reader.HEAD_BYTES:  # noise first (pip output): look further in
        found = detect.sniff_past_noise(path, mtime)
    return found

def _finish(result: ParseResult, src: Source, ctx: ParseContext, extra_errors: list[dict[str, Any]],
            lines: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """Conform a parse result to the canonical tables, fill provenance columns and count the line census of
    the input `lines` (line, text) it came from; an `extra_errors` line is an input line too (one over the
    length limit, never given to the source). Without `lines` (a whole file), the source's `records` are
    counted, else the records it named in rows and errors."""
    out: dict[str, pl.DataFrame] = {}
    ts_hi = domains.ts_max(ctx.max_ts, 0.0) if ctx.max_ts is not None else domains.ts_max()
    value_errors: list[pl.DataFrame] = []  # values out of their column's domain: nulled, the rows kept
    for table, df in result.tables.items():
        if table not in TABLES or table in META_TABLES:
            raise ValueError(f"source {src.name} produced rows for unknown table {table!r}")
        if df.height == 0:
            continue
        fill = {"source": src.name, "source_kind": src.kind, "file": ctx.path, "label": ctx.label}
        cols = [pl.lit(v, pl.Utf8).alias(k) for k, v in fill.items() if k not in df.columns]
        if "deployment" in df.columns:
            cols.append(pl.col("deployment").fill_null(ctx.deployment))
        else:
            cols.append(pl.lit(ctx.deployment, pl.Utf8).alias("deployment"))
        if "request_id" in TABLES[table] and "request_key" not in df.columns and "request_id" in df.columns:
            cols.append(pl.col("request_id").alias("request_key"))
        df, bad = domains.validate(table, df.with_columns(cols), ts_hi)
        if bad.height:
            value_errors.append(bad)
        out[table] = conform(table, df)
    errs = []
    if result.errors is not None and result.errors.height:
        # By position: the part before the content (prompt, messages, token ids), else the line's shape.
        errs.append(result.errors.with_columns(census.error_sample_expr(pl.col("sample")).alias("sample")))
    errs += value_errors
    if extra_errors:
        errs.append(pl.DataFrame(extra_errors, schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}))
    if errs:
        e = pl.concat(errs).with_columns(pl.lit(ctx.path).alias("file"), pl.lit(src.name).alias("source"))
        out["ingest_errors"] = conform("ingest_errors", e)
    errors = pl.concat([e.select("line", "reason") for e in errs]) if errs else None
    shapes = census.of_result(result, src.name, lines, [e["line"] for e in extra_errors], errors, source_rules)
    if shapes.height:
        shapes = shapes.with_columns(pl.lit(ctx.path).alias("file"), pl.col("source").fill_null(src.name))
        out["ingest_line_shapes"] = conform("ingest_line_shapes", shapes)
    return out


def source_rules(name: str | None) -> tuple[tuple[str, str], ...]:
    """The skip rules of a source by name (its own `skip_rules`), the file's `common` ones for another name."""
    src = sources.registry().get(name) if name else None
    return src.skip_rules if src is not None else rules_for(name)


def file_error(path: str, source: str | None, reason: str) -> pl.DataFrame:
    """An `ingest_errors` row about a whole file (no line)."""
    return conform("ingest_errors", pl.DataFrame(
        {"file": [path], "line": [None], "source": [source], "reason": [reason], "sample": [None]},
        schema_overrides={"line": pl.Int64, "source": pl.Utf8, "sample": pl.Utf8}))


_NO_LINES = pl.DataFrame(schema={"line": pl.Int64, "text": pl.Utf8})


@runtime_checkable
class DocumentSource(Protocol):
    """A source that reads its file in batches (a JSON document, a CSV export; a document wrapper's file)."""

    def parse_document(self, pieces: Iterable[bytes], ctx: ParseContext) -> Iterator[ParseResult]: ...


def parse_units(
    path: Path, src: Source, ctx: ParseContext, start: int = 0, first_line: int = 1,
    chunk_bytes: int = reader.DEFAULT_CHUNK_BYTES, max_line_bytes: int = reader.DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[reader.Chunk | None, dict[str, Any], dict[str, pl.DataFrame]]]:
    """Parse a file from an offset, yielding (chunk, parser state before the chunk, rows) per chunk.

    `ctx.state` is advanced in place; the state *before* a chunk is what a resumed read must start from
    when that chunk turns out to be an unterminated tail that will be read again. A wrapped file ends with a
    flush (pending partial records, identities whose format was not decided yet) yielded as an empty tail
    chunk: its rows are superseded when the file grows, and the state kept is the one before it.
    """
    wrapped = isinstance(src, WrappedSource)
    if isinstance(src, WrappedSource):
        ctx.options.setdefault("_max_line_bytes", max_line_bytes)
        streamed = src.wrapper.mode == "document"
    else:
        streamed = src.mode == "whole" and isinstance(src, DocumentSource)
    if streamed:  # in batches: a document wrapper's file, a JSON document, a CSV export
        yield from _parse_document(path, src, ctx)
        return
    if src.mode == "whole":
        pieces = reader.Pieces(path)
        buf = bytearray()
        for piece in pieces:
            buf += piece
            if len(buf) > WHOLE_MAX_BYTES:
                raise InputError(f"{path}: larger than {WHOLE_MAX_BYTES >> 20} MiB; {src.name} reads whole files")
        truncated = [{"line": None, "reason": pieces.truncated, "sample": None}] if pieces.truncated else []
        before = copy.deepcopy(ctx.state)
        result = src.parse_whole(bytes(buf), ctx)
        yield None, before, _finish(result, src, ctx, truncated)
        return
    pieces = reader.Pieces(path, start)
    last_line, end, tail_before = first_line, start, None
    # A sniffed plain line format hands the lines it cannot read to the file's other formats; a forced one
    # reads every line itself (and says so when it reads none: forced_mismatch).
    mixing = not wrapped and not ctx.options.get("_forced")
    for chunk in reader.chunks(path, start, first_line, chunk_bytes, max_line_bytes, pieces=pieces):
        before = copy.deepcopy(ctx.state)
        extra: list[dict[str, Any]] = [
            {"line": ln, "reason": f"line of {size:,} bytes is longer than the {max_line_bytes:,}-byte limit: skipped",
             "sample": None}
            for ln, size in chunk.long_lines
        ]
        frame = lines_frame(chunk, BYTE_ESCAPE if wrapped else "replace") if chunk.n_lines else None
        frame, nul = strip_nul(frame) if b"\x00" in chunk.data else (frame, None)
        if frame is None:
            parts = [(src, ParseResult(), _NO_LINES)]
        elif mixing:
            parts = detect.parse_mixed(src, frame, ctx)
        else:
            parts = [(src, src.parse(frame, ctx), frame)]
        if nul is not None:
            parts[0][1].add_errors(nul)
        last_line, end = chunk.first_line + chunk.n_lines, chunk.end
        if chunk.tail:
            tail_before = before
        rows = _finish(parts[0][1], src, ctx, extra, parts[0][2])
        for other, res, lines in parts[1:]:  # lines of other formats in the same file
            for t, df in _finish(res, other, ctx, [], lines).items():
                rows[t] = pl.concat([rows[t], df]) if t in rows else df
        yield chunk, before, rows
    if pieces.truncated:
        err = [{"line": last_line, "reason": pieces.truncated, "sample": None}]
        yield None, copy.deepcopy(ctx.state), _finish(ParseResult(), src, ctx, err)
    if isinstance(src, WrappedSource):
        before = tail_before if tail_before is not None else copy.deepcopy(ctx.state)
        rows = _finish(src.finish(ctx), src, ctx, [])
        if rows:
            yield reader.Chunk(b"", last_line, 0, end, end, tail=True), before, rows


def _parse_document(path: Path, src: Source, ctx: ParseContext
                    ) -> Iterator[tuple[reader.Chunk | None, dict[str, Any], dict[str, pl.DataFrame]]]:
    """A document wrapper's file or a whole-file source's with `parse_document`, batch by batch (memory
    bounded by a batch). Like a whole-file source's, the file is read again from the start when it changes;
    only the last unit carries its bytes."""
    if not isinstance(src, DocumentSource):
        raise AttributionError(f"{src.name} has no parse_document: it reads a file whole")
    pieces = reader.Pieces(path)
    held = None
    for result in src.parse_document(pieces, ctx):
        if held is not None:
            yield reader.Chunk(b"", 0, 0, 0, 0), {}, held
        held = _finish(result, src, ctx, [])
    rows = dict(held or {})
    if pieces.truncated:
        err = _finish(ParseResult(), src, ctx, [{"line": None, "reason": pieces.truncated, "sample": None}])
        rows["ingest_errors"] = pl.concat([rows[t] for t in ("ingest_errors",) if t in rows] + [err["ingest_errors"]])
    yield None, {}, rows


def parse_path(
    path: str | os.PathLike[str], fmt: str | None = None, *, deployment: str | None = None,
    label: str | None = None, year: int | None = None, tz: str = "UTC", options: dict[str, Any] | None = None,
    chunk_bytes: int | None = None,
) -> ParsedFile:
    """Read one file through the ingest's own path (sniff, decompress, chunk, parse, conform), no store."""
    p = Path(path)
    src = choose_source(p, reader.read_head(p), fmt)
    if src is None:
        from attribution import wrappers

        known = ", ".join(sorted([*sources.registry(), *wrappers.registry()]))
        raise InputError(f"{p}: not a recognised format (use --format; known: {known})")
    # The latest admissible time is the clock at the start plus the default `max_future`, as an ingest's (one
    # bound for every chunk: the value checks built for a chunk's columns are then reused by the next).
    ctx = ParseContext(str(p), deployment or default_deployment(p), label, year, tz, p.stat().st_mtime,
                       dict(options or {}, _forced=bool(fmt)), {}, max_ts=time.time() + domains.MAX_FUTURE_S)
    parts: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLES}
    for _chunk, _before, rows in parse_units(p, src, ctx, chunk_bytes=chunk_bytes or reader.DEFAULT_CHUNK_BYTES):
        for t, df in rows.items():
            parts[t].append(df)
    tables = {t: pl.concat(dfs) if dfs else empty(t) for t, dfs in parts.items()}
    tables["ingest_line_shapes"] = census.per_file(tables["ingest_line_shapes"])  # one row per shape, as stored
    n_rows = sum(df.height for t, df in tables.items() if t not in META_TABLES)
    if reason := detect.forced_mismatch(fmt, n_rows, census.totals(tables["ingest_line_shapes"])):
        tables["ingest_errors"] = pl.concat([tables["ingest_errors"], file_error(str(p), src.name, reason)])
    return ParsedFile(src.name, tables)
