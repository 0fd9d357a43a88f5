"""The dashboard's first look prepared per store commit: each page's answer on the whole store (no filters, the
options a page opens with, the settings in force), computed by the same library call after an ingest and kept
under `<store>/_cache/pages-<commit:020d>-<key>/`, so opening the dashboard on the week just ingested reads
tables instead of sweeping millions of requests. Anything else (a filter, another option) is computed as before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

import attribution
from attribution.analyses import Analysis
from attribution.analyses.common import Empty
from attribution.config import Settings, env
from attribution.joincache import cache_dir

FORMAT = 1  # bump when what a page's files hold changes
_DIR_RE = re.compile(r"^pages-(\d{20})-[0-9a-f]{16}$")
_TMP_RE = re.compile(r"^\.pages-[0-9a-f]{32}\.tmp$")
STALE_TMP_S = 600


def first_look(settings: Settings) -> dict[str, dict[str, Any]]:
    """Page -> the keyword arguments its script (dashboards/app_pages/) passes before anything is changed: the
    calls that are prepared. A key that differs from what a page asks is only a miss (the page computes)."""
    by = settings.by
    return {
        "overview": {"by": by},
        "lengths": {"by": by},
        "concurrency": {"by": by, "per_group": True},
        "arrivals": {"by": by, "tz": settings.tz or None},
        "latency": {"by": by, "slo": (), "preset": None},
        "capacity": {"by": "all"},
        "thresholds": {"specs": ()},
        "cache": {"capacity_blocks": None},
        "memsplit": {"model": None, "whatif": False},
        "compare": {"cohort_by": "version", "before": None, "after": None, "resamples": 1000},
        "changes": {},
    }


def wanted(settings: Settings) -> dict[str, dict[str, Any]]:
    """The pages to prepare: $ATTRIBUTION_PREPARE_PAGES names them (comma-separated; 0/off: none), else all."""
    pages = first_look(settings)
    chosen = (env("ATTRIBUTION_PREPARE_PAGES") or "").strip().lower()
    if chosen in ("0", "off", "no", "false"):
        return {}
    if chosen and chosen not in ("1", "all", "on", "yes", "true"):
        names = {p.strip() for p in chosen.split(",")}
        pages = {k: v for k, v in pages.items() if k in names}
    return pages


@functools.cache
def _code() -> str:
    """A digest of the package's code and SQL: an answer prepared by other code is not this code's answer."""
    h = hashlib.sha256()
    root = Path(attribution.__file__).parent
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".sql", ".toml", ".json") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def settings_key(settings: Settings) -> str:
    return hashlib.sha256(f"{FORMAT}\0{_code()}\0{settings!r}".encode()).hexdigest()[:16]


def _call_key(page: str, kwargs: dict[str, Any]) -> str:
    return f"{page}-" + hashlib.sha256(repr(sorted(kwargs.items())).encode()).hexdigest()[:16]


def commit_dir(root: str | Path, commit: int, settings: Settings) -> Path:
    return cache_dir(Path(root)) / f"pages-{commit:020d}-{settings_key(settings)}"


# JSON for the params, titles, definitions and notes; the types JSON lacks are tagged so they come back equal
def _encode(v: Any) -> Any:
    if isinstance(v, datetime):
        return {"$datetime": v.isoformat()}
    if isinstance(v, date):
        return {"$date": v.isoformat()}
    if isinstance(v, timedelta):
        return {"$timedelta": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, tuple):
        return {"$tuple": [_encode(x) for x in v]}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise TypeError("non-text key")
        return {"$dict": {k: _encode(x) for k, x in v.items()}}
    if v is None or isinstance(v, bool | int | float | str):
        return v
    raise TypeError(f"cannot keep a {type(v).__name__}")


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if isinstance(v, dict):
        tag, x = next(iter(v.items()))
        decoders: dict[str, Callable[[Any], Any]] = {
            "$datetime": datetime.fromisoformat, "$date": date.fromisoformat, "$timedelta": lambda d: timedelta(*d),
            "$tuple": lambda xs: tuple(_decode(y) for y in xs), "$dict": lambda d: {k: _decode(y) for k, y in d.items()}}
        return decoders[tag](x)
    return v


def _same(a: Analysis | Empty, b: Analysis | Empty) -> bool:
    """Whether a read-back answer is the computed one: every field, every table with its dtypes (NaN = NaN)."""
    if not isinstance(a, Analysis) or not isinstance(b, Analysis):
        return a == b
    meta = (a.name, a.params, a.titles, a.definitions, a.notes) == (b.name, b.params, b.titles, b.definitions,
                                                                    b.notes)
    return meta and list(a.tables) == list(b.tables) and all(
        a.tables[k].schema == b.tables[k].schema and a.tables[k].equals(b.tables[k], null_equal=True)
        for k in a.tables)


def _read(path: Path) -> Analysis | Empty:
    meta = json.loads((path / "meta.json").read_text())
    if "empty" in meta:
        return Empty(meta["empty"])
    tables = {name: pl.read_ipc(path / f"{i}.arrow") for i, name in enumerate(meta["tables"])}
    return Analysis(meta["name"], _decode(meta["params"]), tables, _decode(meta["titles"]),
                    _decode(meta["definitions"]), _decode(meta["notes"]))


def save(root: str | Path, commit: int, settings: Settings, page: str, kwargs: dict[str, Any],
         res: Analysis | Empty) -> bool:
    """Keep `res` (an Analysis, or the page's empty state: compare without two cohorts), the answer of
    `page(**kwargs)` on commit `commit` unfiltered; False (nothing kept) when it does not read back equal.
    Written into a temporary directory and renamed into place: a reader sees a whole answer or none."""
    final = commit_dir(root, commit, settings) / _call_key(page, kwargs)
    tmp = cache_dir(Path(root)) / f".pages-{uuid.uuid4().hex}.tmp"
    tables = res.tables if isinstance(res, Analysis) else {}
    try:
        meta = {"name": res.name, "params": _encode(res.params), "titles": _encode(res.titles),
                "definitions": _encode(res.definitions), "notes": _encode(res.notes),
                "tables": list(res.tables)} if isinstance(res, Analysis) else {"empty": res.message}
    except TypeError:
        return False
    try:
        tmp.mkdir(parents=True)
        for i, df in enumerate(tables.values()):
            df.write_ipc(tmp / f"{i}.arrow", compression="zstd")
        (tmp / "meta.json").write_text(json.dumps(meta))
        if not _same(_read(tmp), res):
            return False  # a type the files do not keep exactly: the reader computes this one
        final.parent.mkdir(exist_ok=True)
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        return True
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(root: str | Path, commit: int, settings: Settings, page: str, kwargs: dict[str, Any]
         ) -> Analysis | Empty | None:
    """The prepared answer of `page(**kwargs)` on commit `commit` unfiltered, or None (not prepared, or
    unreadable: the caller computes it)."""
    path = commit_dir(root, commit, settings) / _call_key(page, kwargs)
    if not path.is_dir():
        return None
    try:
        return _read(path)
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None


def prune(root: str | Path, commit: int) -> None:
    """Remove the prepared pages of older commits (a reader that loaded one holds its tables in memory) and
    the temporary directories of a preparation killed while writing (a save renames its own within seconds)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for p in cache_dir(Path(root)).iterdir():
            m = _DIR_RE.match(p.name)
            if m and int(m.group(1)) < commit:
                shutil.rmtree(p, ignore_errors=True)
            elif _TMP_RE.match(p.name) and now - p.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(p, ignore_errors=True)
