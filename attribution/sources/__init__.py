"""Log and trace formats. Each module here exposes `SOURCES`, a list of `Source` instances; the registry
finds them by walking this package, so adding a format is adding a module. Choosing a format by name or by
content, wrappers included, is attribution.formats' job (it sits above this package and attribution.wrappers)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from attribution.sources._stray_commas import StrayCommas
from attribution.sources.base import ParseContext, ParseResult, Source

__all__ = ["ParseContext", "ParseResult", "Source", "StrayCommas", "registry"]

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
