"""Planning a file before it is read: skipped as unchanged, resumed from its offset (grown, or renamed by
rotation), read from the start (new content), or recorded as a problem (vanished, unreadable, unrecognised);
the plan to read it and the account that will apply its rows."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

from attribution import census, formats, reader
from attribution.ingest.batching import Account, Batch
from attribution.ingest.naming import default_deployment
from attribution.ingest.parsing import choose_source, file_error
from attribution.ingest.summary import PROBLEMS, FileReport, Progress
from attribution.ingest.units import Plan
from attribution.schema import META_TABLES
from attribution.sources.base import ParseContext, Source
from attribution.store import Writer


def relink(path: Path, batch: Batch, index: dict[str, tuple[str, dict[str, Any]]], opts: dict[str, Any]) -> None:
    """A symlink recorded as a problem (dangling, a loop) that now leads to a file: its record says so (the
    file's rows are under the target's path)."""
    link = os.path.abspath(path)
    prev = index.get(link, (None, {}))[1]
    if prev.get("status") in PROBLEMS and not prev.get("fp") and os.path.islink(link):
        try:
            target = str(path.resolve())
        except (OSError, RuntimeError):
            return
        if target != link:
            record_problem(link, "link", f"a symlink to {target}, read under that path", batch, index, opts,
                            error=False)


def record_problem(path: str, status: str, reason: str, batch: Batch,
                    index: dict[str, tuple[str, dict[str, Any]]], opts: dict[str, Any], error: bool = True
                    ) -> FileReport:
    """An input not read (see PROBLEMS): its state says why (ingest_files `status`, `reason`) and ingest_errors
    gets a row. A path read before keeps its offset and rows, so it resumes once readable; the same problem
    found again commits nothing (a second ingest stays a no-op)."""
    prev_key, prev = index.get(path, (None, None))
    report = FileReport(path, status, prev.get("format") if prev else None, message=reason, errors=1)
    if prev and prev.get("status") == status and prev.get("reason") == reason:
        report.errors = 0
        return report
    now = time.time()
    state = copy.deepcopy(prev) if prev else {
        "path": path, "format": None, "source_kind": None, "deployment": opts["deployment"],
        "label": opts["label"], "tz": opts["tz"], "year": opts["year"], "options": opts["options"], "offset": 0,
        "lines": 0, "state": {}, "rows": 0, "errors": 0, "first_ingested": now, "unsealed_files": [],
        "fp": None, "fp_len": 0, "size": None, "mtime_ns": None,
    }
    state.update(status=status, reason=reason, seq=time.time_ns(), last_ingested=now, complete=False,
                 errors=state["errors"] + error)
    err = file_error(path, None, f"{status}: {reason}")
    key = prev_key or os.urandom(8).hex()
    batch.add(key, state, {"ingest_errors": err} if error else {}, sealed=True, nbytes=0)
    index[path] = (key, state)
    return report


def _content_left(st: dict[str, Any]) -> bool:
    """True when the content recorded for a path is no longer there (renamed away by rotation): the path is
    gone or now starts differently."""
    old = Path(st["path"])
    try:
        return reader.fingerprint(reader.read_head(old, st["fp_len"])) != st["fp"] or not _same_before_offset(old, st)
    except OSError:
        return True


def _same_before_offset(path: Path, st: dict[str, Any]) -> bool:
    """Whether `path` still holds, just before the offset read to, the bytes read there (`end_fp`): a log
    rewritten behind an unchanged first 4 KiB (a launcher's constant banner) is new content, not growth.
    Compressed files are not checked (rotated archives are not rewritten; the check would decompress them)."""
    if not st.get("end_fp") or not st.get("offset"):
        return True
    try:
        got = reader.bytes_before(path, st["offset"], st["end_fp_len"])
    except OSError:
        return False
    return got is None or reader.fingerprint(got) == st["end_fp"]


def plan_file(path: Path, w: Writer, batch: Batch, index: dict[str, tuple[str, dict[str, Any]]],
               by_fp: dict[int, dict[str, str]], opts: dict[str, Any], emit: Progress
               ) -> FileReport | tuple[Plan, Account]:
    """Decide what to do with a file: a final report (unchanged, unreadable, unrecognised) or a plan to read it
    and the account that will apply its rows."""
    try:
        abspath = str(path.resolve())
    except (OSError, RuntimeError):  # made a symlink loop since discovery (3.11 raises RuntimeError)
        abspath = os.path.abspath(path)
    prev_key, prev = index.get(abspath, (None, None))
    try:
        stat = path.stat()
        if prev and prev["size"] == stat.st_size and prev["mtime_ns"] == stat.st_mtime_ns \
                and prev.get("complete") and prev.get("status") not in PROBLEMS:
            emit("advance", {"bytes": stat.st_size, "rows": 0})
            return FileReport(abspath, "unchanged", prev.get("format"))
        head = reader.read_head(path)
    except FileNotFoundError:
        return record_problem(abspath, "vanished", "deleted before it could be read", batch, index, opts)
    except OSError as exc:  # unreadable, or no longer a regular file (reader.NotRegularFile)
        return record_problem(abspath, "skipped", f"cannot read: {exc.strerror or exc}", batch, index, opts)
    fp_len = min(reader.FP_BYTES, len(head))
    resumed: tuple[str, dict[str, Any]] | None = None  # (file key, its entry) of a file read before
    if prev_key is not None and prev and prev.get("status") != "unrecognised" and prev.get("fp") and len(head) >= prev["fp_len"] \
            and reader.fingerprint(head[: prev["fp_len"]]) == prev["fp"] \
            and not (reader.compression(path) is None and stat.st_size < prev["offset"]) \
            and _same_before_offset(path, prev):
        resumed = prev_key, copy.deepcopy(prev)
    elif not prev or not prev.get("fp"):  # (a path recorded only as skipped has no content yet)
        moved = next((fps[fp] for n, fps in by_fp.items() if n <= len(head)
                      and (fp := reader.fingerprint(head[:n])) in fps), None)
        if moved and _same_before_offset(path, w.snapshot.files[moved]) and _content_left(w.snapshot.files[moved]):
            resumed = moved, copy.deepcopy(w.snapshot.files[moved])
    now = time.time()
    src: Source | None
    if resumed is not None:
        key, state = resumed
        src = formats.get(state["format"])
    else:
        try:
            src = choose_source(path, head, opts["fmt"])
        except UnicodeError:
            src = None
        key = prev_key if prev_key is not None and prev and not prev.get("fp") else os.urandom(8).hex()
        state = {
            "path": abspath, "format": src.name if src else None, "source_kind": src.kind if src else None,
            "deployment": opts["deployment"] or default_deployment(path), "label": opts["label"],
            "tz": opts["tz"], "year": opts["year"], "options": opts["options"], "offset": 0, "lines": 0,
            "state": {}, "rows": 0, "errors": 0, "first_ingested": now, "unsealed_files": [],
        }
    state.update(path=abspath, seq=time.time_ns(), fp=reader.fingerprint(head[:fp_len]), fp_len=fp_len,
                 size=stat.st_size, mtime_ns=stat.st_mtime_ns, last_ingested=now, complete=False, reason=None)
    if src is None:
        reason = "not a recognised log, trace or benchmark format: skipped (use --format to force one)"
        state.update(status="unrecognised", complete=True, reason=reason)
        err = file_error(abspath, None, reason)
        state["errors"] = 1
        batch.add(key, state, {"ingest_errors": err}, sealed=True, nbytes=0)
        return FileReport(abspath, "unrecognised", message=reason, errors=1)
    # Rows of a previous unterminated tail (or of a whole file read before) are superseded by this read.
    remove: list[str] = []
    if resumed is not None and state.get("unsealed_files"):
        gone = [w.snapshot.data[p] for p in state["unsealed_files"] if p in w.snapshot.data]
        state["rows"] -= sum(e["rows"] for e in gone if e["table"] not in META_TABLES)
        state["errors"] -= sum(e["rows"] for e in gone if e["table"] == "ingest_errors")
        state["census"] = census.plus(state.get("census"), state.get("unsealed_census"), sign=-1)
        remove = state["unsealed_files"]
        state["unsealed_files"] = []
    state["unsealed_census"] = {}
    if src.mode == "whole":
        state.update(offset=0, lines=0, state={}, rows=0, errors=0, census={})
    state["status"] = "read"
    ctx = ParseContext(abspath, state["deployment"], state["label"], state["year"], state["tz"], stat.st_mtime,
                       dict(state["options"], _forced=bool(opts["fmt"])), copy.deepcopy(state["state"]),
                       opts.get("max_ts"))
    plan = Plan(str(path), src, ctx, state["offset"], state["lines"] + 1, opts["chunk_bytes"],
                opts["max_line_bytes"], stat.st_size)
    account = Account(key, state, FileReport(abspath, "read", src.name, kind=src.kind), batch, emit,
                       src.mode == "whole", stat.st_size, remove)
    account.forced = opts["fmt"]
    return plan, account
