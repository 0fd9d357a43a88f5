"""A planned file and its parse into units: all a worker process needs (picklable), and what it sends back per
chunk (rows, or rows staged to Parquet for large chunks, and the offset and parser state they lead to)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from attribution import reader
from attribution.errors import InputError
from attribution.ingest.parsing import parse_units
from attribution.sources.base import ParseContext, Source
from attribution.store import Staged, stage


@dataclass
class Plan:
    """A file to read and where to start: all a worker process needs to parse it (picklable)."""

    path: str
    source: Source  # pickled by reference to its class: a worker imports the same module
    ctx: ParseContext
    offset: int
    first_line: int
    chunk_bytes: int
    max_line_bytes: int
    size: int  # bytes on disk, for scheduling the largest files first
    stage_root: str | None = None  # a worker writes the rows of large chunks into this store's staging area
    stage_min: int = 0  # ... those of at least this many bytes


    @property
    def to_read(self) -> int:
        return max(self.size - self.offset, 0) if self.offset <= self.size else self.size


@dataclass
class Unit:
    """What the store needs to know of a parsed chunk (its bytes stay in the process that read them)."""

    end: int
    last_line: int
    tail: bool
    nbytes: int
    end_fp: str | None = None  # fingerprint of the chunk's last bytes (up to FP_BYTES) just before `end`
    end_fp_len: int = 0


def parse_plan(plan: Plan) -> Iterator[tuple[Any, ...]]:
    """Parse a planned file: ("unit", Unit | None, state before, state after, rows) per chunk (None: a whole-file
    read or a truncation notice), then ("done",), or ("failed", message) when the file cannot be read on."""
    src, ctx = plan.source, plan.ctx
    try:
        for chunk, before, rows in parse_units(Path(plan.path), src, ctx, plan.offset, plan.first_line,
                                               plan.chunk_bytes, plan.max_line_bytes):
            unit = None
            if chunk is not None:
                unit = Unit(chunk.end, chunk.first_line + chunk.n_lines - 1, chunk.tail, len(chunk.data))
                if chunk.data and not chunk.tail:
                    last = chunk.data[-reader.FP_BYTES:]
                    unit.end_fp, unit.end_fp_len = reader.fingerprint(last), len(last)
            out: dict[str, pl.DataFrame | Staged] = dict(rows)
            if plan.stage_root and unit is not None and unit.nbytes >= plan.stage_min:
                # Written here rather than pickled to the ingest process, which would then write them itself.
                # (the census stays a frame: the account counts its lines; it is a few rows per chunk)
                out = {t: df if t == "ingest_line_shapes" else stage(plan.stage_root, t, df) for t, df in rows.items()}
            yield "unit", unit, before, copy.deepcopy(ctx.state), out
    except InputError as exc:
        yield "failed", str(exc)
        return
    except FileNotFoundError as exc:  # deleted (and its directory too) while being read
        yield "failed", f"deleted while it was read: {exc.strerror or exc}", "vanished"
        return
    except (PermissionError, reader.NotRegularFile) as exc:
        yield "failed", f"cannot read: {exc.strerror or exc}", "skipped"
        return
    except OSError as exc:  # an I/O error part way: what was read before it stays
        yield "failed", f"cannot read on: {exc.strerror or exc}"
        return
    except Exception as exc:  # a parser bug must not lose the other files; it is reported, not hidden
        yield "failed", f"internal error in the {src.name} parser: {type(exc).__name__}: {exc}"
        return
    yield ("done",)
