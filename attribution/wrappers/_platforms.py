"""Helpers shared by the log-platform wrappers: JSON lines decoded with a declared dtype (a bad line is one
bad record, not a failed chunk), times without a year or zone, byte-array fields, splitting the lines of a
document wrapper's message, and line-per-record files read as a stream of chunks."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import ijson
import numpy as np
import polars as pl

from attribution.wrappers.base import TS, records_frame

if TYPE_CHECKING:
    from attribution.schema import PolarsType

MONTHS = {m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())}
CHUNK_LINES = 50_000


LEAF = 256  # below this many values a failing slice is handled value by value in Python


def bisect_apply(
    s: pl.Series, fn: Callable[[pl.Series], pl.Series], one: Callable[[object], object]
) -> tuple[pl.Series, pl.Series]:
    """`fn(s)`, vectorised; when it raises, halves are retried, and a failing slice of at most LEAF values
    goes through `one` value by value (returning the converted value, or raising ValueError: null, not ok).
    Returns (result, ok mask). The cost grows with the bad values only: a chunk that is all bad (a layout
    forced on the wrong file) costs a few hundred vectorised attempts and one Python pass."""
    try:
        return fn(s), pl.repeat(True, s.len(), dtype=pl.Boolean, eager=True)
    except (pl.exceptions.PolarsError, ValueError):
        pass
    if s.len() <= LEAF:
        out, ok = [], []
        for v in s.to_list():
            try:
                out.append(one(v))
                ok.append(True)
            except ValueError:
                out.append(None)
                ok.append(False)
        return _series(out, s, fn), pl.Series(ok, dtype=pl.Boolean)
    half = s.len() // 2
    a, oka = bisect_apply(s.slice(0, half), fn, one)
    b, okb = bisect_apply(s.slice(half), fn, one)
    return pl.concat([a, b]), pl.concat([oka, okb])


def _series(values: list, like: pl.Series, fn: Callable[[pl.Series], pl.Series]) -> pl.Series:
    """Python values already converted by `one` -> a series of `fn`'s output dtype."""
    dtype = fn(pl.Series([None], dtype=like.dtype)).dtype
    return pl.Series(values, dtype=dtype)


def _conform(value: object, dtype: PolarsType) -> object:
    """A parsed JSON value shaped to `dtype` the way Polars decodes it; a field that does not fit is null."""
    if isinstance(dtype, pl.Struct):
        if not isinstance(value, dict):
            return None
        return {f.name: _conform(value.get(f.name), f.dtype) for f in dtype.fields}
    if isinstance(dtype, pl.List):
        if not isinstance(value, list):
            return None
        return [_conform(v, dtype.inner) for v in value]
    if dtype == pl.Utf8:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if isinstance(value, (str, int, float)) else None
    if dtype.is_integer():
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def json_lines(text: pl.Series, dtype: PolarsType) -> tuple[pl.Series, pl.Series]:
    """JSON objects, one per value, decoded to the struct `dtype`. Values that are not a JSON object come
    back null with ok false; a field whose value does not fit `dtype` is null."""
    obj = text.str.strip_chars().str.starts_with("{") & text.str.strip_chars().str.ends_with("}")
    cand = pl.select(pl.when(obj).then(text).otherwise(pl.lit(None, pl.Utf8)).alias("t")).to_series()

    def one(v: object) -> object:
        if v is None:
            return None
        if not isinstance(v, str):
            raise ValueError("not JSON")
        try:
            parsed = json.loads(v)
        except json.JSONDecodeError:
            raise ValueError("not JSON") from None
        if not isinstance(parsed, dict):
            raise ValueError("not an object")
        return _conform(parsed, dtype)

    dec, ok = bisect_apply(cand, lambda s: s.str.json_decode(dtype), one)
    return dec, ok & obj.fill_null(False)


def utf8_from_bytes(values: pl.Series) -> pl.Series:
    """List of byte values (journald's encoding of a field with control characters) -> text; invalid UTF-8
    (rare: a split multi-byte character) is decoded with replacement characters rather than dropped."""
    return binary_text(values.cast(pl.List(pl.UInt8), strict=False).cast(pl.Binary))


def binary_text(binary: pl.Series) -> pl.Series:
    """Bytes -> text, vectorised; the values that are not valid UTF-8 get replacement characters."""
    out, _ = bisect_apply(
        binary, lambda s: s.cast(pl.Utf8), lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else None
    )
    return out


def extract_groups_unique(s: pl.Series, pattern: str) -> pl.Series:
    """`s.str.extract_groups(pattern)` computed once per distinct value: paths, tags and label sets repeat
    on every record of a stream, and a regex with backtracking is the costly part of a chunk."""
    keys = pl.DataFrame({"k": s.unique().drop_nulls()})
    found = keys.with_columns(g=pl.col("k").str.extract_groups(pattern))
    out = pl.DataFrame({"k": s}).join(found, on="k", how="left", maintain_order="left")["g"]
    return out if out.dtype != pl.Null else s.str.extract_groups(pattern)


def iso_ts(expr: pl.Expr) -> pl.Expr:
    """RFC 3339 / ISO 8601 text with a zone (`Z`, `+02:00`, `+0200`), 0-9 fraction digits -> UTC."""
    return expr.str.to_datetime(time_unit="us", time_zone="UTC", strict=False).cast(TS)


def epoch_ts(expr: pl.Expr, unit: str) -> pl.Expr:
    """Epoch integers (or their decimal text) in `unit` ("ns", "us", "ms") -> UTC."""
    v = expr.cast(pl.Int64, strict=False)
    if unit == "ns":
        v = v // 1000
    elif unit == "ms":
        v = v * 1000
    return pl.from_epoch(v, time_unit="us").dt.replace_time_zone("UTC").cast(TS)


def guess_year(state: dict, first_month: int | None) -> int:
    """The year of a time printed without one (journald `short`, syslog 3164): `state["year"]` (the layer's
    --year), else the year of the file's mtime in `state["tz"]`, minus one when the first month seen is later
    than the mtime's month (a file written in January that starts in December), else the current year."""
    if state.get("year"):
        return int(state["year"])
    tz = ZoneInfo(state.get("tz") or "UTC")
    mtime = state.get("file_mtime")
    mt = datetime.fromtimestamp(mtime, tz) if mtime is not None else datetime.now(tz)
    return mt.year - (1 if first_month is not None and first_month > mt.month else 0)


def short_ts(month: pl.Series, rest: pl.Series, state: dict, key: str) -> pl.Series:
    """`Mmm`, `dd HH:MM:SS[.ffffff]` in the zone `state["tz"]`, no year -> UTC. The running year and last
    month live in `state[key]` so chunks agree; a month falling by six or more is a December -> January
    rollover."""
    m = month.replace_strict(MONTHS, default=None, return_dtype=pl.Int32)
    mem = state.setdefault(key, {})
    known = m.drop_nulls()
    if "year" not in mem:
        mem["year"] = guess_year(state, int(known[0]) if known.len() else None)
        mem["last"] = None
    filled = m.fill_null(strategy="forward")
    prev = filled.shift(1)
    if prev.len() and mem["last"] is not None:
        prev = prev.scatter(0, mem["last"])
    prev = prev.fill_null(strategy="forward")
    years = ((prev - filled) >= 6).fill_null(False).cast(pl.Int32).cum_sum() + mem["year"]
    if known.len():
        mem["year"] = int(years[-1])
        mem["last"] = int(filled.drop_nulls()[-1])
    text = pl.format("{}-{}-{}", years, m, rest.str.strip_chars())
    naive = pl.select(text.str.to_datetime("%Y-%-m-%d %H:%M:%S%.f", time_unit="us", strict=False)).to_series()
    tz = state.get("tz") or "UTC"
    out = naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone(
        "UTC"
    )
    return out.cast(TS)


def split_message_lines(df: pl.DataFrame) -> pl.DataFrame:
    """Records whose `text` holds several lines (a multi-line CloudWatch or Cloud Logging event) -> one
    record per line, as the plain log had them (same `line` ordinal, same time and identity). One trailing
    newline is the line's end, not an empty line."""
    text = pl.col("text").str.strip_suffix("\n")
    return df.with_columns(text.str.split("\n")).explode("text")


def iter_line_chunks(pieces: Iterable[bytes], chunk_lines: int = CHUNK_LINES) -> Iterator[pl.DataFrame]:
    """The bytes of a line-per-record file, piece by piece -> frames (`line`, `text`) of whole lines."""
    rest = b""
    line_no = 0
    buf: list[bytes] = []
    for piece in pieces:
        data = rest + piece
        lines = data.split(b"\n")
        rest = lines.pop()
        buf.extend(lines)
        if len(buf) >= chunk_lines:
            yield _frame(buf, line_no)
            line_no += len(buf)
            buf = []
    if rest:
        buf.append(rest)
    if buf:
        yield _frame(buf, line_no)


def _frame(buf: list[bytes], first: int) -> pl.DataFrame:
    text = pl.Series("text", buf, dtype=pl.Binary)
    text = binary_text(text)
    return pl.DataFrame({"line": pl.int_range(first + 1, first + len(buf) + 1, eager=True), "text": text})


def head_lines(head: str, n: int = 20) -> list[str]:
    """The first `n` non-empty lines of a sniffed head (the last may be cut off: drop it if so)."""
    out: list[str] = []
    start = 0
    while len(out) < n:  # (line by line: a 64 KB head has hundreds of lines, a sniff looks at 20)
        end = head.find("\n", start)
        if end < 0:
            if start:  # text after the last newline: cut off
                break
            end = len(head)  # no newline at all: the one line
        line = head[start:end]
        if line.strip():
            out.append(line.rstrip("\r"))
        if end == len(head):
            break
        start = end + 1
    return out


def document_sniff(head: str, pattern: re.Pattern[str]) -> float:
    """A JSON document (a top-level object) whose head holds the wrapper's own keys: 0.98, else 0."""
    if not head.lstrip().startswith("{"):
        return 0.0
    return 0.98 if pattern.search(head[:65536]) else 0.0


def line_sniff(head: str, pattern: re.Pattern[str]) -> float:
    """The sniff score of a line-per-record layout whose lines match `pattern` (`sure` of their share)."""
    lines = head_lines(head)
    return sure(share(lines, pattern), lines)


def share(lines: list[str], pattern: re.Pattern[str]) -> float:
    """Fraction of `lines` matching `pattern` (0 for none)."""
    return sum(1 for ln in lines if pattern.match(ln)) / len(lines) if lines else 0.0


def sure(frac: float, lines: list[str]) -> float:
    """A sniff score from the share of the head's lines in a layout: 0.98 when (nearly) all are, else low."""
    if not lines or frac < 0.8:
        return 0.0
    return 0.98 if frac >= 0.95 else 0.6


class DocumentError(ValueError):
    """A JSON document that is cut off or not JSON past some point; what came before it is kept."""


def _pump(pieces: Iterable[bytes], coro_factory: Callable) -> Iterator[list]:
    out = ijson.sendable_list()
    coro = coro_factory(out)
    try:
        for piece in pieces:
            if piece:
                coro.send(piece)
                if out:
                    yield list(out)
                    out.clear()
        coro.close()
    except ijson.JSONError as exc:
        if out:
            yield list(out)
        raise DocumentError(f"the JSON document is cut off or malformed: {exc}") from None
    if out:
        yield list(out)


def iter_items(pieces: Iterable[bytes], prefix: str) -> Iterator[list]:
    """Streams a JSON document (several concatenated documents allowed, as in paged CLI output) and yields
    lists of the objects found at `prefix` (ijson syntax, e.g. "events.item"), each list from one piece."""
    yield from _pump(pieces, lambda out: ijson.items_coro(out, prefix, use_float=True, multiple_values=True))


def item_batches(pieces: Iterable[bytes], prefix: str, size: int, row: Callable[[object], object],
                 to_records: Callable[[list, int], pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """The objects at `prefix` of a JSON document (iter_items), each made a `row` as it is read (a batch holds
    rows, not parsed objects), in lists of `size` (the last one shorter), each list through
    `to_records(rows, first_line)`, an item's line being its number from 1. Where the document stops being
    readable, the items read before go through, then the DocumentError is raised (spill.sorted_records puts a
    not-ok record after them)."""
    n = 0
    buf: list = []
    try:
        for items in iter_items(pieces, prefix):
            buf.extend(map(row, items))
            if len(buf) >= size:
                yield to_records(buf, n + 1)
                n, buf = n + len(buf), []
    except DocumentError:
        if buf:
            yield to_records(buf, n + 1)
        raise
    if buf:
        yield to_records(buf, n + 1)


def iter_events(pieces: Iterable[bytes]) -> Iterator[list]:
    """Streams a JSON document as lists of ijson (prefix, event, value) events."""
    yield from _pump(pieces, lambda out: ijson.parse_coro(out, use_float=True, multiple_values=True))


def error_record(line: int, message: str) -> pl.DataFrame:
    """One not-ok record standing for an unreadable rest of a document."""
    return records_frame(pl.DataFrame({"line": [line], "ok": [False], "text": [message]}))


def iter_csv_batches(pieces: Iterable[bytes], batch: int = CHUNK_LINES) -> Iterator[pl.DataFrame]:
    """A CSV export with a header row (quoted values may hold commas, quotes and newlines), every column as
    text, in batches of at most `batch` records: the bytes go to a temporary file that Polars reads in
    batches, so memory stays bounded whatever the export's size. A UTF-8 byte order mark (Excel) is dropped
    from the first column's name. Where the CSV stops being readable (cut off inside a quoted value), the
    records of the longest readable prefix are given, then DocumentError."""
    with tempfile.TemporaryDirectory(prefix="attribution-csv-") as tmp:
        path = Path(tmp) / "export.csv"
        with path.open("wb") as f:
            for piece in pieces:
                f.write(piece)
        done = 0
        try:
            for df in _scan_csv(path).collect_batches(chunk_size=batch):
                done += df.height
                yield _names(df)
        except pl.exceptions.PolarsError as exc:
            why = str(exc).strip().splitlines()[0]
        else:
            return
        rest = _readable_prefix(path, Path(tmp) / "prefix.csv")
        if rest is not None and rest.height > done:
            yield _names(rest.slice(done))
        good = max(done, 0 if rest is None else rest.height)
        raise DocumentError(f"the CSV export is cut off or malformed after record {good}: {why}")


def _scan_csv(path: Path) -> pl.LazyFrame:
    return pl.scan_csv(path, infer_schema=False, truncate_ragged_lines=True)


def _names(df: pl.DataFrame) -> pl.DataFrame:
    return df.rename(lambda c: c.lstrip("\ufeff").strip())


def _readable_prefix(path: Path, out: Path) -> pl.DataFrame | None:
    """The records of the longest prefix of the file, cut at a line end, that Polars reads (bisection over
    the line ends: a damaged file only)."""
    data = path.read_bytes()
    ends = (np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1).tolist()
    lo, hi, best = 0, len(ends) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        out.write_bytes(data[: ends[mid]])
        try:
            best = _scan_csv(out).collect()
            lo = mid + 1
        except pl.exceptions.PolarsError:
            hi = mid - 1
    return best


def table_records(df: pl.DataFrame, fields: dict[str, tuple[str, ...]], first_line: int) -> pl.DataFrame:
    """Rows of a tabular export (CSV, or a JSON array of row objects), every column text -> records. `fields`
    maps a record column to the export's column names, first present and non-null wins; `rec_ts` is left as
    text (the caller parses its platform's time formats). Rows without text are not ok."""
    cols = []
    for col, names in fields.items():
        have = [pl.col(n) for n in names if n in df.columns]
        cols.append((pl.coalesce(have) if have else pl.lit(None, pl.Utf8)).alias(col))
    out = df.with_columns(cols).select(list(fields)).with_columns(
        line=pl.int_range(first_line, first_line + df.height, dtype=pl.Int64),
        ok=pl.col("text").is_not_null(),
    )
    return out.with_columns(pl.col("text").fill_null(pl.lit("a row without a log message")))
