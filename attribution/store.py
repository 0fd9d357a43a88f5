"""The store: Parquet files per table plus a log of commits saying which files are live and how far each
input file has been read.

    <store>/attribution-store.json          marker: layout version
    <store>/_log/<n:020d>.json               commit n (data files added/removed, input-file states)
    <store>/_log/<n:020d>.checkpoint.json    the folded state after commit n, every CHECKPOINT_EVERY commits
    <store>/data/<table>/<n>-<uuid>.parquet
    <store>/_tmp/                            staging (the writer's files, and parse workers' `stage`d ones)
    <store>/_lock                            flock of the single writer
    <store>/_cache/                          readers' caches (attribution.joincache: the engine x gateway
                                             join per commit); never read by the writer, safe to delete

A data file becomes visible only when a commit naming it is renamed into `_log/`, after the file itself was
fsynced: a writer killed at any moment leaves the previous state, and the next writer deletes its orphans.
Readers fold the log without a lock, so they never wait for an ingest. Files a commit removes (superseded
tails, compacted parts) stay on disk for GRACE_S seconds so a reader holding an older snapshot can finish.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution import reader
from attribution.config import env, env_float
from attribution.errors import StoreError, StoreLocked

if TYPE_CHECKING:
    import duckdb

LAYOUT_VERSION = 1
MARKER = reader.STORE_MARKER
CHECKPOINT_EVERY = 50
PARQUET_ZSTD_LEVEL = 1  # smaller and ~30% faster to write than the default level on our tables
GRACE_S = 3600.0  # default of $ATTRIBUTION_GRACE_S
_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CKPT_RE = re.compile(r"^(\d{20})\.checkpoint\.json$")


def default_store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--store`, else $ATTRIBUTION_STORE, else ./attribution-store."""
    if explicit:
        return Path(explicit)
    return Path(env("ATTRIBUTION_STORE") or "attribution-store")


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
        self.root = Path(root)

    # -- opening ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike[str], create: bool = False) -> Store:
        store = cls(root)
        marker = store.root / MARKER
        if marker.exists():
            try:
                layout = json.loads(marker.read_text())["layout"]
            except (ValueError, KeyError) as exc:
                raise StoreError(f"{marker}: not a valid store marker ({exc})") from exc
            if layout > LAYOUT_VERSION:
                raise StoreError(f"{store.root}: store layout {layout} is newer than this attribution understands")
            return store
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
    def snapshot(self) -> Snapshot:
        commits: dict[int, str] = {}
        ckpts: list[int] = []
        for name in os.listdir(self.log_dir):
            if m := _COMMIT_RE.match(name):
                commits[int(m.group(1))] = name
            elif m := _CKPT_RE.match(name):
                ckpts.append(int(m.group(1)))
        snap = Snapshot()
        base = max(ckpts, default=0)
        if base:
            raw = json.loads((self.log_dir / f"{base:020d}.checkpoint.json").read_text())
            snap = Snapshot(raw["version"], raw["files"], raw["data"], raw.get("removed", {}))
        for n in sorted(k for k in commits if k > base):
            snap.apply(json.loads((self.log_dir / commits[n]).read_text()))
        return snap

    def connect(self, snapshot: Snapshot | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with the store's tables and views (see attribution.views)."""
        from attribution.views import connect

        return connect(self, snapshot or self.snapshot())

    def writer(self) -> Writer:
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
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()

    def _clean(self) -> None:
        """Delete what a killed writer left (staging files, data files no commit names) and removed files whose
        grace period is over."""
        for p in (self.root / "_tmp").iterdir():
            p.unlink(missing_ok=True)
        known = set(self.snapshot.data) | set(self.snapshot.removed)
        data_dir = self.root / "data"
        for p in data_dir.rglob("*.parquet"):
            rel = p.relative_to(self.root).as_posix()
            if rel not in known:
                p.unlink(missing_ok=True)
        now = time.time()
        expired = [p for p, ts in self.snapshot.removed.items() if now - ts >= env_float("ATTRIBUTION_GRACE_S", GRACE_S)]
        if expired:
            for rel in expired:
                (self.root / rel).unlink(missing_ok=True)
            self.commit([], [], {}, purged=expired)

    def write(self, table: str, df: pl.DataFrame | pl.LazyFrame, *, file_key: str | None, sealed: bool
              ) -> dict[str, Any]:
        """Write one Parquet data file (invisible until a commit adds the returned entry). A LazyFrame is
        streamed to disk (compaction), a DataFrame written directly."""
        staged = stage(self.root, table, df)
        return self.adopt(staged, file_key=file_key, sealed=sealed)

    def adopt(self, staged: Staged, *, file_key: str | None, sealed: bool) -> dict[str, Any]:
        """Move a data file staged in `_tmp/` (by this process or a worker, see `stage`) into `data/`;
        invisible until a commit adds the returned entry."""
        rel = f"data/{staged.table}/{self.snapshot.version + 1:012d}-{uuid.uuid4().hex[:12]}.parquet"
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.root / "_tmp" / staged.name, dest)
        return {"path": rel, "table": staged.table, "rows": staged.rows, "file_key": file_key, "sealed": sealed}

    def commit(
        self,
        add: list[dict[str, Any]],
        remove: list[str],
        files: dict[str, dict[str, Any]],
        *,
        purged: list[str] | None = None,
    ) -> int:
        n = self.snapshot.version + 1
        commit = {"id": n, "ts": time.time(), "add": add, "remove": remove, "files": files}
        if purged:
            commit["purged"] = purged
        for d in {(self.root / e["path"]).parent for e in add}:
            _fsync_dir(d)
        _atomic_write(self.store.log_dir / f"{n:020d}.json", commit, self.root / "_tmp")
        self.snapshot.apply(commit)
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

    @property
    def height(self) -> int:  # counted like the DataFrame it stands for
        return self.rows


def stage(root: str | os.PathLike[str], table: str, df: pl.DataFrame | pl.LazyFrame) -> Staged:
    """Write rows of `table` as a Parquet file in the store's staging directory and sync it. Any process may
    stage (parse workers do, so the ingest process does not serialise their rows); only the writer adopts.
    A staged file no commit adopted is deleted by the next writer (`Writer._clean`)."""
    name = uuid.uuid4().hex + ".parquet"
    tmp = Path(root) / "_tmp" / name
    if isinstance(df, pl.LazyFrame):
        df.sink_parquet(tmp, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)
        rows = pl.scan_parquet(tmp).select(pl.len()).collect().item()
    else:
        df.write_parquet(tmp, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)
        rows = df.height
    _fsync_file(tmp)
    return Staged(table, name, rows)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
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
        os.fsync(fh.fileno())
    os.rename(tmp, dest)
    _fsync_dir(dest.parent)
