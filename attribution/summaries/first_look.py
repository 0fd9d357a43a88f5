"""The dashboard's first look computed after a commit: each page of `pages.wanted` answered by the dashboard's
own View on the whole store and kept through `pages.save` (this module reads the dashboard; `pages`, which the
dashboard reads back, does not)."""

from __future__ import annotations

from pathlib import Path

from attribution.config import Settings
from attribution.dashboard import Filters, View
from attribution.summaries import prepare_pages_min
from attribution.summaries.pages import prune, save, wanted


def prepare(root: str | Path, commit: int, settings: Settings) -> list[str]:
    """Compute and keep the first look of commit `commit` (the pages of `wanted`), when the store holds at
    least `prepare_pages_min()`; the pages kept, in order."""
    pages = wanted(settings)
    if not pages:
        return []
    store_view = View(root, Filters(), settings=settings)
    if store_view.snapshot.version != commit or store_view.choices().requests < prepare_pages_min():
        return []
    prune(root, commit)
    kept = []
    for page, kwargs in pages.items():
        try:
            res = getattr(store_view, page)(**kwargs)
        except Exception:  # noqa: BLE001 - optional work after a committed ingest: the page, opened, shows it
            continue
        if save(root, commit, settings, page, kwargs, res):
            kept.append(page)
    return kept
