"""Packages whose modules each register named things (attribution.sources: `SOURCES`, attribution.wrappers:
`WRAPPERS`): one walk over such a package collects them by name, so adding one is adding a module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def collect(package: str, path: Iterable[str], attribute: str, helpers: set[str], kind: type[N]) -> dict[str, N]:
    """Every `kind` instance listed in `attribute` of the modules of `package` (its `__path__`), by name, in
    module order; modules in `helpers` or named with a leading underscore are passed over. Two with one name,
    or anything else in the list, are a bug (RuntimeError)."""
    found: dict[str, N] = {}
    for mod in pkgutil.iter_modules(path):
        if mod.name in helpers or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{mod.name}")
        for item in getattr(module, attribute, []):
            if not isinstance(item, kind):
                raise RuntimeError(f"{module.__name__}.{attribute} holds {item!r}, not a {kind.__name__}")
            if item.name in found:
                raise RuntimeError(f"two {attribute.lower()} are named {item.name!r}")
            found[item.name] = item
    return found
