"""The contract between the ingest and one log format.

A source says whether a file is its own (`sniff`, from the decoded head of the file) and turns lines into
rows of the canonical tables (`parse`). The ingest owns files, offsets, decompression, chunking, the store
and provenance columns; a source owns only the meaning of lines.

Line sources (`mode = "lines"`) are called once per chunk of complete lines, in file order; anything they
must remember across chunks (the current year, engine version, the start line of an engine start, the last
timestamp) lives in `ctx.state`, a JSON-serialisable dict that the ingest persists with the file's offset, so
a file read in one go and a file read in pieces across runs (or after a crash) give identical rows.
Whole-file sources (`mode = "whole"`: JSON documents, Parquet) get the complete decompressed bytes once, or,
when they define `parse_document(pieces, ctx) -> Iterator[ParseResult]`, the decompressed pieces to stream
(bounded memory: LiteLLM's JSON arrays).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import polars as pl


@dataclass
class ParseContext:
    path: str  # the file as the user named it (for messages and the `file` column)
    deployment: str  # --deployment, else derived from the path (see attribution.ingest.default_deployment)
    label: str | None  # --label
    year: int | None  # --year; None means: infer (see attribution.sources.timefmt)
    tz: str  # IANA zone of naive timestamps (--tz, default the machine's)
    file_mtime: float  # POSIX seconds, for year inference
    options: dict[str, Any] = field(default_factory=dict)  # source-specific CLI options (--start, --mapping, ...)
    state: dict[str, Any] = field(default_factory=dict)  # parser-owned, persisted between chunks and runs
    # The latest admissible timestamp (POSIX seconds): the ingest's clock plus the `max_future` setting; None:
    # the clock when the rows are checked plus the default (see attribution.domains).
    max_ts: float | None = None


@dataclass
class ParseResult:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # table name -> rows (subset of columns)
    errors: pl.DataFrame | None = None  # columns: line (Int64), reason (Utf8), sample (Utf8)
    # Lines (Int64) that went into rows without being a row's `line`: the other lines of a multi-line record,
    # startup lines folded into one engine_config row. The line census counts them as parsed.
    consumed: pl.Series | None = None
    # What the line census counts when it is not the input lines one for one (set by wrapper sources):
    # line (Int64, first physical line or record of the record), span (Int64, physical lines or records it
    # covers, >= 1), text (Utf8, the unwrapped line whose shape is counted), source (Utf8, the inner format
    # whose `skip_rules` apply; null when no format claimed the record). Spans sum to the input's lines.
    records: pl.DataFrame | None = None

    def add(self, table: str, df: pl.DataFrame | None) -> None:
        if df is None or df.height == 0:
            return
        prev = self.tables.get(table)
        self.tables[table] = df if prev is None else pl.concat([prev, df], how="diagonal_relaxed")

    def add_consumed(self, lines: pl.Series | None) -> None:
        if lines is None or lines.len() == 0:
            return
        lines = lines.cast(pl.Int64)
        self.consumed = lines if self.consumed is None else pl.concat([self.consumed, lines])

    def add_errors(self, df: pl.DataFrame | None) -> None:
        if df is None or df.height == 0:
            return
        df = df.select(
            pl.col("line").cast(pl.Int64), pl.col("reason").cast(pl.Utf8), pl.col("sample").cast(pl.Utf8)
        )
        self.errors = df if self.errors is None else pl.concat([self.errors, df])


def merged(parts: Iterable[ParseResult]) -> ParseResult:
    """The results of a streamed document's batches as one (a document source's `parse_whole`: tests,
    previews)."""
    out = ParseResult()
    records = []
    for part in parts:
        for table, df in part.tables.items():
            out.add(table, df)
        out.add_errors(part.errors)
        out.add_consumed(part.consumed)
        if part.records is not None:
            records.append(part.records)
    out.records = pl.concat(records) if records else None
    return out


def document_start(pieces: Iterable[bytes]) -> tuple[bytes, Iterator[bytes]]:
    """The first bytes of a streamed document up to its first non-blank one (a UTF-8 BOM removed), and the
    pieces after them: enough to tell an array from an object."""
    it = iter(pieces)
    first = b""
    for piece in it:
        first += piece
        if first.lstrip(b"\xef\xbb\xbf \t\r\n"):
            break
    return first.removeprefix(b"\xef\xbb\xbf"), it


class Source:
    """Base class; subclasses set the class attributes and implement `sniff` and `parse` (or `parse_whole`)."""

    # Class attributes of a parser; a wrapped source (attribution.wrappers.layer) sets them per instance.
    name: str  # format name, e.g. "vllm_log"; also the --format value
    kind: ClassVar[str]  # engine / gateway / trace / bench
    mode: str = "lines"  # or "whole"
    description: str = ""

    @property
    def skip_rules(self) -> tuple[tuple[str, str], ...]:
        """Lines that are known and carry nothing for us (banners, weight loading, progress bars, warnings,
        tracebacks): (reason, regex searched in the line's text), from `sources/skip_rules.toml` (this
        source's section, then `common`). The line census counts a line that made no row and matches one of
        these as `skipped` with that reason, any other as `unrecognised`. A subclass may override it."""
        return rules_for(self.name)

    def sniff(self, head: str, path: str) -> float:
        """Confidence 0..1 that the file whose first ~64 KiB decode to `head` is in this format."""
        raise NotImplementedError

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        """`lines` has columns `line` (Int64, 1-based physical line number) and `text` (Utf8, no newline;
        `\\r` and ANSI codes still in place: stripping them is the source's business), and, when the lines
        came out of a wrapper (Docker, CRI, journald, a log platform's export; see attribution.wrappers),
        `rec_ts` (Datetime us UTC, null where unknown): the time the wrapper recorded for the line. A source
        uses it where the line itself has no time, and for the year a vLLM header does not print."""
        raise NotImplementedError

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        raise NotImplementedError


RULES_FILE = Path(__file__).parent / "skip_rules.toml"


@cache
def skip_rules() -> dict[str, tuple[tuple[str, str], ...]]:
    """Source name -> (reason, regex) pairs, the `common` ones (blank lines, ...) after each source's own."""
    doc = tomllib.loads(RULES_FILE.read_text())
    common = tuple((r["reason"], r["match"]) for r in doc.pop("common", {}).get("rules", []))
    out = {name: tuple((r["reason"], r["match"]) for r in sec.get("rules", [])) + common for name, sec in doc.items()}
    out[""] = common
    return out


def rules_for(source: str | None) -> tuple[tuple[str, str], ...]:
    """The rules of the file; the `common` ones for a source without a section (or no source)."""
    rules = skip_rules()
    return rules.get(source or "", rules[""])
