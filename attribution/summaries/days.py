"""Per-day summaries the first look merges instead of reading every request: for the lengths page, each day's
count of requests per (groups, metric, length), kept as one Parquet file per day named by a digest of that
day's rows. A commit recounts only the days whose digest changed (a day added, re-touched or rotated) and
merges the counts exactly: the stats, percentiles and histogram equal the whole-store computation's, on the
whole store and under the dashboard's filters that the counts can answer (whole UTC days, deployments,
workloads, labels, engine versions: `answerable`).

    <store>/_cache/days-<key>/lengths/<day>-<digest>.parquet
    <store>/_cache/days-<key>/lengths/commit-<commit>.json    (the files of a commit: readers skip the digest)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from datetime import time as dtime
from pathlib import Path
from typing import Any

import duckdb

from attribution import joincache, queries
from attribution.analyses.common import (
    Analysis,
    Selection,
    Window,
    percentile_list,
)
from attribution.analyses.lengths import from_counts
from attribution.choices import GroupBy
from attribution.config import Settings, connect_settings, env_on
from attribution.store import Snapshot, Store
from attribution.summaries import prepare_pages_min

STALE_TMP_S = 600  # a temporary file older than this was left by a killed count (one takes seconds)


@dataclass
class Counted:
    """What `count_days` did: the days recounted and reused, and the files of every day, in day order."""

    recounted: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0


def enabled() -> bool:
    """$ATTRIBUTION_PREPARE_DAYS=0 (off/no/false) computes the lengths page whole, as a reader would."""
    return env_on("ATTRIBUTION_PREPARE_DAYS")


def days_dir(root: str | Path, con: duckdb.DuckDBPyConnection, settings: Settings) -> Path:
    """Keyed by the code and settings (pages' key) and the join's key (staging SQL, workload mapping, DuckDB)."""
    from attribution.summaries.pages import settings_key

    key = hashlib.sha256(f"{settings_key(settings)}\0{joincache.key(con)}".encode()).hexdigest()[:16]
    return joincache.cache_dir(Path(root)) / f"days-{key}" / "lengths"


def count_days(con: duckdb.DuckDBPyConnection, where: Path, min_requests: int = 0) -> Counted:
    """Make `where` hold one count file per day of `con`'s joined_requests, recounting only the days whose
    digest has no file yet, and remove the files of digests gone. Written to a temporary file and renamed:
    a kill leaves no half file under a day's name. A store of fewer than `min_requests` is left alone (only
    `requests` is filled in: its pages compute from the rows within a second or two)."""
    t0 = time.time()
    digests = queries.run(con, "length_counts_day_digest")
    if int(digests["requests"].sum() or 0) < min_requests:
        return Counted(requests=int(digests["requests"].sum() or 0), seconds=time.time() - t0)
    names = {d: f"{d}-{hashlib.sha256(f'{n}:{s}:{x}'.encode()).hexdigest()[:16]}.parquet"
             for d, n, s, x in digests.select("day", "requests", "h_sum", "h_xor").iter_rows()}
    where.mkdir(parents=True, exist_ok=True)
    have = set(os.listdir(where))
    missing = [d for d, name in names.items() if name not in have]
    out = Counted(recounted=missing, reused=[d for d in names if d not in missing],
                  requests=int(digests["requests"].sum() or 0))
    if missing:
        counts = queries.run(con, "length_counts_by_day", days=missing)
        for day, part in counts.partition_by("day", as_dict=True, maintain_order=False).items():
            tmp = where / f".{uuid.uuid4().hex}.tmp"
            part.write_parquet(tmp, compression="zstd")
            os.replace(tmp, where / names[day[0]])
        for day in set(missing) - set(counts["day"].unique().to_list()):  # rows with no lengths at all
            tmp = where / f".{uuid.uuid4().hex}.tmp"
            counts.clear().write_parquet(tmp)
            os.replace(tmp, where / names[day])
    keep, now = set(names.values()), time.time()
    for name in have - keep:  # other digests of a day, and temporary files of a killed count
        with contextlib.suppress(OSError):
            if not name.endswith(".tmp") or now - (where / name).stat().st_mtime > STALE_TMP_S:
                os.unlink(where / name)
    out.files = [str(where / names[d]) for d in sorted(names)]
    out.seconds = time.time() - t0
    return out


def _listing(where: Path, commit: int) -> Path:
    return where / f"commit-{commit:020d}.json"


def save_listing(where: Path, commit: int, counted: Counted) -> None:
    """Note which day files hold commit `commit`'s counts, so that a reader of the commit (a dashboard filter)
    merges them without the digest's scan of every request; the listings of older commits go."""
    if not counted.files:
        return
    tmp = where / f".{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps({"files": [Path(f).name for f in counted.files], "requests": counted.requests}))
    os.replace(tmp, _listing(where, commit))
    for old in where.glob("commit-*.json"):
        if old.name < _listing(where, commit).name:
            with contextlib.suppress(OSError):
                old.unlink()


def load_listing(where: Path, commit: int) -> Counted | None:
    """The counts `save_listing` noted for commit `commit`, when all its files are still there; else None."""
    try:
        got = json.loads(_listing(where, commit).read_text())
        files = [str(where / name) for name in got["files"]]
        requests = int(got["requests"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(os.path.exists(f) for f in files):
        return None
    return Counted(reused=[Path(f).name[:-len("-0123456789abcdef.parquet")] for f in files], files=files,
                   requests=requests)


_COUNTED: dict[tuple[str, int, str], Counted] = {}  # (store, commit, settings) -> its day counts
_COUNTED_LOCK = threading.Lock()
COUNTED_KEEP = 4


def for_commit(store: Store, snapshot: Snapshot, settings: Settings, con: duckdb.DuckDBPyConnection,
               unfiltered: bool) -> Counted:
    """The per-day length counts of a commit, on a store the ingest prepares pages
    for (summaries.prepare_pages_min): the files its preparation noted, else counted (once per commit and
    process). `con` reads the commit; `unfiltered`: its joined_requests is not narrowed (else the count opens
    a connection of its own)."""
    key = (str(store.root), snapshot.version, repr(settings))
    with _COUNTED_LOCK:
        if key not in _COUNTED:
            where = days_dir(store.root, con, settings)
            counted = load_listing(where, snapshot.version)
            if counted is None:
                if not unfiltered:
                    con = store.connect(snapshot)
                    connect_settings(con, settings)
                    joincache.use(con)
                try:
                    counted = count_days(con, where, min_requests=prepare_pages_min())
                finally:
                    if not unfiltered:
                        con.close()
                with contextlib.suppress(OSError):
                    save_listing(where, snapshot.version, counted)
            _COUNTED[key] = counted
            while len(_COUNTED) > COUNTED_KEEP:
                _COUNTED.pop(next(iter(_COUNTED)))
        return _COUNTED[key]


def _day(t: datetime | None) -> str | None:
    return None if t is None else f"{t.astimezone(UTC):%Y-%m-%d}"


def answerable(since: datetime | None, until: datetime | None) -> bool:
    """Whether the per-day counts answer a window: each end open or at a UTC midnight (the day files split
    requests by the UTC day of coalesce(arrival, finished), the time a window keeps a request by)."""
    return all(t is None or t.astimezone(UTC).timetz().replace(tzinfo=None) == dtime(0) for t in (since, until))


def lengths(con: duckdb.DuckDBPyConnection, counted: Counted, *, by: str, bins_per_decade: int = 10,
            percentiles: tuple[float, ...] | None = None, window: Window | None = None,
            values: dict[str, tuple[str, ...]] | None = None) -> Analysis | None:
    """The lengths analysis from the per-day counts, of the requests in `window` (whole UTC days, `answerable`;
    default: every request) whose deployment, workload, label and engine version are among `values` (as
    attribution.dashboard.Filters.values gives them; default: any): equal to analyses.lengths on that
    selection. None when no request is kept (the page's own call says why: an empty store, or filters that
    keep nothing)."""
    window = window or Window()
    if not answerable(window.since, window.until):
        raise ValueError(f"the day counts do not answer the window {window}")
    if not counted.requests or not counted.files:
        return None
    vals = values or {}
    grouping = GroupBy(by)
    picked: dict[str, Any] = {f"{d}s": list(vals.get(d, ())) for d in ("deployment", "workload", "label", "version")}
    queries.materialize(con, "int_length_counts", files=counted.files, by=grouping.value,
                        since_day=_day(window.since), until_day=_day(window.until), **picked)
    try:
        # the request rows count every kept request (also those with no length known); the stats read lengths
        n = con.execute("select coalesce(sum(n), 0)::bigint from int_length_counts where metric = 'requests'"
                        ).fetchone()
        con.execute("delete from int_length_counts where metric = 'requests'")
        requests = int(n[0]) if n else 0
        if not requests:
            return None
        return from_counts(Selection(con, window, grouping, requests), percentile_list(percentiles), bins_per_decade)
    finally:
        con.execute("drop table if exists int_length_counts")
