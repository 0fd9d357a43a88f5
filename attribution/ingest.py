"""Reading input files into the store: which files to read and from where, running their source over chunks
of lines, filling provenance, and committing rows together with the file's new offset.

Per file (`plan_file`): an unchanged file (same size and mtime) is skipped without being read; a file whose
head and whose bytes just before the last offset still match their fingerprints is read from that offset (a
grown log, or a log renamed by rotation when its old path is gone); a file where either changed (rotated,
truncated or rewritten in place, even behind a constant banner) is new content and is read from the start.
Rows and the offset they lead to are committed together, so an interrupted ingest resumes exactly where its
last commit stopped. Inputs that are not read (see PROBLEMS) are recorded with the reason.
"""

from __future__ import annotations

import copy
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from attribution import census, detect, discovery, domains, reader, sources, workers
from attribution.config import env, env_int
from attribution.errors import InputError, UsageError
from attribution.schema import META_TABLES, TABLES, conform, empty
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.store import Staged, Store, Writer, stage
from attribution.wrappers.layer import BYTE_ESCAPE, WrappedSource

WHOLE_MAX_BYTES = 2 << 30
_GENERIC_STEMS = {"vllm", "sglang", "server", "vllm_server", "sglang_server", "log", "logs", "output", "stdout",
                  "stderr", "console", "serve", "engine", "current", "latest", "access", "gateway", "litellm"}


_K8S_PATH_RE = re.compile(
    r"(?:/pods/[^/_]+_(?P<pod>[^/_]+)_[^/_]+/[^/]+/\d+\.log(?:\.\d{8}-\d{6})?(?:\.gz)?$"
    r"|/containers/(?P<pod2>[^/_]+)_[^/_]+_[^/]+-[0-9a-f]{64}\.log$)")
_DOCKER_PATH_RE = re.compile(r"/containers/([0-9a-f]{64})/\1-json\.log(?:\.\d+)?(?:\.gz)?$")


def local_tz() -> str:
    """The machine's IANA zone: $TZ, else /etc/localtime's target, else UTC."""
    tz = (env("TZ") or "").lstrip(":")
    if tz and "/" in tz or tz == "UTC":
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


def default_deployment(path: Path) -> str:
    """The deployment a file belongs to when --deployment is not given: the file name without compression,
    rotation (`.1`, `-20260507`) and type suffixes; when that name is generic (`vllm.log`, `server.log`,
    `stdout`), the name of the directory holding it (one directory per pod is the usual layout). Kubernetes
    node paths give the pod (`/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log[.<date>][.gz]`,
    `/var/log/containers/<pod>_<ns>_<container>-<id>.log`) and Docker's the container id's first 12 digits
    (`/var/lib/docker/containers/<id>/<id>-json.log[.N][.gz]`)."""
    for p in (str(path), str(path.resolve())):
        if m := _K8S_PATH_RE.search(p):
            return m.group("pod") or m.group("pod2")
        if m := _DOCKER_PATH_RE.search(p):
            return m.group(1)[:12]
    name = path.name
    name = re.sub(r"\.(gz|zst|zstd)$", "", name)
    name = re.sub(r"(\.\d+)+$", "", name)
    name = re.sub(r"\.(log|txt|jsonl|ndjson|json|csv|out|err|parquet)$", "", name)
    name = re.sub(r"[-_.]\d{8}(?:[-_T]?\d{2,6})?$", "", name)
    name = re.sub(r"\.(log|txt|jsonl|ndjson|json|out|err)$", "", name)  # `0.log.20260501-120000`
    if not name or name.lower() in _GENERIC_STEMS or name.isdigit():  # `0.log`: a restart count, not a name
        parent = path.resolve().parent.name
        return parent or name or "default"
    return name


@dataclass
class FileReport:
    path: str
    status: str  # read / unchanged / unrecognised / failed / skipped / vanished (see PROBLEMS)
    format: str | None = None
    rows: int = 0
    errors: int = 0
    bytes: int = 0
    message: str | None = None
    kind: str | None = None  # the source's kind (engine / gateway / trace / bench)
    census: dict[str, int] = field(default_factory=lambda: dict.fromkeys(census.CLASSES, 0))  # lines per class
    unknown: dict[str, int] = field(default_factory=dict)  # unrecognised shape -> lines (the largest few)

    @property
    def lines(self) -> int:
        return sum(self.census.values())

    @property
    def silent(self) -> bool:
        """Read, with lines, and neither a row nor a problem: the loss the census exists to show."""
        return self.status == "read" and self.rows == 0 and self.errors == 0 and self.lines > 0


@dataclass
class IngestSummary:
    files: list[FileReport] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    bytes: int = 0
    seconds: float = 0.0
    store: str = ""

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def problems(self) -> list[FileReport]:
        """Inputs that could not be read (in whole or from some point on): the CLI's exit code says so."""
        return [f for f in self.files if f.status in PROBLEMS]


# Statuses of an input not (fully) read: `failed` (reading it broke off), `skipped` (not a regular file, a
# dangling symlink or loop, unreadable, nested too deep), `vanished` (deleted before or while it was read).
PROBLEMS = ("failed", "skipped", "vanished")


Progress = Callable[[str, dict[str, Any]], None]


@dataclass
class ParsedFile:
    """A file read without a store (tests, previews): every table's rows and the errors."""

    source: str
    tables: dict[str, pl.DataFrame]

    @property
    def errors(self) -> pl.DataFrame:
        return self.tables["ingest_errors"]

    @property
    def census(self) -> dict[str, int]:
        """Lines (records) per class: parsed, skipped, unrecognised."""
        return census.totals(self.tables["ingest_line_shapes"])


# -- one file ------------------------------------------------------------------------------------------


def _choose_source(path: Path, head: bytes, fmt: str | None) -> Source | None:
    if fmt:
        return sources.get(fmt)
    if discovery.DOC_NAME_RE.search(path.name):  # documentation quotes log lines; --format still reads it
        return None
    mtime = path.stat().st_mtime
    found = sources.sniff(head.decode("utf-8", errors="replace"), str(path), mtime)
    if found is None and len(head) >= reader.HEAD_BYTES:  # noise first (pip output): look further in
        found = detect.sniff_past_noise(path, mtime)
    return found


def _lines_frame(chunk: reader.Chunk, errors: str = "replace") -> pl.DataFrame:
    data = chunk.data
    lines = _csv_lines(data, chunk.n_lines)
    if lines is None:
        text = data.decode("utf-8", errors=errors)
        if text.endswith("\n"):
            text = text[:-1]
        lines = pl.Series("text", [text], dtype=pl.Utf8).str.split("\n").explode()
    return pl.DataFrame(
        {"line": pl.int_range(chunk.first_line, chunk.first_line + lines.len(), eager=True, dtype=pl.Int64),
         "text": lines}
    )


def _csv_lines(data: bytes, n: int) -> pl.Series | None:
    """The lines of `data` through Polars' CSV reader (5x faster than decode + split), or None when it would
    not give them byte for byte: it drops a `\r` before `\n` or at the end and a leading BOM, splits on
    `\x01` (the separator) and refuses invalid UTF-8 (the slow path replaces it)."""
    # (`b"\r" in` is a memchr; the two-byte search alone would cost 10x more)
    if b"\x01" in data or (b"\r" in data and b"\r\n" in data) or data.endswith(b"\r") \
            or data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        df = pl.read_csv(data, has_header=False, separator="\x01", quote_char=None, encoding="utf8",
                         schema={"text": pl.Utf8})
    except pl.exceptions.PolarsError:
        return None
    if df.height != n:
        return None
    return df["text"].fill_null("")  # an empty line is read as null


def _strip_nul(frame: pl.DataFrame | None) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The lines with their NUL bytes removed (a log written through a crash or `copytruncate` has runs of
    them; a regex over the line would miss its message), and a note per line that had any."""
    if frame is None:
        return None, None
    n = pl.col("text").str.count_matches("\x00", literal=True)
    hit = frame.filter(n > 0).select("line", n.alias("n"))
    if hit.height == 0:
        return frame, None
    note = hit.select("line", pl.format("{} NUL byte(s) removed from the line", "n").alias("reason"),
                      pl.lit(None, pl.Utf8).alias("sample"))
    return frame.with_columns(pl.col("text").str.replace_all("\x00", "", literal=True)), note


def _finish(result: ParseResult, src: Source, ctx: ParseContext, extra_errors: list[dict[str, Any]],
            lines: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """Conform a parse result to the canonical tables, fill provenance columns and count the line census of
    the input `lines` (line, text) it came from; an `extra_errors` line is an input line too (one over the
    length limit, never given to the source). Without `lines` (a whole file), the source's `records` are
    counted, else the records it named in rows and errors."""
    out: dict[str, pl.DataFrame] = {}
    ts_hi = domains.ts_max(ctx.max_ts, 0.0) if ctx.max_ts is not None else domains.ts_max()
    value_errors: list[pl.DataFrame] = []  # values out of their column's domain: nulled, the rows kept
    for table, df in result.tables.items():
        if table not in TABLES or table in META_TABLES:
            raise ValueError(f"source {src.name} produced rows for unknown table {table!r}")
        if df.height == 0:
            continue
        fill = {"source": src.name, "source_kind": src.kind, "file": ctx.path, "label": ctx.label}
        cols = [pl.lit(v, pl.Utf8).alias(k) for k, v in fill.items() if k not in df.columns]
        if "deployment" in df.columns:
            cols.append(pl.col("deployment").fill_null(ctx.deployment))
        else:
            cols.append(pl.lit(ctx.deployment, pl.Utf8).alias("deployment"))
        if "request_id" in TABLES[table] and "request_key" not in df.columns and "request_id" in df.columns:
            cols.append(pl.col("request_id").alias("request_key"))
        df, bad = domains.validate(table, df.with_columns(cols), ts_hi)
        if bad.height:
            value_errors.append(bad)
        out[table] = conform(table, df)
    errs = []
    if result.errors is not None and result.errors.height:
        # By position: the part before the content (prompt, messages, token ids), else the line's shape.
        errs.append(result.errors.with_columns(census.error_sample_expr(pl.col("sample")).alias("sample")))
    errs += value_errors
    if extra_errors:
        errs.append(pl.DataFrame(extra_errors, schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}))
    if errs:
        e = pl.concat(errs).with_columns(pl.lit(ctx.path).alias("file"), pl.lit(src.name).alias("source"))
        out["ingest_errors"] = conform("ingest_errors", e)
    errors = pl.concat([e.select("line", "reason") for e in errs]) if errs else None
    shapes = census.of_result(result, src.name, lines, [e["line"] for e in extra_errors], errors)
    if shapes.height:
        shapes = shapes.with_columns(pl.lit(ctx.path).alias("file"), pl.col("source").fill_null(src.name))
        out["ingest_line_shapes"] = conform("ingest_line_shapes", shapes)
    return out


def file_error(path: str, source: str | None, reason: str) -> pl.DataFrame:
    """An `ingest_errors` row about a whole file (no line)."""
    return conform("ingest_errors", pl.DataFrame(
        {"file": [path], "line": [None], "source": [source], "reason": [reason], "sample": [None]},
        schema_overrides={"line": pl.Int64, "source": pl.Utf8, "sample": pl.Utf8}))


_NO_LINES = pl.DataFrame(schema={"line": pl.Int64, "text": pl.Utf8})


def parse_units(
    path: Path, src: Source, ctx: ParseContext, start: int = 0, first_line: int = 1,
    chunk_bytes: int = reader.DEFAULT_CHUNK_BYTES, max_line_bytes: int = reader.DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[reader.Chunk | None, dict[str, Any], dict[str, pl.DataFrame]]]:
    """Parse a file from an offset, yielding (chunk, parser state before the chunk, rows) per chunk.

    `ctx.state` is advanced in place; the state *before* a chunk is what a resumed read must start from
    when that chunk turns out to be an unterminated tail that will be read again. A wrapped file ends with a
    flush (pending partial records, identities whose format was not decided yet) yielded as an empty tail
    chunk: its rows are superseded when the file grows, and the state kept is the one before it.
    """
    wrapped = isinstance(src, WrappedSource)
    if wrapped:
        ctx.options.setdefault("_max_line_bytes", max_line_bytes)
    if wrapped:
        streamed = src.wrapper.mode == "document"
    else:
        streamed = src.mode == "whole" and hasattr(src, "parse_document")
    if streamed:  # in batches: a document wrapper's file, a JSON document, a CSV export
        yield from _parse_document(path, src, ctx)
        return
    if src.mode == "whole":
        pieces = reader.Pieces(path)
        buf = bytearray()
        for piece in pieces:
            buf += piece
            if len(buf) > WHOLE_MAX_BYTES:
                raise InputError(f"{path}: larger than {WHOLE_MAX_BYTES >> 20} MiB; {src.name} reads whole files")
        extra = [{"line": None, "reason": pieces.truncated, "sample": None}] if pieces.truncated else []
        before = copy.deepcopy(ctx.state)
        result = src.parse_whole(bytes(buf), ctx)
        yield None, before, _finish(result, src, ctx, extra)
        return
    pieces = reader.Pieces(path, start)
    last_line, end, tail_before = first_line, start, None
    # A sniffed plain line format hands the lines it cannot read to the file's other formats; a forced one
    # reads every line itself (and says so when it reads none: forced_mismatch).
    mixing = not wrapped and not ctx.options.get("_forced")
    for chunk in reader.chunks(path, start, first_line, chunk_bytes, max_line_bytes, pieces=pieces):
        before = copy.deepcopy(ctx.state)
        extra = [
            {"line": ln, "reason": f"line of {size:,} bytes is longer than the {max_line_bytes:,}-byte limit: skipped",
             "sample": None}
            for ln, size in chunk.long_lines
        ]
        frame = _lines_frame(chunk, BYTE_ESCAPE if wrapped else "replace") if chunk.n_lines else None
        frame, nul = _strip_nul(frame) if b"\x00" in chunk.data else (frame, None)
        if frame is None:
            parts = [(src, ParseResult(), _NO_LINES)]
        elif mixing:
            parts = detect.parse_mixed(src, frame, ctx)
        else:
            parts = [(src, src.parse(frame, ctx), frame)]
        if nul is not None:
            parts[0][1].add_errors(nul)
        last_line, end = chunk.first_line + chunk.n_lines, chunk.end
        if chunk.tail:
            tail_before = before
        rows = _finish(parts[0][1], src, ctx, extra, parts[0][2])
        for other, res, lines in parts[1:]:  # lines of other formats in the same file
            for t, df in _finish(res, other, ctx, [], lines).items():
                rows[t] = pl.concat([rows[t], df]) if t in rows else df
        yield chunk, before, rows
    if pieces.truncated:
        err = [{"line": last_line, "reason": pieces.truncated, "sample": None}]
        yield None, copy.deepcopy(ctx.state), _finish(ParseResult(), src, ctx, err)
    if wrapped:
        before = tail_before if tail_before is not None else copy.deepcopy(ctx.state)
        rows = _finish(src.finish(ctx), src, ctx, [])
        if rows:
            yield reader.Chunk(b"", last_line, 0, end, end, tail=True), before, rows


def _parse_document(path: Path, src: Source, ctx: ParseContext
                    ) -> Iterator[tuple[reader.Chunk | None, dict[str, Any], dict[str, pl.DataFrame]]]:
    """A document wrapper's file or a whole-file source's with `parse_document`, batch by batch (memory
    bounded by a batch). Like a whole-file source's, the file is read again from the start when it changes;
    only the last unit carries its bytes."""
    pieces = reader.Pieces(path)
    held = None
    for result in src.parse_document(pieces, ctx):
        if held is not None:
            yield reader.Chunk(b"", 0, 0, 0, 0), {}, held
        held = _finish(result, src, ctx, [])
    rows = dict(held or {})
    if pieces.truncated:
        err = _finish(ParseResult(), src, ctx, [{"line": None, "reason": pieces.truncated, "sample": None}])
        rows["ingest_errors"] = pl.concat([rows[t] for t in ("ingest_errors",) if t in rows] + [err["ingest_errors"]])
    yield None, {}, rows


def parse_path(
    path: str | os.PathLike[str], fmt: str | None = None, *, deployment: str | None = None,
    label: str | None = None, year: int | None = None, tz: str = "UTC", options: dict[str, Any] | None = None,
    chunk_bytes: int | None = None,
) -> ParsedFile:
    """Read one file through the ingest's own path (sniff, decompress, chunk, parse, conform), no store."""
    p = Path(path)
    src = _choose_source(p, reader.read_head(p), fmt)
    if src is None:
        from attribution import wrappers

        known = ", ".join(sorted([*sources.registry(), *wrappers.registry()]))
        raise InputError(f"{p}: not a recognised format (use --format; known: {known})")
    ctx = ParseContext(str(p), deployment or default_deployment(p), label, year, tz, p.stat().st_mtime,
                       dict(options or {}, _forced=bool(fmt)), {})
    parts: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLES}
    for _chunk, _before, rows in parse_units(p, src, ctx, chunk_bytes=chunk_bytes or reader.DEFAULT_CHUNK_BYTES):
        for t, df in rows.items():
            parts[t].append(df)
    tables = {t: pl.concat(dfs) if dfs else empty(t) for t, dfs in parts.items()}
    tables["ingest_line_shapes"] = census.per_file(tables["ingest_line_shapes"])  # one row per shape, as stored
    rows = sum(df.height for t, df in tables.items() if t not in META_TABLES)
    if reason := detect.forced_mismatch(fmt, rows, census.totals(tables["ingest_line_shapes"])):
        tables["ingest_errors"] = pl.concat([tables["ingest_errors"], file_error(str(p), src.name, reason)])
    return ParsedFile(src.name, tables)


# -- into the store ------------------------------------------------------------------------------------

COMPACT_MIN_FILES = 16
PARALLEL_MIN_BYTES = 32 << 20  # below this, starting worker processes costs more than it saves
STAGE_MIN_BYTES = 4 << 20  # a worker writes the rows of a chunk at least this large to Parquet itself
BATCH_MAX_FILES = 256


class _Batch:
    """Rows of several units (chunks or whole files) committed together with the file states they lead to."""

    def __init__(self, writer: Writer, limit_bytes: int, summary: IngestSummary):
        self.w, self.limit, self.summary = writer, limit_bytes, summary
        self._reset()

    def _reset(self) -> None:
        self.sealed: dict[str, list[pl.DataFrame]] = {}
        self.unsealed: dict[str, dict[str, list[pl.DataFrame]]] = {}  # file key -> table -> frames
        self.staged: list[tuple[str, Staged, bool]] = []  # (file key, file a worker wrote, sealed)
        self.states: dict[str, dict[str, Any]] = {}
        self.remove: list[str] = []
        self.bytes = 0
        self.held = 0  # estimated bytes of the row frames held

    def add(self, key: str, state: dict[str, Any], rows: dict[str, pl.DataFrame], *, sealed: bool,
            nbytes: int, remove: list[str] = ()) -> None:
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
        if self.bytes >= self.limit or self.held >= self.limit or len(self.states) >= BATCH_MAX_FILES:
            self.flush()

    def flush(self) -> None:
        if not self.states and not self.remove:
            return
        add = []
        for table, dfs in self.sealed.items():
            add.append(self.w.write(table, pl.concat(dfs), file_key=None, sealed=True))
        unsealed: dict[str, list[dict[str, Any]]] = {}
        for key, tables in self.unsealed.items():
            unsealed[key] = [self.w.write(t, pl.concat(dfs), file_key=key, sealed=False) for t, dfs in tables.items()]
        for key, staged, sealed in self.staged:
            entry = self.w.adopt(staged, file_key=None if sealed else key, sealed=sealed)
            if sealed:
                add.append(entry)
            else:
                unsealed.setdefault(key, []).append(entry)
        for key, entries in unsealed.items():
            self.states[key]["unsealed_files"] = self.states[key].get("unsealed_files", []) + [
                e["path"] for e in entries
            ]
            add += entries
        self.w.commit(add, self.remove, self.states)
        self._reset()


def _compact(w: Writer) -> None:
    """Merge many small sealed data files of a table into one (unsealed ones may still be superseded)."""
    for table in TABLES:
        small = [p for p, e in w.snapshot.data.items() if e["table"] == table and e["sealed"]
                 and (w.root / p).stat().st_size < (256 << 20)]
        if len(small) < COMPACT_MIN_FILES:
            continue
        merged = pl.scan_parquet([w.root / p for p in sorted(small)])
        entry = w.write(table, merged, file_key=None, sealed=True)
        w.commit([entry], sorted(small), {})


def ingest(
    paths: list[str], store: str | os.PathLike[str], *, fmt: str | None = None, deployment: str | None = None,
    label: str | None = None, year: int | None = None, tz: str | None = None,
    options: dict[str, Any] | None = None, chunk_bytes: int | None = None, max_line_bytes: int | None = None,
    progress: Progress | None = None, jobs: int | None = None, max_future: float | None = None,
) -> IngestSummary:
    """Ingest files, directories and globs into the store at `store` (created if needed).

    With several files to read (at least PARALLEL_MIN_BYTES in all), they are parsed in `jobs` worker
    processes (default: `$ATTRIBUTION_JOBS`, else one per CPU; 1 reads in this process); the rows, offsets and
    commits are the same as a sequential read's, only the order of files in the commits differs.
    A timestamp later than `max_future` seconds after now (default: the `max_future` setting, 1 day) is out
    of its domain (attribution.domains)."""
    t0 = time.time()
    if max_future is None:
        from attribution.config import load_settings, span_seconds

        max_future = span_seconds(load_settings().max_future)
    if fmt:
        sources.get(fmt)
    tz = tz or local_tz()
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(tz)
    except (KeyError, ValueError) as exc:
        raise UsageError(f"--tz {tz!r}: not a known time zone (use an IANA name such as Europe/Berlin)") from exc
    chunk_bytes = chunk_bytes or env_int("ATTRIBUTION_CHUNK_BYTES", reader.DEFAULT_CHUNK_BYTES)
    max_line_bytes = max_line_bytes or reader.DEFAULT_MAX_LINE_BYTES
    files, skipped = discovery.discover_inputs(paths)
    jobs = jobs or workers.default_jobs()
    # Likely parallel: start the workers now, they import while the files are planned.
    early = jobs > 1 and len(files) > 1 and sum(_size(f) for f in files) >= PARALLEL_MIN_BYTES
    with workers.Pool(min(jobs, len(files)) if early else 0) as pool:
        return _ingest(files, skipped, store, pool, jobs, t0, fmt=fmt, deployment=deployment, label=label,
                       year=year, tz=tz, options=options, chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes,
                       progress=progress, max_ts=t0 + max_future)


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:  # gone since discovery: planning records it
        return 0


def _ingest(files: list[Path], skipped: list[discovery.Skipped], store: str | os.PathLike[str],
            pool: workers.Pool, jobs: int, t0: float, *,
            fmt: str | None, deployment: str | None, label: str | None, year: int | None, tz: str,
            options: dict[str, Any] | None, chunk_bytes: int, max_line_bytes: int, progress: Progress | None,
            max_ts: float | None = None) -> IngestSummary:
    st = Store.open(store, create=True)
    summary = IngestSummary(store=str(st.root))
    emit = progress or (lambda _e, _d: None)
    emit("start", {"files": len(files) + len(skipped), "bytes": sum(_size(f) for f in files)})
    with st.writer() as w:
        index = w.snapshot.path_index()
        by_fp: dict[int, dict[str, str]] = {}  # fingerprint length -> fingerprint -> file key
        for k, s in w.snapshot.files.items():
            if s.get("fp"):
                by_fp.setdefault(s["fp_len"], {})[s["fp"]] = k
        batch = _Batch(w, chunk_bytes, summary)
        opts = dict(fmt=fmt, deployment=deployment, label=label, year=year, tz=tz, options=options or {},
                    chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes, max_ts=max_ts)
        plans: list[Plan] = []
        accounts: list[_Account] = []
        for sk in skipped:
            summary.files.append(_record_problem(sk.path, sk.status, sk.reason, batch, index, opts))
            emit("file_done", {"path": sk.path, "status": sk.status})
        for path in files:
            _relink(path, batch, index, opts)
            planned = _plan_file(path, w, batch, index, by_fp, opts, emit)
            if isinstance(planned, FileReport):
                summary.files.append(planned)
                emit("file_done", {"path": planned.path, "status": planned.status})
            else:
                plans.append(planned[0])
                accounts.append(planned[1])
                summary.files.append(planned[1].report)
        jobs = min(jobs, len(plans))
        if jobs > 1 and sum(p.to_read for p in plans) >= PARALLEL_MIN_BYTES:
            for p in plans:
                p.stage_root, p.stage_min = str(st.root), min(STAGE_MIN_BYTES, chunk_bytes // 2)
            workers.run(plans, jobs, lambda i, msg: accounts[i].handle(msg), weight=lambda p: p.to_read, pool=pool)
        else:
            for plan, account in zip(plans, accounts, strict=True):
                for msg in parse_plan(plan):
                    account.handle(msg)
        summary.errors = sum(f.errors for f in summary.files)
        summary.bytes = sum(f.bytes for f in summary.files)
        batch.flush()
        _compact(w)
    summary.seconds = time.time() - t0
    return summary


def _relink(path: Path, batch: _Batch, index: dict[str, tuple[str, dict[str, Any]]], opts: dict[str, Any]) -> None:
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
            _record_problem(link, "link", f"a symlink to {target}, read under that path", batch, index, opts,
                            error=False)


def _record_problem(path: str, status: str, reason: str, batch: _Batch,
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


@dataclass
class Plan:
    """A file to read and where to start: all a worker process needs to parse it (picklable)."""

    path: str
    source: Source  # pickled by reference to its class: a worker imports the same module
    ctx: ParseContext
    offset: int
    first_line: int
    chunk_bytes: int
    max_line_bytes: int
    size: int  # bytes on disk, for scheduling the largest files first
    stage_root: str | None = None  # a worker writes the rows of large chunks into this store's staging area
    stage_min: int = 0  # ... those of at least this many bytes


    @property
    def to_read(self) -> int:
        return max(self.size - self.offset, 0) if self.offset <= self.size else self.size


@dataclass
class Unit:
    """What the store needs to know of a parsed chunk (its bytes stay in the process that read them)."""

    end: int
    last_line: int
    tail: bool
    nbytes: int
    end_fp: str | None = None  # fingerprint of the chunk's last bytes (up to FP_BYTES) just before `end`
    end_fp_len: int = 0


def parse_plan(plan: Plan) -> Iterator[tuple[Any, ...]]:
    """Parse a planned file: ("unit", Unit | None, state before, state after, rows) per chunk (None: a whole-file
    read or a truncation notice), then ("done",), or ("failed", message) when the file cannot be read on."""
    src, ctx = plan.source, plan.ctx
    try:
        for chunk, before, rows in parse_units(Path(plan.path), src, ctx, plan.offset, plan.first_line,
                                               plan.chunk_bytes, plan.max_line_bytes):
            unit = None if chunk is None else Unit(chunk.end, chunk.first_line + chunk.n_lines - 1, chunk.tail,
                                                   len(chunk.data))
            if unit is not None and chunk.data and not chunk.tail:
                last = chunk.data[-reader.FP_BYTES:]
                unit.end_fp, unit.end_fp_len = reader.fingerprint(last), len(last)
            if plan.stage_root and unit is not None and unit.nbytes >= plan.stage_min:
                # Written here rather than pickled to the ingest process, which would then write them itself.
                # (the census stays a frame: the account counts its lines; it is a few rows per chunk)
                rows = {t: df if t == "ingest_line_shapes" else stage(plan.stage_root, t, df)
                        for t, df in rows.items()}
            yield "unit", unit, before, copy.deepcopy(ctx.state), rows
    except InputError as exc:
        yield "failed", str(exc)
        return
    except FileNotFoundError as exc:  # deleted (and its directory too) while being read
        yield "failed", f"deleted while it was read: {exc.strerror or exc}", "vanished"
        return
    except (PermissionError, reader.NotRegularFile) as exc:
        yield "failed", f"cannot read: {exc.strerror or exc}", "skipped"
        return
    except OSError as exc:  # an I/O error part way: what was read before it stays
        yield "failed", f"cannot read on: {exc.strerror or exc}"
        return
    except Exception as exc:  # a parser bug must not lose the other files; it is reported, not hidden
        yield "failed", f"internal error in the {src.name} parser: {type(exc).__name__}: {exc}"
        return
    yield ("done",)


UNKNOWN_KEPT = 20  # unrecognised shapes per file the ingest summary keeps


class _Account:
    """The store's side of one file being read: applies its messages, in order, to the batch."""

    def __init__(self, key: str, state: dict[str, Any], report: FileReport, batch: _Batch, emit: Progress,
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
        if not sealed:  # superseded with these rows when the file is read again (see _plan_file)
            new["unsealed_census"] = census.plus(self.state.get("unsealed_census"), counts)
        self._add(new, rows, sealed=sealed, nbytes=nbytes)
        self.report.rows += n_rows
        self.report.errors += n_err
        self.report.census = census.plus(self.report.census, counts)
        if counts.get("unrecognised"):
            self._unknown(shapes)
        self.report.bytes += nbytes
        self.emit("advance", {"bytes": nbytes, "rows": n_rows})


def _plan_file(path: Path, w: Writer, batch: _Batch, index: dict[str, tuple[str, dict[str, Any]]],
               by_fp: dict[int, dict[str, str]], opts: dict[str, Any], emit: Progress
               ) -> FileReport | tuple[Plan, _Account]:
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
        return _record_problem(abspath, "vanished", "deleted before it could be read", batch, index, opts)
    except OSError as exc:  # unreadable, or no longer a regular file (reader.NotRegularFile)
        return _record_problem(abspath, "skipped", f"cannot read: {exc.strerror or exc}", batch, index, opts)
    fp_len = min(reader.FP_BYTES, len(head))
    key, state, resume = None, None, False
    if prev and prev.get("status") != "unrecognised" and prev.get("fp") and len(head) >= prev["fp_len"] \
            and reader.fingerprint(head[: prev["fp_len"]]) == prev["fp"] \
            and not (reader.compression(path) is None and stat.st_size < prev["offset"]) \
            and _same_before_offset(path, prev):
        key, state, resume = prev_key, copy.deepcopy(prev), True
    elif not prev or not prev.get("fp"):  # (a path recorded only as skipped has no content yet)
        moved = next((fps[fp] for n, fps in by_fp.items() if n <= len(head)
                      and (fp := reader.fingerprint(head[:n])) in fps), None)
        if moved and _same_before_offset(path, w.snapshot.files[moved]) and _content_left(w.snapshot.files[moved]):
            key, state, resume = moved, copy.deepcopy(w.snapshot.files[moved]), True
    now = time.time()
    if resume:
        src = sources.get(state["format"])
    else:
        try:
            src = _choose_source(path, head, opts["fmt"])
        except UnicodeError:
            src = None
        key = prev_key if prev and not prev.get("fp") else os.urandom(8).hex()
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
    if resume and state.get("unsealed_files"):
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
    account = _Account(key, state, FileReport(abspath, "read", src.name, kind=src.kind), batch, emit,
                       src.mode == "whole", stat.st_size, remove)
    account.forced = opts["fmt"]
    return plan, account
