"""Google Cloud Logging (log-wrappers.md §10): `gcloud logging read --format=json` (a pretty-printed top-level
array of LogEntry objects, newest first by default), the REST `entries:list` response (`{"entries": […]}`)
and LogEntries one per line (Cloud Storage sinks). Text from `textPayload` or `jsonPayload.message`, identity
from `resource.labels`; read back through the spill sort."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import polars as pl

from attribution.wrappers._platforms import (
    iso_ts,
    item_batches,
    json_lines,
    line_sniff,
    split_message_lines,
)
from attribution.wrappers.base import Wrapper, records_frame
from attribution.wrappers.spill import sorted_lines, sorted_records

DTYPE = pl.Struct(
    {
        "textPayload": pl.Utf8,
        "timestamp": pl.Utf8,
        "logName": pl.Utf8,
        "resource": pl.Struct(
            {"labels": pl.Struct({k: pl.Utf8 for k in ("pod_name", "container_name", "namespace_name")})}
        ),
        "labels": pl.Struct({"compute.googleapis.com/resource_name": pl.Utf8}),
    }
)
ENTRY = re.compile(r'"(?:insertId|logName)"\s*:\s*"')
NODE = "compute.googleapis.com/resource_name"
# the columns an entry gives, from a JSON line (decode_entries) or a parsed document entry (entry_row)
COLUMNS = {c: pl.Utf8 for c in ("text", "timestamp", "logName", "namespace", "pod", "container", "host")}


def decode_entries(lines: pl.DataFrame) -> pl.DataFrame:
    """Lines each holding one LogEntry -> records. `jsonPayload` is any object, so its text is found with a
    second, narrower decode (its other fields may be of any type)."""
    dec, ok = json_lines(lines["text"], DTYPE)
    # jsonPayload.message, only where the entry has no textPayload (a JSON line from the container)
    has = lines["text"].str.contains('"jsonPayload"', literal=True)
    cand = lines["text"].zip_with(has, pl.Series([None], dtype=pl.Utf8))
    payload = cand.str.json_path_match("$.jsonPayload.message").fill_null(
        cand.str.json_path_match("$.jsonPayload.log")
    )
    e = pl.col("d").struct
    res = e.field("resource").struct.field("labels").struct
    cols = pl.DataFrame({"line": lines["line"], "raw": lines["text"], "d": dec, "ok": ok, "payload": payload})
    return entries_records(
        cols.select(
            "line",
            "raw",
            "ok",
            pl.coalesce(e.field("textPayload"), pl.col("payload")).alias("text"),
            e.field("timestamp").alias("timestamp"),
            e.field("logName").alias("logName"),
            res.field("namespace_name").alias("namespace"),
            res.field("pod_name").alias("pod"),
            res.field("container_name").alias("container"),
            e.field("labels").struct.field(NODE).alias("host"),
        )
    )


def entry_row(x: object) -> tuple:
    """A parsed LogEntry -> the values of COLUMNS (None where absent or not text)."""
    if not isinstance(x, dict):
        return (None,) * len(COLUMNS)
    text = x.get("textPayload")
    if text is None and isinstance(x.get("jsonPayload"), dict):
        jp = x["jsonPayload"]
        text = jp.get("message") if jp.get("message") is not None else jp.get("log")
    res = (x.get("resource") or {}).get("labels") if isinstance(x.get("resource"), dict) else None
    res = res if isinstance(res, dict) else {}
    labels = x.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    row = (
        text,
        x.get("timestamp"),
        x.get("logName"),
        res.get("namespace_name"),
        res.get("pod_name"),
        res.get("container_name"),
        labels.get(NODE),
    )
    return tuple(v if isinstance(v, str) else None for v in row)


def entries_records(cols: pl.DataFrame) -> pl.DataFrame:
    """COLUMNS (plus `line`, `raw`, `ok`) -> records, one per line of the entry's text."""
    good = pl.col("ok") & pl.col("text").is_not_null()
    return split_message_lines(
        records_frame(
            cols.select(
                "line",
                good.alias("ok"),
                pl.when(good).then(pl.col("text")).otherwise("raw").alias("text"),
                iso_ts(pl.col("timestamp")).alias("rec_ts"),
                pl.col("logName").str.extract(r"/logs/(stdout|stderr)$").alias("stream"),
                "namespace",
                "pod",
                "container",
                "host",
            )
        )
    )


class GcloudJson(Wrapper):
    name = "gcloud_json"
    mode = "document"
    description = "Google Cloud Logging: gcloud logging read --format=json (array of LogEntry)"
    BATCH = 20_000

    def sniff(self, head: str, path: str) -> float:
        s = head.lstrip()
        if not (re.match(r"\[\s*\{", s) or re.match(r'\{\s*"entries"\s*:\s*\[', s)):
            return 0.0
        return 0.98 if ENTRY.search(s[:65536]) else 0.0

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        pieces = iter(pieces)
        first = b""
        for piece in pieces:  # the first byte that is not space says array (gcloud) or object (REST)
            first += piece
            if first.strip():
                break
        prefix = "entries.item" if first.lstrip()[:1] == b"{" else "item"
        yield from sorted_records(item_batches(_chain(first, pieces), prefix, self.BATCH, entry_row, _entries_records),
                                  "no Cloud Logging entries in this JSON document", newest_first=True)


def _entries_records(rows: list, first_line: int) -> pl.DataFrame:
    cols = pl.DataFrame(rows, schema=COLUMNS, orient="row").with_columns(
        line=pl.int_range(first_line, first_line + len(rows), dtype=pl.Int64),
        ok=pl.lit(True),
        raw=pl.lit("unreadable Cloud Logging entry"),
    )
    return entries_records(cols)


class GcloudLines(Wrapper):
    name = "gcloud_ndjson"
    mode = "document"
    description = "Google Cloud Logging entries one per line (Cloud Storage sink, jq -c '.[]')"
    HEAD = re.compile(r'^\{(?=.*"(?:insertId|logName)"\s*:\s*")(?=.*"(?:textPayload|jsonPayload)"\s*:).*\}$')

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.HEAD)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return decode_entries(lines)

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


WRAPPERS = [GcloudJson(), GcloudLines()]
