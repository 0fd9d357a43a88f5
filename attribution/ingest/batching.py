"""The store's side of an ingest: per file, an Account applies its parsed units in order (offsets, parser state,
counts, sealed or superseded rows); a Batch commits the rows of many units together with the file states
they lead to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from attribution import census, detect
from attribution.ingest.parsing import file_error
from attribution.ingest.summary import FileReport, IngestSummary, Progress
from attribution.ingest.units import Unit
from attribution.schema import META_TABLES
from attribution.store import Staged, Writer

BATCH_MAX_FILES = 256


class Batch:
    """Rows of several units (chunks or whole files) committed together with the file states they lead to."""

    def __init__(self, writer: Writer, limit_bytes: int, summary: IngestSummary):
        self.w, self.summary = writer, summary
        self.limit: float = limit_bytes
        self.max_files: float = BATCH_MAX_FILES
        self._reset()

    def _reset(self) -> None:
        self.sealed: dict[str, list[pl.DataFrame]] = {}
        self.unsealed: dict[str, dict[str, list[pl.DataFrame]]] = {}  # file key -> table -> frames
        self.staged: list[tuple[str, Staged, bool]] = []  # (file key, file a worker wrote, sealed)
        self.states: dict[str, dict[str, Any]] = {}
        self.remove: list[str] = []
        self.bytes = 0
        self.held = 0.0  # estimated bytes of the row frames held

    def add(self, key: str, state: dict[str, Any], rows: dict[str, pl.DataFrame], *, sealed: bool,
            nbytes: int, remove: Sequence[str] = ()) -> None:
        self.remove += remove
        for table, df in rows.items():
            if isinstance(df, Staged):
                self.staged.append((key, df, sealed))
            elif sealed:
                self.sealed.setdefault(table, []).append(df)
            else:
                self.unsealed.setdefault(key, {}).setdefault(table, []).append(df)
            self.summary.rows[table] = self.summary.rows.get(table, 0) + df.height
            if isinstance(df, pl.DataFrame):
                self.held += df.estimated_size()
        self.states[key] = state
        self.bytes += nbytes
        # (rows count too: a streamed document's batches carry no input bytes until its last one)
        if self.bytes >= self.limit or self.held >= self.limit or len(self.states) >= self.max_files:
            self.flush()

    def flush(self) -> None:
        if not self.states and not self.remove:
            return
        add = []
        for table, dfs in self.sealed.items():
            add += self.w.write(table, pl.concat(dfs), file_key=None, sealed=True)
        unsealed: dict[str, list[dict[str, Any]]] = {}
        for key, tables in self.unsealed.items():
            unsealed[key] = [e for t, dfs in tables.items()
                             for e in self.w.write(t, pl.concat(dfs), file_key=key, sealed=False)]
        for key, staged, sealed in self.staged:
            entries = self.w.adopt(staged, file_key=None if sealed else key, sealed=sealed)
            if sealed:
                add += entries
            else:
                unsealed.setdefault(key, []).extend(entries)
        for key, entries in unsealed.items():
            self.states[key]["unsealed_files"] = self.states[key].get("unsealed_files", []) + [
                e["path"] for e in entries
            ]
            add += entries
        self.w.commit(add, self.remove, self.states)
        self._reset()


UNKNOWN_KEPT = 20  # unrecognised shapes per file the ingest summary keeps


class Account:
    """The store's side of one file being read: applies its messages, in order, to the batch."""

    def __init__(self, key: str, state: dict[str, Any], report: FileReport, batch: Batch, emit: Progress,
                 whole: bool, size: int, remove: list[str]):
        self.key, self.state, self.report, self.batch, self.emit = key, state, report, batch, emit
        self.whole, self.size, self.remove = whole, size, remove
        self.forced: str | None = None  # the --format the file is read with, if one was given

    def _add(self, state: dict[str, Any], rows: dict[str, pl.DataFrame], *, sealed: bool, nbytes: int) -> None:
        # Superseded rows leave in the same commit as this file's first new state.
        self.batch.add(self.key, state, rows, sealed=sealed, nbytes=nbytes, remove=self.remove)
        self.remove = []
        self.state = state

    def _unknown(self, shapes: pl.DataFrame) -> None:
        """Keep the largest unrecognised shapes for the ingest's closing warning."""
        seen = self.report.unknown
        for shape, n in shapes.filter(pl.col("class") == "unrecognised").select("shape", "lines").iter_rows():
            seen[shape] = seen.get(shape, 0) + n
        if len(seen) > 4 * UNKNOWN_KEPT:
            self.report.unknown = dict(sorted(seen.items(), key=lambda kv: -kv[1])[:UNKNOWN_KEPT])

    def handle(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "unit":
            self._unit(*msg[1:])
        elif msg[0] == "done":
            # Only a file read to its end may later be skipped as unchanged (a killed run stops short of this).
            reason = detect.forced_mismatch(self.forced, self.state["rows"], self.state.get("census"))
            if reason:  # unsealed: a later read of the grown file decides again
                err = file_error(self.report.path, self.report.format, reason)
                self._add(dict(self.state, complete=True, errors=self.state["errors"] + 1), {"ingest_errors": err},
                          sealed=False, nbytes=0)
                self.report.errors += 1
                self.report.message = reason
            else:
                self._add(dict(self.state, complete=True), {}, sealed=True, nbytes=0)
            self.emit("file_done", {"path": self.report.path, "status": self.report.status})
        else:
            status = msg[2] if len(msg) > 2 else "failed"
            self.report.status, self.report.message = status, msg[1]
            err = file_error(self.report.path, self.report.format, msg[1])
            failed = dict(self.state, status=status, reason=msg[1], errors=self.state["errors"] + 1)
            # Unsealed: the next read of the file (it is read again, from its offset) supersedes the notice.
            self._add(failed, {"ingest_errors": err}, sealed=False, nbytes=0)
            self.report.errors += 1
            self.emit("file_done", {"path": self.report.path, "status": self.report.status})

    def _unit(self, unit: Unit | None, before: dict[str, Any], after: dict[str, Any],
              rows: dict[str, pl.DataFrame]) -> None:
        n_rows = sum(df.height for t, df in rows.items() if t not in META_TABLES)
        n_err = rows["ingest_errors"].height if "ingest_errors" in rows else 0
        shapes = rows.get("ingest_line_shapes")
        counts = census.totals(shapes) if shapes is not None else {}
        new = dict(self.state)
        new["rows"] = self.state["rows"] + n_rows
        new["errors"] = self.state["errors"] + n_err
        new["census"] = census.plus(self.state.get("census"), counts)
        nbytes = 0
        if self.whole:
            nbytes = self.size if unit is None else unit.nbytes  # a document's batches: its bytes come last
            new.update(state=after)
            sealed = False
        elif unit is None:  # truncation notice only
            sealed = True
        elif unit.tail:
            # The last line had no newline: keep the offset before it and the parser state before it, so a
            # later read that finds the line completed reads it again and supersedes these rows.
            nbytes = unit.nbytes
            new.update(state=before)
            sealed = False
        else:
            nbytes = unit.nbytes
            # (no end fingerprint when the bytes before the offset were not in the chunk: a skipped long line)
            new.update(offset=unit.end, lines=unit.last_line, state=after, end_fp=unit.end_fp,
                       end_fp_len=unit.end_fp_len)
            sealed = True
        if not sealed:  # superseded with these rows when the file is read again (see plan_file)
            new["unsealed_census"] = census.plus(self.state.get("unsealed_census"), counts)
        self._add(new, rows, sealed=sealed, nbytes=nbytes)
        self.report.rows += n_rows
        self.report.errors += n_err
        self.report.census = census.plus(self.report.census, counts)
        if shapes is not None and counts.get("unrecognised"):
            self._unknown(shapes)
        self.report.bytes += nbytes
        self.emit("advance", {"bytes": nbytes, "rows": n_rows})
