"""What an ingest prepares for the readers after its last commit, so that a first look at the week it just
landed reads prepared inputs instead of re-deriving them: the commit's engine x gateway join with the staged
requests and the filter values (attribution.joincache), then, on a big store, the dashboard pages' first look
(attribution.summaries.pages), in a detached process (attribution.summaries.background). Readers never wait
for it: they build what is missing themselves, and a kill while building leaves only a temporary file the next
build removes.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from attribution import joincache, queries
from attribution.config import Settings, connect_settings, env, env_on, load_settings
from attribution.db import bound_memory, fetch
from attribution.errors import AttributionError
from attribution.store import Store

PREPARE_PAGES_MIN = 200_000  # requests; a page of a smaller store computes within a second or two
# Prometheus histogram samples: from about here the whole store's increases and their per-day rows take seconds
# (4.6M samples: ~11 CPU s), which a page's first filter set without requests would otherwise pay
PREPARE_SAMPLES_MIN = 500_000
JOIN_MEMORY_MB = 1024  # DuckDB's working memory for the commit's join (db.bound_memory); it spills
ROW_GROUP = joincache.ROW_GROUP  # rows of a DuckDB row group, the unit its scans split among threads


@dataclass(frozen=True)
class Built:
    """What `after_commit` did: the commit it prepared, how long it took, and why it did nothing (or failed)."""

    commit: int
    seconds: float
    skipped: str = ""
    pages: tuple[str, ...] = ()  # the dashboard pages whose first look was prepared
    preparing: int = 0  # the process preparing them after the ingest returned (summaries.background)


def enabled() -> bool:
    """$ATTRIBUTION_SUMMARIES=0 (or off/no/false) leaves the preparing to the readers."""
    return env_on("ATTRIBUTION_SUMMARIES")


def prepare_pages_min() -> int:
    """$ATTRIBUTION_PREPARE_PAGES_MIN: the store size (requests) from which an ingest prepares the dashboard
    pages' first look (attribution.summaries.pages); below it a page computes within a second or two."""
    raw = (env("ATTRIBUTION_PREPARE_PAGES_MIN") or "").strip()
    return int(raw) if raw.isdigit() else PREPARE_PAGES_MIN


def prepare_samples_min() -> int:
    """$ATTRIBUTION_PREPARE_SAMPLES_MIN: the Prometheus histogram samples from which a commit's preparation makes
    the whole store's increases and their per-day rows (attribution.summaries.first_look), whatever the requests."""
    raw = (env("ATTRIBUTION_PREPARE_SAMPLES_MIN") or "").strip()
    return int(raw) if raw.isdigit() else PREPARE_SAMPLES_MIN


def increases_enabled() -> bool:
    """$ATTRIBUTION_PREPARE_INCREASES=0 (off/no/false) leaves the histograms' increases to the first page that
    reads them (as before: the overview's first look, or a filter change)."""
    return env_on("ATTRIBUTION_PREPARE_INCREASES")


def histogram_samples(con: duckdb.DuckDBPyConnection) -> int:
    """The Prometheus histogram samples `con`'s store holds (0 on a connection without them)."""
    if not queries.has_relation(con, "metric_histograms"):
        return 0
    return int(fetch(con, "select count(*) from metric_histograms").item())


def join_threads(con: duckdb.DuckDBPyConnection) -> int:
    """Bound `con`'s DuckDB threads for the commit's join to one per row group of the staged requests (at least
    one), and return the count. A scan splits among threads by row group, so below a few hundred thousand
    requests the other threads only wait and spin: 20-25% of the build's CPU on a 58k-request store, for no
    wall time gained. `con` must be the caller's own: DuckDB's `threads` is the whole database's."""
    rows = int(fetch(con, "select count(*) from raw_requests").item())
    have = int(con.execute("select current_setting('threads')").fetchall()[0][0])
    want = max(1, min(have, -(-rows // ROW_GROUP)))
    if want < have:
        con.execute(f"set threads = {want}")
    return want


def after_commit(root: str | Path, settings: Settings | None = None) -> Built:
    """Prepare the newest commit of the store at `root` for its readers, with the workload mapping of
    `settings` (default: the CLI's settings, those a dashboard or report started here uses). Runs outside
    the writer's lock: an ingest started meanwhile is not held up, and a reader that gets there first builds
    the same file (joincache takes whichever rename lands last; they are equal)."""
    t0 = time.time()
    store = Store.open(root)
    snap = store.snapshot()
    if not enabled():
        return Built(snap.version, 0.0, "turned off ($ATTRIBUTION_SUMMARIES)")
    # DuckDB's spill files, outside the store and the working directory, removed after
    scratch = Path(tempfile.mkdtemp(prefix="attribution-join-"))
    try:
        con = store.connect(snap)
        try:
            # DuckDB would take up to 80% of the machine for the join's hash tables (2.1 GB at 1M requests,
            # growing with the store); bounded, it spills, and the ingest's peak stays flat in the store's size
            bound_memory(con, JOIN_MEMORY_MB, scratch)
            join_threads(con)
            settings = settings if settings is not None else load_settings()
            connect_settings(con, settings)
            done = joincache.use(con)
            cached = joincache.choices(con) if done else None
            # pages for a store of many requests; the histograms' increases for one of many samples (a store of
            # Prometheus samples alone too: its pages answer from them)
            big = cached is not None and (int(cached["requests"].sum()) >= prepare_pages_min() or (
                increases_enabled() and histogram_samples(con) >= prepare_samples_min()))
        finally:
            con.close()
        kept: tuple[str, ...] = ()
        pid = 0
        # (imported here: `python -m attribution.summaries.background` must not find it imported by the package)
        from attribution.summaries import background

        if big and background.detached():  # minutes at millions of requests: the ingest does not wait
            pid = background.start(root, snap.version, settings)
        elif big:  # the dashboard's analyses are imported only then (a small store's ingest stays quick)
            from attribution.summaries import first_look

            with background.locked(root):
                kept = tuple(first_look.prepare(root, snap.version, settings, memory_mb=background.MEMORY_MB))
    except (AttributionError, duckdb.Error, OSError) as exc:
        # the readers build it themselves; the ingest itself succeeded
        return Built(snap.version, time.time() - t0, f"failed: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Built(snap.version, time.time() - t0, "" if done else "the store cannot be written", kept, pid)
