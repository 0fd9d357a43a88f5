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
    from attribution.errors import UsageError

    reg = registry()
    if name not in reg:
        raise UsageError(f"unknown format {name!r}; known formats: {', '.join(sorted(reg))}")
    return reg[name]


def sniff(head: str, path: str) -> Source | None:
    """The most confident source for a file head, or None when no source scores at least 0.5."""
    best: tuple[float, Source] | None = None
    for src in registry().values():
        score = src.sniff(head, path)
        if score >= 0.5 and (best is None or score > best[0]):
            best = (score, src)
    return best[1] if best else None
