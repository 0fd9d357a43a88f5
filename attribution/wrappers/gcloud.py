"""Google Cloud Logging (log-wrappers.md §10): `gcloud logging read --format=json` (a pretty-printed top-level
array of LogEntry objects, newest first by default), the REST `entries:list` response (`{"entries": […]}`)
and LogEntries one per line (Cloud Storage sinks). Text from `textPayload` or `jsonPayload.message`, identity
from `resource.labels`; read back through the spill sort."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

import polars as pl

from attribution.wrappers._common import (
    DocumentError,
    error_record,
    head_lines,
    iso_ts,
    iter_items,
    json_lines,
    share,
    split_message_lines,
    sure,
)
from attribution.wrappers._spill import Spill, sorted_lines
from attribution.wrappers.base import Wrapper, records_frame

_PAYLOAD = pl.Struct({"message": pl.Utf8, "log": pl.Utf8})
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
    text = pl.coalesce(e.field("textPayload"), pl.col("payload"))
    good = pl.col("ok") & text.is_not_null()
    return records_frame(
        pl.DataFrame(
            {"line": lines["line"], "raw": lines["text"], "d": dec, "ok": ok, "payload": payload}
        ).select(
            "line",
            good.alias("ok"),
            pl.when(good).then(text.str.strip_suffix("\n")).otherwise("raw").alias("text"),
            iso_ts(e.field("timestamp")).alias("rec_ts"),
            e.field("logName").str.extract(r"/logs/(stdout|stderr)$").alias("stream"),
            res.field("namespace_name").alias("namespace"),
            res.field("pod_name").alias("pod"),
            res.field("container_name").alias("container"),
            e.field("labels").struct.field("compute.googleapis.com/resource_name").alias("host"),
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
        n = 0
        buf: list[str] = []
        with Spill(newest_first=True) as sp:
            try:
                for entries in iter_items(_chain(first, pieces), prefix):
                    buf.extend(json.dumps(x, default=str) for x in entries)
                    if len(buf) >= self.BATCH:
                        n = self._add(sp, buf, n)
            except DocumentError as exc:
                n = self._add(sp, buf, n)
                sp.add(error_record(n + 1, str(exc)))
            self._add(sp, buf, n)
            yield from sp.sorted(empty="no Cloud Logging entries in this JSON document")

    @staticmethod
    def _add(sp: Spill, buf: list[str], n: int) -> int:
        if buf:
            lines = pl.DataFrame({"line": pl.int_range(n + 1, n + 1 + len(buf), eager=True), "text": buf})
            sp.add(split_message_lines(decode_entries(lines)))
            n += len(buf)
            buf.clear()
        return n


class GcloudLines(Wrapper):
    name = "gcloud_ndjson"
    mode = "document"
    description = "Google Cloud Logging entries one per line (Cloud Storage sink, jq -c '.[]')"
    HEAD = re.compile(r'^\{(?=.*"(?:insertId|logName)"\s*:\s*")(?=.*"(?:textPayload|jsonPayload)"\s*:).*\}$')

    def sniff(self, head: str, path: str) -> float:
        lines = head_lines(head)
        return sure(share(lines, self.HEAD), lines)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return split_message_lines(decode_entries(lines))

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


WRAPPERS = [GcloudJson(), GcloudLines()]
