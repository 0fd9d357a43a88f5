"""Log and trace formats. Each module here exposes `SOURCES`, a list of `Source` instances; the registry
finds them by walking this package, so adding a format is adding a module. Choosing a format by name or by
content, wrappers included, is attribution.formats' job (it sits above this package and attribution.wrappers)."""

from __future__ import annotations

from functools import cache

from attribution.plugins import collect
from attribution.sources._stray_commas import StrayCommas
from attribution.sources.base import ParseContext, ParseResult, Source

__all__ = ["ParseContext", "ParseResult", "Source", "StrayCommas", "registry"]

_HELPERS = {"base", "common", "timefmt"}


@cache
def registry() -> dict[str, Source]:
    return collect(__name__, __path__, "SOURCES", _HELPERS, Source)
