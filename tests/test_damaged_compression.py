"""A .gz or .zst damaged in its middle keeps every byte decodable before the damage (what zcat / zstdcat give),
and the damage is recorded in ingest_errors with its compressed byte offset."""

from __future__ import annotations

import gzip
import random
import re
import zlib
from pathlib import Path

import polars as pl
import pytest
import zstandard
from synthetic_source import register

from attribution import reader
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.store import Store

register()


def _log(n: int, seed: int = 3) -> bytes:
    """A synthetic log whose lines vary enough that damage to the deflate stream is found where it is (a
    repetitive one is decoded to garbage until the CRC at the end)."""
    rng = random.Random(seed)
    body = "".join(f"ts=2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d} n={rng.randrange(10**9)} "
                   f"{rng.getrandbits(64):016x}\n" for i in range(n))
    return ("SYNTH v1\n" + body).encode()


def _reference(data: bytes, codec: str, at: int) -> tuple[bytes, int | None]:
    """What decodes before the damage at `at` and where the decoder notices it: the intact bytes before `at`
    in one call, then a byte at a time (as far as a decoder can get)."""
    new = (lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)) if codec == "gzip" \
        else zstandard.ZstdDecompressor().decompressobj
    error = zlib.error if codec == "gzip" else zstandard.ZstdError
    dec = new()
    out = bytearray(dec.decompress(data[:at]))
    for i in range(at, len(data)):
        try:
            out += dec.decompress(data[i : i + 1])
        except error:
            return bytes(out), i
        if dec.eof:
            dec = new()
    return bytes(out), None


def _damaged(tmp_path: Path, codec: str) -> tuple[Path, bytes, int]:
    """The log compressed, its middle 4 KiB zeroed (a lost page: decoders notice it there, where a few
    flipped bits in a deflate stream often decode to garbage until the CRC at the end)."""
    raw = _log(60_000)
    comp = bytearray(gzip.compress(raw) if codec == "gzip" else zstandard.ZstdCompressor(level=3).compress(raw))
    at = len(comp) // 2
    comp[at : at + 4096] = bytes(4096)
    good, where = _reference(bytes(comp), codec, at)
    assert where is not None and where < len(comp) * 3 // 4 and len(good) > (1 << 20) + 100_000
    path = tmp_path / ("pod.log.gz" if codec == "gzip" else "pod.log.zst")
    path.write_bytes(comp)
    return path, good, where


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_damaged_stream_keeps_everything_before_the_damage(tmp_path, codec):
    path, good, where = _damaged(tmp_path, codec)
    pieces = reader.Pieces(path)
    assert b"".join(pieces) == good  # every byte decodable before the damage
    assert f"damaged at compressed byte {where:,}" in pieces.truncated
    # a later start offset (a resumed read) gives the same bytes from there
    assert b"".join(reader.Pieces(path, 1000)) == good[1000:]

    s = ingest([str(path)], tmp_path / "s")
    assert s.files[0].status == "read" and s.files[0].format == "synthetic"
    decoded = good.count(b"\nts=")  # data lines decoded (the last one cut off by the damage too, as a tail)
    con = Store.open(tmp_path / "s").connect()
    assert fetch(con, "select count(*) as n from engine_steps")["n"][0] == decoded
    errs = fetch(con, "select line, reason from ingest_errors")
    damage = errs.filter(pl.col("reason").str.contains("damaged"))
    assert damage.height == 1
    assert re.search(rf"at compressed byte {where:,}\b", damage["reason"][0])


def test_a_sound_stream_reads_as_before(tmp_path):
    raw = _log(5000)
    for name, data in (("a.log.gz", gzip.compress(raw) + gzip.compress(raw)),
                       ("b.log.zst", zstandard.ZstdCompressor().compress(raw) * 2)):
        p = tmp_path / name
        p.write_bytes(data)
        pieces = reader.Pieces(p)
        assert b"".join(pieces) == raw + raw and pieces.truncated is None
