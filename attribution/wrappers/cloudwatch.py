"""AWS CloudWatch Logs (log-wrappers.md §9): the `filter-log-events` / `get-log-events` JSON (pages
concatenated in one file), `aws logs tail` detailed lines and the S3 export text. In the two text layouts an
event holding several lines continues on lines without the prefix: each such line is a record of its own
(as the plain log had it) with the time and log stream of the event it belongs to."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime

import polars as pl

from attribution.wrappers._platforms import (
    epoch_ts,
    head_lines,
    iso_ts,
    item_batches,
    share,
    split_message_lines,
)
from attribution.wrappers.base import TS, Wrapper, records_frame
from attribution.wrappers.journald import JournaldIso
from attribution.wrappers.spill import sorted_lines, sorted_records


class CloudWatchJson(Wrapper):
    name = "cloudwatch_json"
    mode = "document"
    description = "AWS CloudWatch Logs: aws logs filter-log-events / get-log-events JSON (events[])"
    SNIFF = re.compile(
        r'^\s*\{\s*"events"\s*:\s*\[\s*(?:\]|\{[^{}]*"(?:timestamp|message|logStreamName)"\s*:)'
    )
    BATCH = 50_000

    def sniff(self, head: str, path: str) -> float:
        return 0.98 if self.SNIFF.search(head[:65536]) else 0.0

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_records(item_batches(pieces, "events.item", self.BATCH, _event_row, _events_records),
                                  "no CloudWatch Logs events (events[]) in this JSON document")


def _event_row(ev: object) -> tuple[object, object, object]:
    """(message, timestamp, logStreamName) of an event (Nones for anything but an object)."""
    if not isinstance(ev, dict):
        return None, None, None
    return ev.get("message"), ev.get("timestamp"), ev.get("logStreamName")


def _events_records(rows: list, first_line: int) -> pl.DataFrame:
    msgs, times, units = zip(*rows, strict=True)
    df = pl.DataFrame(
        {
            "ts": pl.Series([t if isinstance(t, (int, float)) else None for t in times], dtype=pl.Float64),
            "text": pl.Series([m if isinstance(m, str) else None for m in msgs], dtype=pl.Utf8),
            "unit": pl.Series([u if isinstance(u, str) else None for u in units], dtype=pl.Utf8),
        }
    )
    ok = pl.col("text").is_not_null() & pl.col("ts").is_not_null()
    df = df.select(
        line=pl.int_range(first_line, first_line + len(rows), dtype=pl.Int64),
        ok=ok,
        text=pl.col("text").fill_null("unreadable CloudWatch event"),
        rec_ts=epoch_ts(pl.col("ts").cast(pl.Int64), "ms"),
        unit=pl.col("unit"),
    )
    return split_message_lines(records_frame(df))


class _Prefixed(Wrapper):
    """Text lines `<time> [<stream> ]<message>`; lines without the prefix continue the previous event."""

    LINE: re.Pattern[str]

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        g = lines.select("line", "text", m=pl.col("text").str.extract_groups(self.LINE.pattern)).unnest("m")
        head = pl.col("ts").is_not_null()
        last = state.get(self.name) or {}
        prev_ts = datetime.fromisoformat(last["ts"]) if last.get("ts") else None
        df = g.select(
            "line",
            head.alias("head"),
            pl.when(head).then(pl.col("msg").fill_null("")).otherwise("text").alias("text"),
            pl.when(head).then(iso_ts(pl.col("ts"))).alias("rec_ts"),
            (pl.col("unit") if "unit" in g.columns else pl.lit(None, pl.Utf8)).alias("unit"),
        )
        # a continuation line takes the time and stream of the last event, also across chunks; lines before
        # any event (a file cut at the start) are not records
        first = (pl.int_range(pl.len()) == 0) & ~pl.col("head")
        df = df.with_columns(
            pl.when(first).then(pl.lit(prev_ts, TS)).otherwise("rec_ts").forward_fill().alias("rec_ts"),
            pl.when(first)
            .then(pl.lit(last.get("unit"), pl.Utf8))
            .otherwise("unit")
            .forward_fill()
            .alias("unit"),
            (pl.col("head").cum_max() | bool(last.get("seen"))).alias("ok"),
        )
        if df.height:
            tail = df.row(df.height - 1, named=True)
            if tail["ok"]:
                ts = tail["rec_ts"]
                state[self.name] = {"ts": ts.isoformat() if ts else None, "unit": tail["unit"], "seen": True}
        return records_frame(df)

    def _shares(self, head: str) -> tuple[list[str], float]:
        lines = head_lines(head, 40)
        return lines, share(lines, self.LINE)


class CloudWatchTail(_Prefixed):
    name = "cloudwatch_tail"
    description = "aws logs tail --format detailed (<UTC time>+00:00 <log stream> <message>)"
    LINE = re.compile(
        r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?\+00:00) (?P<unit>\S+)(?: (?P<msg>.*))?$"
    )

    def sniff(self, head: str, path: str) -> float:
        lines, frac = self._shares(head)
        if not lines or not self.LINE.match(lines[0]) or frac < 0.5:
            return 0.0
        # journalctl short-iso in UTC has the same time: there (nearly) every line names a `ident[pid]:`, as
        # journald's own sniff decides; a few `INFO:     ...` lines (uvicorn's access lines) do not make one
        return 0.0 if JournaldIso().sniff(head, path) else 0.97


class CloudWatchS3(_Prefixed):
    name = "cloudwatch_s3"
    mode = "document"  # an exported object is not sorted by time (AWS docs): read back through the spill sort
    description = "CloudWatch Logs export to S3 (<ISO ms Z> <message>; continuation lines without the time)"
    LINE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<msg>.*)$")
    # NVIDIA Dynamo's own layout also starts with an ms UTC time, then a padded level and a `target:`
    DYNAMO = re.compile(r"^\S+Z +(?:TRACE|DEBUG|INFO|WARN|ERROR) +[\w.:]+: ")

    def sniff(self, head: str, path: str) -> float:
        lines, frac = self._shares(head)
        if not lines or not self.LINE.match(lines[0]) or frac < 0.5:
            return 0.0
        return 0.0 if share(lines, self.DYNAMO) >= 0.5 else 0.97

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        df = super().decode(lines, state)
        stream = stream_from_key(state.get("path"))
        return df.with_columns(pl.col("unit").fill_null(stream)) if stream else df

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state, detect=False)


# s3://<bucket>/<prefix>/<taskId>/<logStreamName>/000000.gz (log-wrappers.md §9.3): the export task's id is a
# UUID, and the stream name (it may hold slashes: `ecs/vllm/<task>`) is all between it and the numbered object.
_S3_KEY = re.compile(r"/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/(.+)/\d{6}(?:\.gz)?$")


def stream_from_key(path: str | None) -> str | None:
    """The log stream an exported object holds, from its S3 key (a downloaded copy keeps the key's folders)."""
    m = _S3_KEY.search(path or "")
    return m.group(1) if m else None


WRAPPERS = [CloudWatchJson(), CloudWatchTail(), CloudWatchS3()]
