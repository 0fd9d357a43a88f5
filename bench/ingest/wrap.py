"""Wrapped copies of the bench logs, as Docker's json-file driver and containerd's CRI files store them
(../shared/formats/log-wrappers.md §2.1, §3.1): same lines, one record per line, lines over 16 KiB split into
partial records, one millisecond apart. Written once per data set and reused, like the logs themselves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

SPLIT = 16 * 1024  # Docker's copier buffer and containerd's default max_container_log_line_size
START = datetime(2026, 5, 12, 8, tzinfo=UTC)
KINDS = ("docker", "cri")


def _stamp(i: int) -> str:
    t = START + timedelta(milliseconds=i)
    frac = f"{t.microsecond:06d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def _docker(line: bytes, i: int) -> bytes:
    text = line.decode("utf-8", "replace") + "\n"
    t = _stamp(i)
    out = []
    for k in range(0, len(text), SPLIT):  # characters, not bytes: Docker's pieces are valid JSON strings
        piece = json.dumps(text[k : k + SPLIT], ensure_ascii=False)
        out.append(f'{{"log":{piece},"stream":"stdout","time":"{t}"}}\n')
    return "".join(out).encode()


def _cri(line: bytes, i: int) -> bytes:
    t = _stamp(i).encode()
    pieces = [line[k : k + SPLIT] for k in range(0, len(line), SPLIT)] or [b""]
    return b"".join(t + b" stdout " + (b"F " if k == len(pieces) - 1 else b"P ") + p + b"\n"
                    for k, p in enumerate(pieces))


def wrapped_copies(files: list[Path], kind: str) -> list[Path]:
    """`files` wrapped as `kind` (docker / cri) under `<their folder>/<kind>/`, same file names."""
    fn = {"docker": _docker, "cri": _cri}[kind]
    out = []
    for f in files:
        dest = f.parent / kind / f.name
        if not dest.exists() or dest.stat().st_mtime < f.stat().st_mtime:
            dest.parent.mkdir(exist_ok=True)
            tmp = dest.with_suffix(".tmp")
            with open(f, "rb") as src, open(tmp, "wb") as dst:
                for i, line in enumerate(src):
                    dst.write(fn(line.rstrip(b"\n"), i))
            tmp.rename(dest)
        out.append(dest)
    return out
