"""Log and trace formats. Each module here exposes `SOURCES`, a list of `Source` instances; the registry
finds them by walking this package, so adding a format is adding a module."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from attribution.sources.base import ParseContext, ParseResult, Source

__all__ = ["ParseContext", "ParseResult", "Source", "registry", "get", "sniff"]

_HELPERS = {"base", "common", "timefmt"}


@cache
def registry() -> dict[str, Source]:
    found: dict[str, Source] = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name in _HELPERS or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        for src in getattr(module, "SOURCES", []):
            if src.name in found:
                raise RuntimeError(f"two sources are named {src.name!r}")
            found[src.name] = src
    return found


def get(name: str) -> Source:
    """A format by name: a source, or a wrapper (attribution.wrappers) whose inner format is sniffed."""
    from attribution import wrappers
    from attribution.errors import UsageError

    reg = registry()
    if name not in reg:
        if wrappers.get(name) is not None:
            from attribution.wrappers.layer import wrapped

            return wrapped(name)
        known = sorted([*reg, *wrappers.registry()])
        raise UsageError(f"unknown format {name!r}; known formats: {', '.join(known)}")
    return reg[name]


def sniff(head: str, path: str, mtime: float = 0.0) -> Source | None:
    """The most confident source for a file head, or None when no source scores at least 0.5. Wrappers
    (Docker, CRI, journald, log platforms) are consulted first: their markers surround the engine's."""
    from attribution.wrappers.layer import sniff_wrapped

    found = sniff_wrapped(head, path, mtime=mtime)
    if found is not None:
        return found
    best: tuple[float, Source] | None = None
    for src in registry().values():
        score = src.sniff(head, path)
        if score >= 0.5 and (best is None or score > best[0]):
            best = (score, src)
    return best[1] if best else None
