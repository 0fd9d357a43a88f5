"""Input files as the ingest sees them: opening (never blocking, regular files only), transparent
decompression (.gz, .zst, by magic bytes; damage keeps what decoded before it), head fingerprints, and chunks of
complete lines read from a byte offset. Which files to read is attribution.discovery's.

Memory stays bounded whatever the input: data is read in pieces, a chunk holds at most `chunk_bytes` plus one
line, and a line longer than `max_line_bytes` is skipped (reported, counted) without ever being held whole.
Offsets and line numbers refer to the decompressed stream.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import zstandard

PIECE = 1 << 20  # bytes read from disk at a time
_COUNT_BLOCK = 1 << 20  # bytes compared at a time when counting a chunk's lines (count_newlines)
RAW_READ = 64 * 1024  # compressed bytes fed to a decoder at a time (what damage can cost, see _gzip)
HEAD_BYTES = 64 * 1024  # what sniffers see
FP_BYTES = 4096  # what identifies a file's content (see Store: rotation and truncation)
DEFAULT_CHUNK_BYTES = 32 << 20
DEFAULT_MAX_LINE_BYTES = 64 << 20

STORE_MARKER = "attribution-store.json"  # attribution.store.MARKER


class NotRegularFile(OSError):
    """Opening found something other than a regular file (replaced after discovery)."""


def open_regular(path: Path) -> BinaryIO:
    """Open a file for reading without ever blocking: O_NONBLOCK (a FIFO put in the file's place after
    discovery would otherwise wait for a writer forever), then the open file itself must be a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def compression(path: Path) -> str | None:
    with open_regular(path) as fh:
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
            with open_regular(self.path) as fh:
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
        # Damage in the middle of a stream keeps every byte decodable before it (as zcat does): the failing
        # call's input is fed again a byte at a time from the decoder's state before it, then the damage is
        # reported with its compressed byte offset.
        with open_regular(self.path) as fh:
            if self._codec == "zstd":
                yield from self._zstd(fh)
            else:
                yield from self._gzip(fh)

    def _gzip(self, fh: BinaryIO) -> Iterator[bytes]:
        dec, fed, pos = zlib.decompressobj(16 + zlib.MAX_WBITS), False, 0  # pos: compressed offset of raw[0]
        while raw := fh.read(RAW_READ):
            while raw:
                saved = dec.copy()
                try:
                    out = dec.decompress(raw, PIECE)
                except zlib.error as exc:
                    yield from self._salvage("gzip", saved, _gzip_decoder, zlib.error, raw, pos, exc)
                    return
                fed = True
                if out:
                    yield out
                if dec.eof:  # another gzip member may follow (concatenated .gz)
                    pos += len(raw) - len(dec.unused_data)
                    raw = dec.unused_data
                    dec, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
                else:
                    pos += len(raw) - len(dec.unconsumed_tail)
                    raw = dec.unconsumed_tail
        if fed and not dec.eof:
            self.truncated = "the gzip stream ends early (truncated .gz): kept what could be decoded"

    def _salvage(self, codec: str, dec: Decoder, fresh: Callable[[], Decoder], error: type[Exception],
                 raw: bytes, pos: int, exc: Exception) -> Iterator[bytes]:
        """`raw` (at compressed offset `pos`), on which `dec` failed with `exc`, fed to `dec` as it was before
        it one byte at a time (a new member or frame on a `fresh()` decoder): what decodes is yielded up to
        the damaged byte, which `truncated` names."""
        for i in range(len(raw)):
            try:
                out = dec.decompress(raw[i : i + 1])
            except error as err:
                self.truncated = _damaged(codec, pos + i, err)
                return
            if out:
                yield out
            if dec.eof:
                dec = fresh()
        self.truncated = _damaged(codec, pos + len(raw), exc)

    def _zstd(self, fh: BinaryIO) -> Iterator[bytes]:
        zctx = zstandard.ZstdDecompressor()
        zdec, fed = zctx.decompressobj(), False
        frame, pos = 0, 0  # compressed offsets: the current frame's start, raw[0]
        while raw := fh.read(RAW_READ):  # small reads bound the output of one call
            while raw:
                try:
                    out = zdec.decompress(raw)
                except zstandard.ZstdError as exc:
                    # a zstd decoder cannot be copied: the frame is decoded again up to the failing input
                    yield from self._zstd_salvage(zctx, frame, pos, raw, exc)
                    return
                fed = True
                if out:
                    yield out
                if zdec.eof:  # another frame may follow (concatenated .zst)
                    pos += len(raw) - len(zdec.unused_data)
                    frame, raw = pos, zdec.unused_data
                    zdec, fed = zctx.decompressobj(), False
                else:
                    pos += len(raw)
                    raw = b""
        if fed and not zdec.eof:
            self.truncated = "the zstd stream ends early (truncated .zst): kept what could be decoded"

    def _zstd_salvage(self, zctx: zstandard.ZstdDecompressor, frame: int, pos: int, raw: bytes, exc: Exception) -> Iterator[bytes]:
        zdec = zctx.decompressobj()
        with open_regular(self.path) as fh:  # replay what decoded before (its output was yielded already)
            fh.seek(frame)
            left = pos - frame
            while left > 0 and (data := fh.read(min(RAW_READ, left))):
                left -= len(data)
                zdec.decompress(data)
        yield from self._salvage("zstd", zdec, zctx.decompressobj, zstandard.ZstdError, raw, pos, exc)


class Decoder(Protocol):
    """A streaming decompressor (zlib's, zstandard's decompressobj)."""

    def decompress(self, data: bytes, /) -> bytes: ...

    @property
    def eof(self) -> bool: ...


def _gzip_decoder() -> Decoder:
    return zlib.decompressobj(16 + zlib.MAX_WBITS)


def _damaged(codec: str, offset: int, exc: Exception) -> str:
    return (f"the {codec} stream is damaged at compressed byte {offset:,} ({exc}): kept everything decoded "
            "before it, the rest of the file is not read")


def read_head(path: Path, n: int = HEAD_BYTES) -> bytes:
    buf = bytearray()
    for piece in Pieces(path):
        buf += piece
        if len(buf) >= n:
            break
    return bytes(buf[:n])


def bytes_before(path: Path, offset: int, n: int) -> bytes | None:
    """The `n` bytes of a plain file just before `offset` (fewer when the file is shorter), None when the
    file is compressed (offsets are in the decompressed stream)."""
    if compression(path):
        return None
    with open_regular(path) as fh:
        fh.seek(max(offset - n, 0))
        return fh.read(min(n, offset))


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


def count_newlines(data: bytes) -> int:
    """`data.count(b"\\n")`, 4-5x faster on a chunk: CPython counts a byte one at a time (~14 ms for 32 MiB),
    NumPy compares 16-32 at once (~3 ms), a block at a time so the comparison's mask stays in the cache."""
    if len(data) < _COUNT_BLOCK:
        return data.count(b"\n")
    import numpy as np  # here, not at the top: the CLI's import and --help load no NumPy (tests/test_imports.py)

    a = np.frombuffer(data, np.uint8)
    return sum(int(np.count_nonzero(a[i : i + _COUNT_BLOCK] == 10)) for i in range(0, len(a), _COUNT_BLOCK))


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
            n = count_newlines(data)
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
        n = count_newlines(data)
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
        whole = views[0].obj if len(views) == 1 else None
        if isinstance(whole, bytes) and len(views[0]) == len(whole):
            return whole  # a whole piece: no copy
        return b"".join(views)
