"""Test helpers: plain log lines wrapped the way container runtimes and tools store them, written from
../shared/formats/log-wrappers.md (§2 Docker, §3 CRI and kubectl, §4 compose and CI prefixes).

`WRAP[name](lines, start) -> bytes`: record i carries the time start + i ms, or start[i] when `start` is a list
(the metamorphic tests pass `record_times`: each line at the time its engine wrote it). Wrappers that split long lines
(Docker json-file at 16 KiB, containerd at 16 KiB, CRI-O at 8 KiB) split at `SPLIT` bytes here so that the
tests' short lines are split too; CRI pieces are cut by bytes, so a piece can end inside a UTF-8 character.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

SPLIT = 300  # bytes per piece (Docker's and containerd's 16 KiB, scaled down to split the test logs' lines)


def rfc3339nano(t: datetime, digits: int | None = None, zone: str = "Z") -> str:
    """Go's RFC3339Nano (trailing zeros dropped) when `digits` is None, else exactly `digits` digits."""
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{t.microsecond:06d}000"
    if digits is None:
        frac = frac.rstrip("0")
        return f"{base}{'.' + frac if frac else ''}{zone}"
    return f"{base}.{frac[:digits]}{zone}"


_VLLM_TIME = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ")
_ISO_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\d*Z")
_SGLANG_TIME = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{3}))?[\] ]")


def record_times(lines: list[str], start: datetime) -> list[datetime]:
    """The time a runtime would record for each line: the engine line's own time (a vLLM header in `start`'s
    year, an SGLang dated header; in `start`'s zone, UTC in the tests), else the previous record's; the first
    timed line's for lines before it (`start` when no line has a time). A runtime's clock does not go back, so
    a record is never earlier than the one before it; a line with a time adds nothing to the record before."""
    own: list[datetime | None] = []
    for line in lines:
        t = None
        if m := _VLLM_TIME.search(line[:300]):
            try:
                t = start.replace(month=int(m[1]), day=int(m[2]), hour=int(m[3]), minute=int(m[4]),
                                  second=int(m[5]), microsecond=0)
            except ValueError:
                t = None
        elif m := _ISO_TIME.match(line):  # Dynamo's own layout
            t = start.replace(year=int(m[1]), month=int(m[2]), day=int(m[3]), hour=int(m[4]), minute=int(m[5]),
                              second=int(m[6]), microsecond=int((m[7] or "0").ljust(6, "0")))
        elif m := _SGLANG_TIME.search(line[:300]):
            try:
                t = start.replace(year=int(m[1]), month=int(m[2]), day=int(m[3]), hour=int(m[4]),
                                  minute=int(m[5]), second=int(m[6]), microsecond=int(m[7] or 0) * 1000)
            except ValueError:
                t = None
        own.append(t)
    first = next((t for t in own if t is not None), start)
    out, last = [], first
    for t in own:
        last = max(last, t) if t is not None else last
        out.append(last)
    return out


def _times(start: datetime | list[datetime], n: int) -> list[datetime]:
    """Record i at `start` + i ms, or at `start[i]` when the caller gives every record's time (see
    `record_times`)."""
    if isinstance(start, list):
        return start
    return [start + timedelta(milliseconds=i) for i in range(n)]


def _docker_escape(s: str) -> str:
    # Go's encoding/json: HTML characters as \u00XX, other control characters \u00XX, no ASCII-only output.
    out = json.dumps(s, ensure_ascii=False)
    return out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _char_pieces(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` UTF-8 bytes, cut between characters (Docker re-encodes as UTF-8)."""
    pieces, cur, n = [], [], 0
    for ch in text:
        b = len(ch.encode("utf-8"))
        if cur and n + b > size:
            pieces.append("".join(cur))
            cur, n = [], 0
        cur.append(ch)
        n += b
    pieces.append("".join(cur))
    return pieces


def docker_json(lines: list[str], start: datetime, split: int = SPLIT, tag: str | None = None) -> bytes:
    out = []
    for i, (line, t) in enumerate(zip(lines, _times(start, len(lines)), strict=True)):
        stream = "stderr" if i % 2 else "stdout"
        attrs = f',"attrs":{{"tag":{json.dumps(tag)}}}' if tag else ""
        for piece in _char_pieces(line + "\n", split):
            out.append(f'{{"log":{_docker_escape(piece)},"stream":"{stream}"{attrs},"time":"{rfc3339nano(t)}"}}')
    return ("\n".join(out) + "\n").encode()


def docker_stream(lines: list[str], start: datetime) -> bytes:
    out = [json.dumps({"Line": line + "\n", "Source": "stdout", "Timestamp": rfc3339nano(t, 9)}, ensure_ascii=False)
           for line, t in zip(lines, _times(start, len(lines)), strict=True)]
    return ("\n".join(out) + "\n").encode()


def _cri(lines: list[str], start: datetime, split: int, stamp) -> bytes:
    out = bytearray()
    for i, (line, t) in enumerate(zip(lines, _times(start, len(lines)), strict=True)):
        stream = b"stderr" if i % 3 == 1 else b"stdout"
        data = line.encode("utf-8")
        if data.endswith(b"\r"):
            data = data[:-1]  # containerd drops a `\r` right before the newline
        pieces = [data[k : k + split] for k in range(0, len(data), split)] or [b""]
        for k, piece in enumerate(pieces):
            tag = b"F" if k == len(pieces) - 1 else b"P"
            out += stamp(t).encode() + b" " + stream + b" " + tag + b" " + piece + b"\n"
    return bytes(out)


def containerd(lines: list[str], start: datetime, split: int = SPLIT) -> bytes:
    return _cri(lines, start, split, lambda t: rfc3339nano(t))


def crio(lines: list[str], start: datetime, split: int = SPLIT // 2) -> bytes:
    return _cri(lines, start, split, lambda t: rfc3339nano(t, 9, "+00:00"))


def _prefixed(lines: list[str], prefix) -> bytes:
    return "".join(prefix(i) + line + "\n" for i, line in enumerate(lines)).encode()


def docker_t(lines: list[str], start: datetime) -> bytes:
    ts = _times(start, len(lines))
    return _prefixed(lines, lambda i: rfc3339nano(ts[i], 9) + " ")


def github_actions(lines: list[str], start: datetime) -> bytes:
    ts = _times(start, len(lines))
    return _prefixed(lines, lambda i: rfc3339nano(ts[i], 7) + " ")


def bracketed(lines: list[str], start: datetime) -> bytes:
    ts = _times(start, len(lines))
    return _prefixed(lines, lambda i: "[" + rfc3339nano(ts[i]) + "] ")


def kubectl_prefix(lines: list[str], start: datetime) -> bytes:
    ts = _times(start, len(lines))
    return _prefixed(lines, lambda i: f"[pod/vllm-0/engine] {rfc3339nano(ts[i], 9)} ")


def compose(lines: list[str], start: datetime) -> bytes:
    return _prefixed(lines, lambda i: "llm-engine-1  | ")


WRAP = {
    "docker_json": docker_json, "docker_stream_json": docker_stream, "containerd": containerd, "crio": crio,
    "docker_t": docker_t, "github_actions": github_actions, "bracketed": bracketed,
    "kubectl_prefix": kubectl_prefix, "compose": compose,
}
# The wrappers that name a deployment of their own (so `deployment` differs from the plain file's).
NAMES_DEPLOYMENT = {"kubectl_prefix", "compose"}
