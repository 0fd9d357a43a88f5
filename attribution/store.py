"""The store: Parquet files per table plus a log of commits saying which files are live and how far each
input file has been read.

    <store>/attribution-store.json          marker: layout version
    <store>/_log/<n:020d>.json               commit n (data files added/removed, input-file states)
    <store>/_log/<n:020d>.checkpoint.json    the folded state after commit n, every CHECKPOINT_EVERY commits
    <store>/data/<table>/day=YYYY-MM-DD/<n>-<uuid>.parquet   hive-partitioned (attribution.layout); at rest,
                                             exactly the last commit's live files
    <store>/_trash/<table>/day=.../<name>    files commits removed, deleted GRACE_S after their commit
    <store>/_tmp/                            staging (the writer's files, and parse workers' `stage`d ones)
    <store>/_lock                            flock of the single writer
    <store>/_cache/                          readers' caches (attribution.joincache: the engine x gateway
                                             join per commit); never read by the writer, safe to delete

A data file becomes visible only when a commit naming it is renamed into `_log/`, after the file itself was
fsynced: a writer killed at any moment leaves the previous state, and the next writer deletes its orphans.
Readers fold the log without a lock, so they never wait for an ingest. Files a commit removes (superseded
tails, compacted parts) leave `data/` right after it, into `_trash/`, and are deleted GRACE_S seconds later, so
a reader holding an older snapshot can finish (it reads through `layout.anywhere`/`Store.locate`). Layout 1
(flat `data/<table>/`, removed files kept in place) is upgraded by the next writer (attribution.upgrade).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution import layout, reader, remote
from attribution.config import env, env_float, env_on
from attribution.errors import StoreError, StoreLocked

if TYPE_CHECKING:
    import duckdb

LAYOUT_VERSION = 2  # 2: hive-partitioned data files, removed ones in _trash/
MARKER = reader.STORE_MARKER
CHECKPOINT_EVERY = 50
PARQUET_ZSTD_LEVEL = 1  # smaller and ~30% faster to write than the default level on our tables
GRACE_S = 3600.0  # default of $ATTRIBUTION_GRACE_S
_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CKPT_RE = re.compile(r"^(\d{20})\.checkpoint\.json$")


def default_store_path(explicit: str | os.PathLike[str] | None = None) -> Path | str:
    """`--store`, else $ATTRIBUTION_STORE, else ./attribution-store: a Path, or an object-store URL as given."""
    given = os.fspath(explicit) if explicit else env("ATTRIBUTION_STORE") or "attribution-store"
    return given if remote.url_of(given) else Path(given)


@dataclass
class Snapshot:
    """The folded log: the state of every input file and every live data file, as of commit `version`."""

    version: int = 0
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # file key -> state
    data: dict[str, dict[str, Any]] = field(default_factory=dict)  # data path (store-relative) -> entry
    removed: dict[str, float] = field(default_factory=dict)  # data path -> time it was removed

    def apply(self, commit: dict[str, Any]) -> None:
        for path in commit.get("remove", []):
            self.data.pop(path, None)
            self.removed[path] = commit["ts"]
        for entry in commit.get("add", []):
            self.data[entry["path"]] = entry
        for key, state in commit.get("files", {}).items():
            self.files[key] = state
        for path in commit.get("purged", []):
            self.removed.pop(path, None)
        self.version = commit["id"]

    def live(self, table: str) -> list[str]:
        return [p for p, e in self.data.items() if e["table"] == table]

    def path_index(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Input path -> (key, newest state). A rotated path has older states too; the newest wins."""
        index: dict[str, tuple[str, dict[str, Any]]] = {}
        for key, st in self.files.items():
            cur = index.get(st["path"])
            if cur is None or st["seq"] > cur[1]["seq"]:
                index[st["path"]] = (key, st)
        return index

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "files": self.files, "data": self.data, "removed": self.removed}


class Store:
    def __init__(self, root: str | os.PathLike[str]):
        self.url = remote.url_of(root)  # an object-store URL (read-only), else None
        self.root = Path(root)
        self.remote = remote.Remote(self.url) if self.url else None
        self.layout = LAYOUT_VERSION

    def __str__(self) -> str:
        return self.url or str(self.root)

    # -- opening ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike[str], create: bool = False) -> Store:
        store = cls(root)
        marker = store.root / MARKER
        text = store.remote.read_text(MARKER) if store.remote else (marker.read_text() if marker.exists() else None)
        if text is not None:
            try:
                layout_version = json.loads(text)["layout"]
            except (ValueError, KeyError) as exc:
                raise StoreError(f"{store}/{MARKER}: not a valid store marker ({exc})") from exc
            if layout_version > LAYOUT_VERSION:
                raise StoreError(f"{store}: store layout {layout_version} is newer than this attribution "
                                 f"understands ({LAYOUT_VERSION}); upgrade attribution to read it")
            store.layout = layout_version
            return store
        if store.remote:
            if create:
                raise StoreError(f"{store}: writing to an object store is not supported; ingest into a local "
                                 "directory and copy it there (see the README's store section)")
            raise StoreError(f"{store}: no attribution store here (no {MARKER})")
        if not create:
            if store.root.exists() and any(store.root.iterdir()):
                raise StoreError(f"{store.root}: exists but is not an attribution store")
            raise StoreError(f"{store.root}: no store here yet; run `attribution ingest PATH --store {store.root}`")
        if store.root.exists() and any(p.name not in ("_lock", "workloads.toml") for p in store.root.iterdir()):
            raise StoreError(f"{store.root}: exists, is not empty and is not an attribution store")
        for sub in ("_log", "data", "_tmp"):
            (store.root / sub).mkdir(parents=True, exist_ok=True)
        _atomic_write(store.root / MARKER, {"layout": LAYOUT_VERSION, "created": time.time()}, store.root / "_tmp")
        return store

    @property
    def log_dir(self) -> Path:
        return self.root / "_log"

    # -- reading ---------------------------------------------------------------------------------------
    def _log_names(self) -> list[str]:
        return self.remote.listdir("_log") if self.remote else os.listdir(self.log_dir)

    def _log_read(self, name: str) -> Any:
        if self.remote:
            text = self.remote.read_text(f"_log/{name}")
            if text is None:
                raise StoreError(f"{self}/_log/{name}: listed but gone (a checkpoint or commit removed meanwhile?)")
            return json.loads(text)
        return json.loads((self.log_dir / name).read_text())

    def snapshot(self) -> Snapshot:
        commits: dict[int, str] = {}
        ckpts: list[int] = []
        for name in self._log_names():
            if m := _COMMIT_RE.match(name):
                commits[int(m.group(1))] = name
            elif m := _CKPT_RE.match(name):
                ckpts.append(int(m.group(1)))
        snap = Snapshot()
        base = max(ckpts, default=0)
        if base:
            raw = self._log_read(f"{base:020d}.checkpoint.json")
            snap = Snapshot(raw["version"], raw["files"], raw["data"], raw.get("removed", {}))
        for n in sorted(k for k in commits if k > base):
            snap.apply(self._log_read(commits[n]))
        return snap

    def locate(self, rel: str) -> Path:
        """A data file of a snapshot (store-relative path), where it is now: `data/` while live, `_trash/`
        once a later commit removed it (until GRACE_S after that commit). Local stores only."""
        return layout.locate(self.root, rel)

    def read_paths(self, rels: list[str]) -> list[str]:
        """What DuckDB reads for these data files of a snapshot (see layout.anywhere; URLs for a remote)."""
        if self.remote:
            resolve = self.remote.resolver()
            return [resolve(r) for r in rels]
        return [layout.anywhere(self.root, r) for r in rels]

    def connect(self, snapshot: Snapshot | None = None, *,
                days: tuple[str | None, str | None] | dict[str, tuple[str | None, str | None]] | None = None
                ) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with the store's tables and views (see attribution.views); `days`
        (first, last UTC day, inclusive) reads only the partitions of those days (and rows without a time);
        a dict gives each table its own (attribution.pruning)."""
        from attribution.views import connect

        return connect(self, snapshot or self.snapshot(), days=days)

    def writer(self) -> Writer:
        if self.remote:
            raise StoreError(f"{self}: writing to an object store is not supported; write a local store")
        return Writer(self)


class Writer:
    """The single writer (an exclusive, non-blocking flock). Use as a context manager."""

    def __init__(self, store: Store):
        self.store = store
        self.root = store.root
        self._lock_fh: Any = None
        self.snapshot = Snapshot()

    def __enter__(self) -> Writer:
        self._lock_fh = open(self.root / "_lock", "a+")
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.seek(0)
            holder = self._lock_fh.read().strip() or "unknown"
            self._lock_fh.close()
            raise StoreLocked(
                f"{self.root}: another ingest is writing to this store (pid {holder}); "
                "readers (status, query, report) work meanwhile, try the ingest again when it ends"
            ) from None
        self._lock_fh.seek(0)
        self._lock_fh.truncate()
        self._lock_fh.write(str(os.getpid()))
        self._lock_fh.flush()
        self.snapshot = self.store.snapshot()
        self._clean()
        if self.store.layout < LAYOUT_VERSION:
            from attribution.upgrade import upgrade

            upgrade(self)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()

    def _clean(self) -> None:
        """Put `data/` back to exactly the live files: delete what a killed writer left (staging files, data
        files no commit names), move removed files a killed writer left in `data/` to the trash, and delete
        trashed files whose grace period is over or that no commit removed."""
        for p in (self.root / "_tmp").iterdir():
            p.unlink(missing_ok=True)
        removed = self.snapshot.removed
        data_dir, trash = self.root / "data", self.root / layout.TRASH
        for p in data_dir.rglob("*.parquet"):
            rel = p.relative_to(self.root).as_posix()
            if rel in removed:
                self._trash(rel)
            elif rel not in self.snapshot.data:
                p.unlink(missing_ok=True)
        for p in trash.rglob("*.parquet") if trash.exists() else ():
            if layout.from_trash(p.relative_to(self.root).as_posix()) not in removed:
                p.unlink(missing_ok=True)
        now = time.time()
        expired = [p for p, ts in removed.items() if now - ts >= env_float("ATTRIBUTION_GRACE_S", GRACE_S)]
        if expired:
            for rel in expired:
                (self.root / layout.trash_path(rel)).unlink(missing_ok=True)
                (self.root / rel).unlink(missing_ok=True)
            self.commit([], [], {}, purged=expired)
        for top in (data_dir, trash):  # partitions emptied by compaction or the trash's purge
            for d in sorted(top.glob("*/*/"), reverse=True) if top.exists() else ():
                with contextlib.suppress(OSError):
                    d.rmdir()

    def mark_layout(self) -> None:
        """Say in the marker that the store has this version's layout (attribution.upgrade, after its commit)."""
        marker = json.loads((self.root / MARKER).read_text())
        _atomic_write(self.root / MARKER, dict(marker, layout=LAYOUT_VERSION, upgraded=time.time()),
                      self.root / "_tmp")
        self.store.layout = LAYOUT_VERSION

    def _trash(self, rel: str) -> None:
        dest = self.root / layout.trash_path(rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):  # (moved already by a writer killed after the move)
            os.rename(self.root / rel, dest)

    def write(self, table: str, df: pl.DataFrame | pl.LazyFrame, *, file_key: str | None, sealed: bool
              ) -> list[dict[str, Any]]:
        """Write rows of `table` as Parquet data files, one per day partition (invisible until a commit adds
        the returned entries). A LazyFrame is streamed to disk (compaction), a DataFrame written directly."""
        if isinstance(df, pl.LazyFrame):
            ds = layout.days(table, df)
            parts = [stage(self.root, table, df if len(ds) == 1 else layout.only(table, df, d), day=d) for d in ds]
        else:
            parts = [stage(self.root, table, part, day=d) for d, part in layout.split(table, df).items()]
        return [e for st in parts for e in self.adopt(st, file_key=file_key, sealed=sealed)]

    def adopt(self, staged: Staged, *, file_key: str | None, sealed: bool) -> list[dict[str, Any]]:
        """Move a data file staged in `_tmp/` (by this process or a worker, see `stage`) into its partition
        of `data/`, split by day first if its rows span several; invisible until a commit adds the returned
        entries."""
        src = self.root / "_tmp" / staged.name
        if staged.day is None:
            ds = layout.days(staged.table, pl.scan_parquet(src))
            if len(ds) > 1:
                parts = layout.split(staged.table, pl.read_parquet(src))
                src.unlink()
                return [e for d, part in parts.items()
                        for e in self.adopt(stage(self.root, staged.table, part, day=d), file_key=file_key,
                                            sealed=sealed)]
            staged = Staged(staged.table, staged.name, staged.rows, ds[0] if ds else layout.NULL_DAY)
        rel = layout.data_path(staged.table, staged.day or layout.NULL_DAY, self.snapshot.version + 1)
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dest)
        return [{"path": rel, "table": staged.table, "rows": staged.rows, "file_key": file_key, "sealed": sealed}]

    def commit(
        self,
        add: Sequence[dict[str, Any] | list[dict[str, Any]]],
        remove: list[str],
        files: dict[str, dict[str, Any]],
        *,
        purged: list[str] | None = None,
    ) -> int:
        """Make `add` live and `remove` gone in one atomic step (the log file's rename); the removed files
        then leave `data/` for `_trash/` (a writer killed before that leaves them to the next one's _clean)."""
        n = self.snapshot.version + 1
        # (an entry list as `write`/`adopt` return it may stand for an entry: callers from before partitions
        # collect `[w.write(...) for ...]`)
        entries = [e for x in add for e in (x if isinstance(x, list) else [x])]
        commit = {"id": n, "ts": time.time(), "add": entries, "remove": remove, "files": files}
        if purged:
            commit["purged"] = purged
        for d in {(self.root / e["path"]).parent for e in entries}:
            _fsync_dir(d)
        _atomic_write(self.store.log_dir / f"{n:020d}.json", commit, self.root / "_tmp")
        self.snapshot.apply(commit)
        for rel in remove:
            self._trash(rel)
        if n % CHECKPOINT_EVERY == 0:
            _atomic_write(
                self.store.log_dir / f"{n:020d}.checkpoint.json", self.snapshot.to_json(), self.root / "_tmp"
            )
        return n


@dataclass(frozen=True)
class Staged:
    """A Parquet data file written and synced under `<store>/_tmp/`, waiting for the writer to adopt it."""

    table: str
    name: str
    rows: int
    day: str | None = None  # its partition, when the stager knew its rows fall in one (else adopt looks)

    @property
    def height(self) -> int:  # counted like the DataFrame it stands for
        return self.rows


def stage(root: str | os.PathLike[str], table: str, df: pl.DataFrame | pl.LazyFrame, *, day: str | None = None
          ) -> Staged:
    """Write rows of `table` as a Parquet file in the store's staging directory and sync it. Any process may
    stage (parse workers do, so the ingest process does not serialise their rows); only the writer adopts.
    A staged file no commit adopted is deleted by the next writer (`Writer._clean`)."""
    name = uuid.uuid4().hex + ".parquet"
    tmp = Path(root) / "_tmp" / name
    if day is None and isinstance(df, pl.DataFrame):  # (a worker's chunk: its day found here, in parallel)
        ds = layout.days(table, df)
        day = ds[0] if len(ds) == 1 else None
    if isinstance(df, pl.LazyFrame):
        df.sink_parquet(tmp, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)
        rows = pl.scan_parquet(tmp).select(pl.len()).collect().item()
    else:
        df.write_parquet(tmp, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)
        rows = df.height
    _fsync_file(tmp)
    return Staged(table, name, rows, day)


def _syncing() -> bool:
    """$ATTRIBUTION_FSYNC=0 (or off/no/false) writes without fsync: a killed process still leaves a consistent
    store (the page cache outlives it), a power cut may not. For scratch stores: the test suite, where a sync
    waits ~10 ms on a busy disk and an ingest makes about ten."""
    return env_on("ATTRIBUTION_FSYNC")


def _fsync_file(path: Path) -> None:
    if not _syncing():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    if not _syncing():
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(dest: Path, obj: dict[str, Any], tmp_dir: Path) -> None:
    tmp = tmp_dir / (uuid.uuid4().hex + ".json")
    with open(tmp, "w") as fh:
        json.dump(obj, fh, separators=(",", ":"))
        fh.flush()
        if _syncing():
            os.fsync(fh.fileno())
    os.rename(tmp, dest)
    _fsync_dir(dest.parent)
