"""The engine x gateway join (`joined_requests`, queries/stg_joined_requests.sql) kept once per store commit:
a read-only DuckDB file under the store's cache directory that every reader of that commit attaches instead of
redoing the join (seconds per million requests) in every analysis. It holds the staged `requests` (request
events folded in) too, which the join reads and `attribution status` counts, and the values the dashboard's filters offer
(queries/dashboard_filter_choices.sql over the join, a few hundred rows).

    <store>/_cache/joined_requests-<commit:020d>-<key>.duckdb

`key` hashes what else the rows depend on: the staging SQL, the workload mapping the connection uses (a
report may name workloads its own way) and the DuckDB version (its file format). Readers build the file
after each ingest (attribution.summaries), else lazily, the first time a connection needs the join: into a private temporary file renamed into place, so a
reader never sees half a file, two readers building at once both succeed (the later rename wins; the files
are equal), and nothing waits for, or takes, the writer's lock. A reader that attached a file keeps it open,
so removing it (a newer commit's build removes the files of older commits) never breaks a running reader;
one that needs an old commit again rebuilds it. Where the store is not writable the file goes to a private
temporary directory, removed with the connection.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
import uuid
import weakref
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import polars as pl

from attribution import queries
from attribution.db import fetch

CACHE_DIR = "_cache"
TABLES = ("requests", "joined_requests")  # the staged requests (queries/stg_requests.sql) and their join
CHOICES = "filter_choices"  # queries/dashboard_filter_choices.sql over the join (not a view on the connection)
FORMAT = 3  # bump when what the file holds changes
STALE_TMP_S = 6 * 3600  # a build's temporary file older than this was left by a killed reader
ROW_GROUP = 122_880  # rows of a DuckDB row group (its default), the unit its scans split among threads
VECTOR = 2_048  # rows of a DuckDB vector: a row group holds a whole number of them
_NAME_RE = re.compile(r"^joined_requests-(\d{20})-[0-9a-f]{16}\.duckdb$")


@dataclass
class _Source:
    root: Path
    version: int
    views: dict[str, str]  # the staging views' definitions as made (a changed one is never replaced)
    state: str = "view"  # view: joined_requests is the staging view; attached: it reads the cached table
    alias: str = ""  # the attached file's name on the connection


_CONNECTIONS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Source] = weakref.WeakKeyDictionary()


def register(con: duckdb.DuckDBPyConnection, root: Path, version: int) -> None:
    """Mark `con` (made by attribution.views.connect) as a connection to commit `version` of the store at
    `root`, whose joined_requests may be served from the cache."""
    _CONNECTIONS[con] = _Source(Path(root), version, _as_made(con))


def _definitions(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return queries.view_definitions(con, ("requests", "joined_requests"))


# The staging views' definitions as attribution.views.connect makes them: the same text on every store
# connection of a process (made from the same queries' SQL), so read from DuckDB once (~3 ms a connection).
_MADE: dict[tuple[str, ...], dict[str, str]] = {}


def _as_made(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    made = (duckdb.__version__, *(queries.load(n).sql for n in ("stg_requests", "stg_joined_requests")))
    if made not in _MADE:
        _MADE[made] = _definitions(con)
    return dict(_MADE[made])


def attached(con: duckdb.DuckDBPyConnection) -> bool:
    """`con` reads a commit's cached join (its rows cannot change under it)."""
    src = _CONNECTIONS.get(con)
    return src is not None and src.state == "attached"


def cached_for(root: Path, version: int) -> list[Path]:
    """The cached joins of commit `version` (one per workload mapping), without opening them."""
    d = cache_dir(root)
    try:
        return [d / n for n in os.listdir(d) if (m := _NAME_RE.match(n)) and int(m.group(1)) == version]
    except OSError:
        return []


def cache_dir(root: Path) -> Path:
    return Path(root) / CACHE_DIR


def key(con: duckdb.DuckDBPyConnection) -> str:
    """What the cached join of `con` depends on besides the commit: staging SQL, workload mapping, DuckDB."""
    h = hashlib.sha256()
    h.update(f"{FORMAT}\0{duckdb.__version__}\0{','.join(TABLES)}\0".encode())
    for name in ("stg_requests", "stg_engine_config", "stg_joined_requests", "dashboard_filter_choices"):
        h.update(queries.load(name).sql.encode() + b"\0")
    mapping = fetch(con, "select match, name from workload_map order by match, name")
    for match, name in mapping.iter_rows():
        h.update(f"{match}\0{name}\0".encode())
    return h.hexdigest()[:16]


def use(con: duckdb.DuckDBPyConnection, *, fallback_dir: Path | None = None) -> bool:
    """Serve `con`'s joined_requests from the commit's cached table (built now if missing). A no-op (False)
    for connections that are not a store's (frames_connection, a user's own) and once already done."""
    src = _CONNECTIONS.get(con)
    if src is None:
        return False
    if src.state == "attached":
        return True
    if _definitions(con) != src.views:  # narrowed or redefined by the caller: leave them alone
        return False
    name = f"joined_requests-{src.version:020d}-{key(con)}.duckdb"
    alias = f"joined_cache_{uuid.uuid4().hex[:8]}"
    # (a built file is attached as found: checking it first would open the database twice)
    if not _attach(con, cache_dir(src.root) / name, alias):
        path = _ready(con, cache_dir(src.root) / name)
        if path is None:  # the store is not writable (or the disk is full): a private copy for this connection
            private = Path(tempfile.mkdtemp(prefix="attribution-join-", dir=fallback_dir))
            weakref.finalize(con, shutil.rmtree, private, True)
            path = _ready(con, private / name)
            if path is None:
                return False
        con.execute(f"attach $file as {alias} (read_only)", {"file": str(path)})
    for table in TABLES:
        con.execute(f"create or replace view {table} as select * from {alias}.{table}")
    src.state, src.alias, src.views = "attached", alias, _definitions(con)
    return True


def share(con: duckdb.DuckDBPyConnection, cursor: duckdb.DuckDBPyConnection) -> None:
    """Mark `cursor` (con.cursor(): the same database, its own temporary tables and session settings) as
    reading the cached join `con` attached, as `con` does; nothing when `con` reads none."""
    src = _CONNECTIONS.get(con)
    if src is not None and src.state == "attached":
        _CONNECTIONS[cursor] = replace(src)  # (its views as attached: a cursor narrowed since differs)


def choices(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """queries/dashboard_filter_choices.sql on `con`, as cached with the commit's join; None when `con` does not
    read a cached join or narrowed its views since (then the caller runs the query)."""
    src = _CONNECTIONS.get(con)
    if src is None or src.state != "attached" or _definitions(con) != src.views:
        return None
    return fetch(con, f"select * from {src.alias}.{CHOICES}")


def _ready(con: duckdb.DuckDBPyConnection, path: Path) -> Path | None:
    """`path`, built if it does not exist yet; None when it cannot be written."""
    if _valid(path):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    except OSError:
        return None
    alias = f"joined_build_{uuid.uuid4().hex[:8]}"
    try:
        _attach_new(con, tmp, alias)
        try:
            # The staged requests first (the request events folded in once), then the join reading them.
            con.execute(f"create table {alias}.requests as select * from requests")
            con.execute(f"create or replace view requests as select * from {alias}.requests")
            con.execute(f"create table {alias}.joined_requests as select * from joined_requests")
            con.execute(f"create or replace view joined_requests as select * from {alias}.joined_requests")
            con.execute(f"create table {alias}.{CHOICES} as " + queries.load("dashboard_filter_choices").sql)
        finally:
            queries.create_view(con, "stg_requests", "requests")
            queries.create_view(con, "stg_joined_requests", "joined_requests")
            con.execute(f"detach {alias}")
        os.replace(tmp, path)
    except (OSError, duckdb.IOException, duckdb.PermissionException):
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _prune(path)
    return path


def row_group_size(con: duckdb.DuckDBPyConnection) -> int:
    """The row group size of the file `con` builds: DuckDB's own for a store of a row group of requests or more,
    else a quarter of the requests (whole vectors). DuckDB writes a new table of less than one row group twice at
    its commit (into the write-ahead log, then again, compressed, when the log is checkpointed), one of a whole
    row group or more once, straight into the file: 0.05-0.08 CPU s a table, about a tenth of the build, on a
    58k-request store (bench/ingest/README.md, session 15). The rows are the same; a reader's scans split among
    threads by these row groups."""
    try:
        rows = int(fetch(con, "select count(*) from raw_requests").item())
    except duckdb.CatalogException:  # (not a store's connection: the default)
        return ROW_GROUP
    if rows >= ROW_GROUP:
        return ROW_GROUP
    return max(VECTOR, -(-rows // (4 * VECTOR)) * VECTOR)


def _attach_new(con: duckdb.DuckDBPyConnection, tmp: Path, alias: str) -> None:
    """Attach the file to build, `tmp`, as `alias`, in row groups of `row_group_size` (DuckDB's default where
    the ATTACH option is unknown: it came after 1.1, which pyproject.toml allows)."""
    size = row_group_size(con)
    if size != ROW_GROUP:
        try:
            con.execute(f"attach $file as {alias} (row_group_size {size})", {"file": str(tmp)})
            return
        except (duckdb.BinderException, duckdb.NotImplementedException, duckdb.InvalidInputException):
            pass
    con.execute(f"attach $file as {alias}", {"file": str(tmp)})


def _attach(con: duckdb.DuckDBPyConnection, path: Path, alias: str) -> bool:
    """Attach the built file `path` read-only as `alias` on `con`; False when there is none, or it is torn
    (from a crash: removed, to be rebuilt)."""
    if not path.is_file():
        return False
    try:
        con.execute(f"attach $file as {alias} (read_only)", {"file": str(path)})
    except duckdb.Error:
        with contextlib.suppress(OSError):
            path.unlink()
        return False
    names = {r[0] for r in con.execute("select table_name from duckdb_tables() where database_name = $db",
                                       {"db": alias}).fetchall()}
    if {*TABLES, CHOICES} <= names:
        return True
    con.execute(f"detach {alias}")
    with contextlib.suppress(OSError):
        path.unlink()
    return False


def _valid(path: Path) -> bool:
    """The file exists and DuckDB can open it (a torn file from a crash is removed, to be rebuilt)."""
    if not path.is_file():
        return False
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            names = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
        if {*TABLES, CHOICES} <= names:
            return True
        raise duckdb.Error(f"{path}: incomplete")
    except duckdb.Error:
        with contextlib.suppress(OSError):
            path.unlink()
        return False


def _prune(current: Path) -> None:
    """Remove the cached joins of older commits and temporary files that killed builds left."""
    m = _NAME_RE.match(current.name)
    if m is None:
        return
    version = int(m.group(1))
    now = time.time()
    for p in current.parent.iterdir():
        with contextlib.suppress(OSError):
            if (old := _NAME_RE.match(p.name)) and int(old.group(1)) < version:
                p.unlink()
            elif p.name.endswith(".tmp") and now - p.stat().st_mtime > STALE_TMP_S:
                p.unlink()
