"""Input files as the ingest sees them: discovery (files, directories, globs), transparent decompression
(.gz, .zst, by magic bytes), head fingerprints, and chunks of complete lines read from a byte offset.

Memory stays bounded whatever the input: data is read in pieces, a chunk holds at most `chunk_bytes` plus one
line, and a line longer than `max_line_bytes` is skipped (reported, counted) without ever being held whole.
Offsets and line numbers refer to the decompressed stream.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from attribution.errors import InputError

PIECE = 1 << 20  # bytes read from disk at a time
HEAD_BYTES = 64 * 1024  # what sniffers see
FP_BYTES = 4096  # what identifies a file's content (see Store: rotation and truncation)
DEFAULT_CHUNK_BYTES = 32 << 20
DEFAULT_MAX_LINE_BYTES = 64 << 20

_SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints"}
STORE_MARKER = "attribution-store.json"  # attribution.store.MARKER
# Inside a directory being walked, documentation (which often quotes log lines) is passed over silently, and
# so is whatever a `.attributionignore` file (fnmatch patterns, one per line) names. A file named on the
# command line is always read.
IGNORE_FILE = ".attributionignore"
DOC_NAME_RE = re.compile(r"(?i)(\.(md|markdown|rst|html?|pdf|ipynb|py|sh|toml|ya?ml)$|^(license|licence|copying|notice)(\.|$))")


def discover(paths: list[str]) -> list[Path]:
    """Expand directories (recursively; hidden entries, documentation and `.attributionignore` patterns
    skipped) and globs into a sorted list of files."""
    out: dict[str, Path] = {}
    for raw in paths:
        if any(ch in raw for ch in "*?["):
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                raise InputError(f"{raw}: the pattern matches no file")
            candidates = [Path(m) for m in matches]
        else:
            p = Path(raw)
            if not p.exists():
                raise InputError(f"{raw}: no such file or directory")
            candidates = [p]
        for c in candidates:
            if c.is_dir():
                ignored: list[tuple[Path, list[str]]] = []
                for root, dirs, files in os.walk(c):
                    if STORE_MARKER in files:  # never read a store (ours) as input
                        dirs[:] = []
                        continue
                    if IGNORE_FILE in files:
                        ignored.append((Path(root), _ignore_patterns(Path(root) / IGNORE_FILE)))
                    dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
                    for name in sorted(files):
                        f = Path(root) / name
                        if name.startswith(".") or DOC_NAME_RE.search(name) or _is_ignored(f, ignored):
                            continue
                        out.setdefault(str(f.resolve()), f)
            elif c.is_file():
                out.setdefault(str(c.resolve()), c)
    return [out[k] for k in sorted(out)]


def _ignore_patterns(path: Path) -> list[str]:
    lines = path.read_text(errors="replace").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _is_ignored(f: Path, ignored: list[tuple[Path, list[str]]]) -> bool:
    for base, patterns in ignored:
        try:
            rel = f.relative_to(base).as_posix()
        except ValueError:
            continue
        if any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(f.name, p) for p in patterns):
            return True
    return False


def compression(path: Path) -> str | None:
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if magic == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


@dataclass
class Pieces:
    """Decompressed pieces of a file from a decompressed offset; `truncated` is set once the compressed
    stream is found to end early (a cut-off .gz/.zst): everything decodable before the cut was yielded."""

    path: Path
    start: int = 0
    truncated: str | None = None
    _codec: str | None = field(default=None, init=False)

    def __iter__(self) -> Iterator[bytes]:
        self._codec = compression(self.path)
        if self._codec is None:
            with open(self.path, "rb") as fh:
                fh.seek(self.start)
                while piece := fh.read(PIECE):
                    yield piece
            return
        skip = self.start
        for piece in self._decompressed():
            if skip:
                if len(piece) <= skip:
                    skip -= len(piece)
                    continue
                piece, skip = piece[skip:], 0
            yield piece

    def _decompressed(self) -> Iterator[bytes]:
        # Output is bounded per call (max_length / read size) so a high compression ratio cannot balloon memory.
        with open(self.path, "rb") as fh:
            if self._codec == "zstd":
                zctx = zstandard.ZstdDecompressor()
                zdec, fed = zctx.decompressobj(), False
                try:
                    while raw := fh.read(64 * 1024):  # small reads bound the output of one call
                        while raw:
                            out = zdec.decompress(raw)
                            fed = True
                            if out:
                                yield out
                            if zdec.eof:  # another frame may follow (concatenated .zst)
                                raw = zdec.unused_data
                                zdec, fed = zctx.decompressobj(), False
                            else:
                                raw = b""
                except zstandard.ZstdError as exc:
                    self.truncated = f"the zstd stream is damaged ({exc}): kept what could be decoded"
                    return
                if fed and not zdec.eof:
                    self.truncated = "the zstd stream ends early (truncated .zst): kept what could be decoded"
                return
            dec, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            try:
                while raw := fh.read(PIECE):
                    while raw:
                        out = dec.decompress(raw, PIECE)
                        fed = True
                        if out:
                            yield out
                        if dec.eof:  # another gzip member may follow (concatenated .gz)
                            raw = dec.unused_data
                            dec, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
                        else:
                            raw = dec.unconsumed_tail
            except zlib.error as exc:
                self.truncated = f"the gzip stream is damaged ({exc}): kept what could be decoded"
                return
        if fed and not dec.eof:
            self.truncated = "the gzip stream ends early (truncated .gz): kept what could be decoded"


def read_head(path: Path, n: int = HEAD_BYTES) -> bytes:
    buf = bytearray()
    for piece in Pieces(path):
        buf += piece
        if len(buf) >= n:
            break
    return bytes(buf[:n])


def fingerprint(head: bytes) -> str:
    return hashlib.sha1(head).hexdigest()


@dataclass
class Chunk:
    data: bytes  # complete lines, each ending in b"\n", except a final unterminated line when `tail`
    first_line: int  # 1-based number of the first line in `data`
    n_lines: int
    start: int  # decompressed offset of data[0]
    end: int  # decompressed offset just past `data`
    tail: bool = False  # data ends with a line that had no newline at EOF
    long_lines: list[tuple[int, int]] = field(default_factory=list)  # (line, bytes) of lines skipped as too long


def chunks(
    path: Path,
    start: int = 0,
    first_line: int = 1,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    pieces: Pieces | None = None,
) -> Iterator[Chunk]:
    """Chunks of complete lines from decompressed offset `start`. A skipped over-long line is reported in
    the `long_lines` of the chunk that follows it (an empty chunk if needed) and still counted as a line."""
    pieces = pieces or Pieces(path, start)
    buf = _Buffer()
    offset = start  # decompressed offset of buf[0]
    line_no = first_line
    skipping: int | None = None  # bytes of an over-long line skipped so far
    skip_line = 0
    long_lines: list[tuple[int, int]] = []
    for piece in pieces:
        if skipping is not None:
            nl = piece.find(b"\n")
            if nl < 0:
                skipping += len(piece)
                offset += len(piece)
                continue
            skipping += nl + 1
            offset += nl + 1
            long_lines.append((skip_line, skipping))
            skipping = None
            line_no += 1
            piece = piece[nl + 1 :]
        buf.append(piece)
        while buf.size >= chunk_bytes:
            cut = buf.rfind_nl(chunk_bytes)
            if cut < 0:  # one line longer than a chunk: the chunk holds that line whole
                cut = buf.find_nl(chunk_bytes)
                if cut < 0:
                    break
            data = buf.take(cut + 1)
            n = data.count(b"\n")
            yield Chunk(data, line_no, n, offset, offset + len(data), long_lines=long_lines)
            long_lines = []
            line_no += n
            offset += len(data)
        if skipping is None and buf.size > max_line_bytes and buf.find_nl(0) < 0:
            skipping, skip_line = buf.size, line_no
            offset += buf.size
            buf = _Buffer()
    if skipping is not None:  # the over-long line runs to EOF
        long_lines.append((skip_line, skipping))
        line_no += 1
    if buf.size or long_lines:
        rest = buf.take(buf.size)
        cut = rest.rfind(b"\n")
        data, rest = (rest[: cut + 1], rest[cut + 1 :]) if cut >= 0 else (b"", rest)
        n = data.count(b"\n")
        if data or long_lines:
            yield Chunk(data, line_no, n, offset, offset + len(data), long_lines=long_lines)
        line_no += n
        offset += len(data)
        if rest:
            yield Chunk(rest, line_no, 1, offset, offset + len(rest), tail=True)


class _Buffer:
    """Bytes read but not yet yielded, kept as the pieces they came in (`parts[0]` from `skip` on).

    A chunk is built with one copy (a join of its pieces); the buffer is never grown or shifted as a whole,
    which on 32 MiB chunks cost more than the parsing of simple lines.
    """

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.skip = 0
        self.size = 0

    def append(self, piece: bytes) -> None:
        if piece:
            self.parts.append(piece)
            self.size += len(piece)

    def _spans(self) -> Iterator[tuple[bytes, int, int, int]]:
        """(part, start, end, buffer offset of start) for every part, in order."""
        pos = 0
        for i, part in enumerate(self.parts):
            lo = self.skip if i == 0 else 0
            yield part, lo, len(part), pos
            pos += len(part) - lo

    def rfind_nl(self, limit: int) -> int:
        """Offset of the last newline before `limit`, or -1."""
        found = -1
        for part, lo, hi, pos in self._spans():
            if pos >= limit:
                break
            i = part.rfind(b"\n", lo, min(hi, lo + limit - pos))
            if i >= 0:
                found = pos + i - lo
        return found

    def find_nl(self, start: int) -> int:
        """Offset of the first newline at or after `start`, or -1."""
        for part, lo, hi, pos in self._spans():
            if pos + hi - lo <= start:
                continue
            i = part.find(b"\n", lo + max(0, start - pos), hi)
            if i >= 0:
                return pos + i - lo
        return -1

    def take(self, n: int) -> bytes:
        """Remove and return the first `n` bytes."""
        views: list[memoryview] = []
        need = n
        while need:
            part, lo = self.parts[0], self.skip
            k = min(need, len(part) - lo)
            views.append(memoryview(part)[lo : lo + k])
            need -= k
            if lo + k == len(part):
                self.parts.pop(0)
                self.skip = 0
            else:
                self.skip = lo + k
        self.size -= n
        if len(views) == 1 and len(views[0]) == len(views[0].obj):
            return views[0].obj  # a whole piece: no copy
        return b"".join(views)
