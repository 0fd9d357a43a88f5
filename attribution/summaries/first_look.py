"""The dashboard's first look computed after a commit: each page of `pages.wanted` answered by the dashboard's
own View on the whole store and kept through `pages.save` (this module reads the dashboard; `pages`, which the
dashboard reads back, does not)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from attribution.analyses import Analysis, Window, release
from attribution.analyses.common import selections_on_disk
from attribution.config import Settings
from attribution.dashboard import Filters, View
from attribution.db import bound_memory
from attribution.histograms.analysis import increases
from attribution.summaries import (
    days,
    histogram_samples,
    increases_enabled,
    prepare_pages_min,
    prepare_samples_min,
)
from attribution.summaries.pages import prune, save, wanted


def prepare(root: str | Path, commit: int, settings: Settings, *, memory_mb: int | None = None,
            log: Callable[[str], None] | None = None) -> list[str]:
    """Compute and keep the first look of commit `commit` (the pages of `wanted`), when the store holds at
    least `prepare_pages_min()` requests; the pages kept, in order. First, on a store of at least
    `prepare_samples_min()` Prometheus histogram samples, the whole store's increases and their per-day rows
    (`_increases`; $ATTRIBUTION_PREPARE_INCREASES=0: not). `memory_mb` bounds DuckDB's working memory (it
    spills beyond). Stops before the next page once a newer commit is in (that commit's preparation prunes
    these pages). `log` gets a line per page (its wall and CPU seconds)."""
    pages = wanted(settings)
    if not pages and not increases_enabled():
        return []
    store_view = View(root, Filters(), settings=settings)
    if store_view.snapshot.version != commit:
        return []
    if memory_mb is not None:  # (the one bound of attribution.db: $ATTRIBUTION_DUCKDB_MEMORY_MB overrides it)
        # the selections (and the thresholds' requests) in a database file of the scratch directory, compressed,
        # as the report keeps them: at 6M requests each was ~1 GB of DuckDB memory at its cap (peak 2.55 -> 1.97 GB);
        # like the report (one pass over each page), DuckDB's cached blocks are let go before the sweeps (`shed`):
        # the overview's page peaked at 2.06-2.14 GB with them, 1.48-1.53 without (bench/scale/README.md, session 20)
        selections_on_disk(store_view.con, bound_memory(store_view.con, memory_mb, shed=True))
    if increases_enabled():
        _increases(store_view, log)
    if not pages or store_view.choices().requests < prepare_pages_min():
        return []
    prune(root, commit)
    kept = []
    for page, kwargs in pages.items():
        if store_view.store.snapshot().version != commit:
            break
        t0, c0 = time.time(), time.process_time()
        try:
            res = _merged(store_view, settings, page, kwargs) or getattr(store_view, page)(**kwargs)
        except Exception:  # noqa: BLE001 - optional work after a committed ingest: the page, opened, shows it
            continue
        if save(root, commit, settings, page, kwargs, res):
            kept.append(page)
        if log is not None:
            log(f"{page}: {time.time() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU")
    return kept


def _increases(view: View, log: Callable[[str], None] | None) -> None:
    """The whole store's Prometheus histogram increases and each series' per-day rows, kept for the commit
    (attribution.kept, as the first page reading them keeps them: the same queries on the same connection), on a
    store of at least `prepare_samples_min()` samples: a window of whole days under any filter is then summed
    from the day rows, and a filter set without requests (the thresholds and lengths pages answer from the
    histograms) reads the open window's, instead of a filter change scanning every sample."""
    t0, c0 = time.time(), time.process_time()
    with view.lock:
        try:
            if histogram_samples(view.con) < prepare_samples_min():
                return
            increases(view.con, Window(), "histogram")
        except duckdb.Error:  # optional work after a committed ingest: the first page reading them makes them
            return
        finally:
            release(view.con)
    if log is not None:
        log(f"histogram increases: {time.time() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU")


def _merged(view: View, settings: Settings, page: str, kwargs: dict[str, Any]) -> Analysis | None:
    """The page from per-day summaries where it has them (lengths: attribution.summaries.days, only the days
    this commit changed recounted), else None (computed whole). The other pages stay whole: their answers
    (sweeps over the step function across day boundaries, per-start memory episodes, week-over-week
    comparisons, a bootstrap) have no exact merge of per-day parts built yet."""
    if page != "lengths" or not days.enabled() or set(kwargs) - {"by"}:
        return None
    with view.lock:
        where = days.days_dir(view.store.root, view.con, settings)
        counted = days.count_days(view.con, where)
        days.save_listing(where, view.snapshot.version, counted)  # the dashboard's filters merge these files
        return days.lengths(view.con, counted, by=kwargs.get("by") or settings.by,
                            percentiles=settings.percentiles)
