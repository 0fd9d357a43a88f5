"""Formats by name and by content: a log or trace source (attribution.sources), or a wrapper around one
(attribution.wrappers: Docker, CRI, journald, log platforms) whose inner format is sniffed. This sits above
both registries, so neither imports the other to choose a format."""

from __future__ import annotations

from attribution import sources, wrappers
from attribution.errors import UsageError
from attribution.sources.base import Source
from attribution.wrappers.layer import sniff_wrapped, wrapped


def get(name: str) -> Source:
    """A format by name: a source, or a wrapper (attribution.wrappers) whose inner format is sniffed."""
    reg = sources.registry()
    if name not in reg:
        if wrappers.get(name) is not None:
            return wrapped(name)
        known = sorted([*reg, *wrappers.registry()])
        raise UsageError(f"unknown format {name!r}; known formats: {', '.join(known)}")
    return reg[name]


def sniff(head: str, path: str, mtime: float = 0.0) -> Source | None:
    """The most confident source for a file head, or None when no source scores at least 0.5. Wrappers
    (Docker, CRI, journald, log platforms) are consulted first: their markers surround the engine's."""
    found = sniff_wrapped(head, path, mtime=mtime)
    if found is not None:
        return found
    best: tuple[float, Source] | None = None
    for src in sources.registry().values():
        score = src.sniff(head, path)
        if score >= 0.5 and (best is None or score > best[0]):
            best = (score, src)
    return best[1] if best else None
