"""The contract between the ingest and one log wrapper: the layer a container runtime, a log shipper or a log
platform puts around an engine's lines (../shared/formats/log-wrappers.md).

A wrapper says whether a file is wrapped its way (`sniff`, from the decoded head of the file) and turns the
file's physical lines (`decode`, mode "lines") or its whole JSON document (`records`, mode "document",
streamed: memory does not grow with the file) into *records*: one frame per call with the columns of
`RECORD_SCHEMA`. The generic layer (attribution.wrappers.layer) does everything else: reassembling partial
records, choosing the inner format per stream, the deployment from identity labels, the line census.

A wrapper decodes; it never interprets the engine's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

import polars as pl

if TYPE_CHECKING:
    from attribution.schema import PolarsType

TS = pl.Datetime("us", "UTC")

# One row per record of the wrapper (one physical line for line wrappers; one entry of the document for
# document wrappers).
RECORD_SCHEMA: dict[str, PolarsType] = {
    "line": pl.Int64,  # 1-based physical line (line wrappers) or record ordinal (document wrappers)
    "ok": pl.Boolean,  # false: not a record of this wrapper (garbage, a cut-off JSON line); `text` is the raw line
    "text": pl.Utf8,  # the wrapped content: no trailing newline, no wrapper escaping; partial pieces as they came
    "partial": pl.Boolean,  # the content continues in the next record of the same stream (CRI `P`, Docker 16 KiB)
    "rec_ts": TS,  # the wrapper's time for the record (UTC), null when it has none
    "stream": pl.Utf8,  # stdout / stderr / null
    # Identity labels, null when the wrapper does not know them. They name the stream a record belongs to
    # (records of different identities are parsed as separate logs) and give the deployment.
    "namespace": pl.Utf8,
    "pod": pl.Utf8,
    "container": pl.Utf8,
    "host": pl.Utf8,
    "unit": pl.Utf8,  # systemd unit, syslog tag, compose service, CloudWatch log stream, Loki job
}


def records_frame(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with exactly the RECORD_SCHEMA columns in order (missing ones null, `ok` and `partial` default
    true and false)."""
    exprs = []
    for name, dtype in RECORD_SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        elif name == "ok":
            exprs.append(pl.lit(True).alias(name))
        elif name == "partial":
            exprs.append(pl.lit(False).alias(name))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


class Wrapper:
    """Base class; subclasses set the class attributes and implement `sniff` and `decode` (mode "lines") or
    `records` (mode "document")."""

    name: ClassVar[str]  # e.g. "docker_json", "cri", "journald_json"; also a --format value
    mode: ClassVar[str] = "lines"  # or "document"
    description: ClassVar[str] = ""

    def sniff(self, head: str, path: str) -> float:
        """Confidence 0..1 that the file whose first ~64 KiB decode to `head` is wrapped this way. A wrapper
        that recognises its layout returns at least 0.97, so it wins over the engine formats, whose markers
        appear inside the wrapped text."""
        raise NotImplementedError

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        """`lines` (`line` Int64, `text` Utf8: physical lines of one chunk, in order) -> records (see
        `records_frame`). `state` is a JSON-serialisable dict the wrapper may keep across chunks (a short-form
        timestamp's year, a header of labels)."""
        raise NotImplementedError

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        """Mode "document": the decompressed bytes of the whole file, piece by piece -> batches of records in
        document order (`line` = record ordinal from 1), memory bounded by a batch whatever the file size."""
        raise NotImplementedError
