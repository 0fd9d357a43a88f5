"""Format detection beyond the first head: a file whose first 64 KiB are noise (pip output, a shell session)
is sniffed on later windows, up to SNIFF_MAX_BYTES; and a file mixing line formats (LiteLLM JSON lines inside
a vLLM console log, SGLang and vLLM output in one file) has the lines its sniffed format leaves without a row
handed to the other line formats they sniff as, each line to the parser of its kind. A forced format
(`--format`) reads every line alone, and a file with no line of it is said to be one.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from attribution import formats, reader, sources
from attribution.sources.base import ParseContext, ParseResult, Source

# How far detection looks for a first recognised window when the head is not one: at most this many bytes
# (decompressed). Windows of WINDOW bytes, each starting on a line, at offsets growing by half from the head's
# end (64, 96, 144 KiB, ...), and the last window read: a log after noise runs on to the end of the file (or
# past the bound), so the last window finds it when the sparse ones do not. About 16 sniffs (0.3 s) for a file
# of anything else.
SNIFF_MAX_BYTES = 8 << 20
WINDOW = 16 << 10
MAX_OTHERS = 3  # formats besides the sniffed one that a mixed file's lines may go to
_KEY = "_mixed"  # the key of ctx.state that holds the other formats and their parser states


def _offsets(size: int) -> list[int]:
    out, off = [], reader.HEAD_BYTES
    while off + WINDOW < size:
        out.append(off)
        off += off // 2
    return out + [max(size - WINDOW, reader.HEAD_BYTES)] if size > reader.HEAD_BYTES else out


def sniff_past_noise(path: Path, mtime: float) -> Source | None:
    """The line format of the first window past the head that sniffs as one, or None."""
    data = reader.read_head(path, SNIFF_MAX_BYTES)
    for off in _offsets(len(data)):
        nl = data.find(b"\n", off - 1)  # the window starts on a line (`off - 1`: one may start at `off`)
        if nl < 0:
            break
        window = data[nl + 1: nl + 1 + WINDOW]
        if not window:
            break
        src = formats.sniff(window.decode("utf-8", errors="replace"), str(path), mtime)
        if src is not None and src.mode == "lines":
            return src
    return None


def _row_lines(res: ParseResult) -> pl.Series:
    parts = [df["line"].cast(pl.Int64) for df in res.tables.values() if "line" in df.columns]
    if res.consumed is not None:
        parts.append(res.consumed.cast(pl.Int64))
    return pl.concat(parts).drop_nulls() if parts else pl.Series("line", [], pl.Int64)


def _sniff_other(text: pl.Series, path: str, skip: set[str]) -> Source | None:
    head = "\n".join(text.head(4096).to_list())[: reader.HEAD_BYTES]
    best: tuple[float, Source] | None = None
    for src in sources.registry().values():
        if src.mode != "lines" or src.name in skip:
            continue
        score = src.sniff(head, path)
        if score >= 0.5 and (best is None or score > best[0]):
            best = (score, src)
    return best[1] if best else None


def parse_mixed(src: Source, frame: pl.DataFrame, ctx: ParseContext
                ) -> list[tuple[Source, ParseResult, pl.DataFrame]]:
    """Parse a chunk's lines with `src`; the lines it makes no row of and reports no problem with go to the
    other line formats of the file (decided by sniffing such lines, remembered in `ctx.state`), each taking
    the lines it makes rows of. Returns (source, result, the lines it accounts for) per format: the lines of
    the parts are disjoint and together the chunk's, so the census counts every line once."""
    mixed = ctx.state.pop(_KEY, None)  # the file's own source must not see the others' state
    res = src.parse(frame, ctx)
    mixed = mixed or {"names": [], "st": {}}
    named = _row_lines(res)
    if res.errors is not None and res.errors.height:
        named = pl.concat([named, res.errors["line"].cast(pl.Int64).drop_nulls()])
    left = frame.filter(~pl.col("line").is_in(named.implode()))
    parts: list[tuple[Source, ParseResult, pl.DataFrame]] = []
    taken_all: list[pl.Series] = []
    tried: set[str] = set()
    while left.height:
        names = [n for n in mixed["names"] if n not in tried]
        if not names:
            if len(mixed["names"]) >= MAX_OTHERS:
                break
            other = _sniff_other(left["text"], ctx.path, {src.name, *mixed["names"]})
            if other is None:
                break
            mixed["names"].append(other.name)
            names = [other.name]
        name = names[0]
        tried.add(name)
        other = formats.get(name)
        sub = ParseContext(ctx.path, ctx.deployment, ctx.label, ctx.year, ctx.tz, ctx.file_mtime, ctx.options,
                           mixed["st"].get(name, {}))
        r = other.parse(left, sub)
        mixed["st"][name] = sub.state
        taken = _row_lines(r).unique()
        if taken.len() == 0:
            continue
        if r.errors is not None and r.errors.height:  # its verdicts on lines it did not take are not its own
            r.errors = r.errors.filter(pl.col("line").is_in(taken.implode()))
        mine = left.filter(pl.col("line").is_in(taken.implode()))
        parts.append((other, r, mine))
        taken_all.append(mine["line"])
        left = left.filter(~pl.col("line").is_in(taken.implode()))
    if mixed["names"]:
        ctx.state[_KEY] = mixed
    if taken_all:
        frame = frame.filter(~pl.col("line").is_in(pl.concat(taken_all).implode()))
    return [(src, res, frame), *parts]


def forced_mismatch(fmt: str | None, rows: int, counts: dict[str, int] | None) -> str | None:
    """Why a file read with `--format fmt` is not a file of that format (no line of it gave a row), or None.
    Without this, forcing the wrong format reads a file into nothing without a word."""
    counts = counts or {}
    lines = sum(counts.values())
    if not fmt or rows or counts.get("parsed", 0) or not lines:
        return None
    return (f"--format {fmt}: no line gave a {fmt} row ({lines:,} lines: {counts.get('skipped', 0):,} skipped, "
            f"{counts.get('unrecognised', 0):,} unrecognised); not a {fmt} file?")
