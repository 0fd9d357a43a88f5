"""Small results kept per store commit on disk, so the next command on the same commit reads what the previous
one computed instead of scanning the store again (a command is a fresh process: in-process memos end with it).

    <store>/_cache/<name>-<commit:020d>-<key>.arrow

`key` hashes what the rows depend on besides the commit: the caller's parts (its SQL, its parameters) and the
definitions of the views it reads on the connection (which name the very Parquet files read, so a connection
reading fewer days has its own key), the DuckDB and Polars versions. Only connections made by
attribution.views.connect over a local store keep anything (`register`); others compute as before. A file is
written to a private temporary name, checked to read back equal and renamed into place: a reader sees a whole
file or none; one that cannot be read is computed again. Writing the first file of a newer commit removes the
files of older ones; a commit keeps at most MAX_FILES (the oldest go first).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from attribution.joincache import cache_dir
from attribution.queries import view_definitions

FORMAT = 1  # bump when what a file holds changes
MAX_FILES = 64  # per commit and name: windows asked of one commit (a few KB each)
_NAME_RE = re.compile(r"^(?P<name>[a-z_]+)-(?P<commit>\d{20})-[0-9a-f]{16}\.arrow$")


@dataclass(frozen=True)
class _Commit:
    root: Path
    version: int


_CONNECTIONS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Commit] = weakref.WeakKeyDictionary()


def register(con: duckdb.DuckDBPyConnection, root: Path, version: int) -> None:
    """Mark `con` as a connection to commit `version` of the local store at `root`."""
    _CONNECTIONS[con] = _Commit(Path(root), version)


def share(con: duckdb.DuckDBPyConnection, cursor: duckdb.DuckDBPyConnection) -> None:
    """Mark `cursor` (con.cursor()) as reading the commit `con` reads (its own views are in the key)."""
    if (src := _CONNECTIONS.get(con)) is not None:
        _CONNECTIONS[cursor] = src


def keeps(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `kept` keeps rows for `con` (a connection or cursor over a local store commit)."""
    return con in _CONNECTIONS


def kept(con: duckdb.DuckDBPyConnection, name: str, parts: Iterable[object], views: tuple[str, ...],
         compute: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """`compute()`, the rows of `name` on `con` given `parts` and the views `views` it reads: read from the
    commit's file when a command computed them before, else computed and kept for the next."""
    path = _path(con, name, parts, views)
    if path is None:
        return compute()
    with contextlib.suppress(OSError, pl.exceptions.PolarsError):
        return pl.read_ipc(path)
    rows = compute()
    _save(path, rows)
    return rows


def has(con: duckdb.DuckDBPyConnection, name: str, parts: Iterable[object], views: tuple[str, ...]) -> bool:
    """Whether `kept(con, name, parts, views, ...)` would read its rows from a file (not compute them)."""
    path = _path(con, name, parts, views)
    return path is not None and path.is_file()


def _path(con: duckdb.DuckDBPyConnection, name: str, parts: Iterable[object], views: tuple[str, ...]
          ) -> Path | None:
    """The file keeping `name`'s rows for `con` and `parts`; None where `con` keeps nothing."""
    src = _CONNECTIONS.get(con)
    if src is None:
        return None
    h = hashlib.sha256(f"{FORMAT}\0{duckdb.__version__}\0{pl.__version__}\0".encode())
    for part in (*parts, sorted(view_definitions(con, views).items())):
        h.update(repr(part).encode() + b"\0")
    return cache_dir(src.root) / f"{name}-{src.version:020d}-{h.hexdigest()[:16]}.arrow"


def _save(path: Path, rows: pl.DataFrame) -> None:
    """Keep `rows` at `path` when they read back equal; nothing (the next reader computes) when the store is
    not writable or a type does not survive the file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        rows.write_ipc(tmp)
        back = pl.read_ipc(tmp)
        if back.schema == rows.schema and back.equals(rows, null_equal=True):
            os.replace(tmp, path)
            _prune(path)
    except (OSError, pl.exceptions.PolarsError):
        pass
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _prune(current: Path) -> None:
    """Remove this name's files of older commits, and its oldest files of this commit beyond MAX_FILES."""
    m = _NAME_RE.match(current.name)
    if m is None:
        return
    mine: list[tuple[float, Path]] = []
    for p in current.parent.iterdir():
        if (old := _NAME_RE.match(p.name)) is None or old["name"] != m["name"]:
            continue
        with contextlib.suppress(OSError):
            if int(old["commit"]) < int(m["commit"]):
                p.unlink()
            elif old["commit"] == m["commit"]:
                mine.append((p.stat().st_mtime, p))
    for _, p in sorted(mine)[:-MAX_FILES]:
        with contextlib.suppress(OSError):
            p.unlink()
