"""Log wrappers (container runtimes, log shippers, log platforms' exports). Each module here exposes
`WRAPPERS`, a list of `Wrapper` instances; the registry finds them by walking this package, so adding a
wrapper is adding a module. See `base` for the contract."""

from __future__ import annotations

from functools import cache

from attribution.plugins import collect
from attribution.wrappers._platforms import DocumentError, iter_items, iter_line_chunks
from attribution.wrappers.base import RECORD_SCHEMA, Wrapper, records_frame

# (the readers of _platforms that other packages use: a JSON document's items, a file's lines in chunks)
__all__ = ["RECORD_SCHEMA", "Wrapper", "records_frame", "registry", "get", "sniff", "candidates",
           "DocumentError", "iter_items", "iter_line_chunks"]

_HELPERS = {"base", "layer"}


@cache
def registry() -> dict[str, Wrapper]:
    return collect(__name__, __path__, "WRAPPERS", _HELPERS, Wrapper)


def get(name: str) -> Wrapper | None:
    return registry().get(name)


def candidates(head: str, path: str) -> list[Wrapper]:
    """The wrappers that score at least 0.5 on a file head, most confident first (registry order on ties).
    Several text layouts can match the same prefix; the layer takes the first whose unwrapped text is a
    known format."""
    scored = [(w.sniff(head, path), i, w) for i, w in enumerate(registry().values())]
    return [w for score, _, w in sorted((s for s in scored if s[0] >= 0.5), key=lambda s: (-s[0], s[1]))]


def sniff(head: str, path: str) -> Wrapper | None:
    """The most confident wrapper for a file head, or None when none scores at least 0.5."""
    found = candidates(head, path)
    return found[0] if found else None
