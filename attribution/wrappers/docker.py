"""Docker's JSON layouts (../shared/formats/log-wrappers.md §2): the `json-file` driver's files
(`{"log":"…\\n","stream":"stderr","time":"…"}`) and the JSON stream of `docker logs` on recent engines
(`{"Line":…,"Source":…,"Timestamp":…}`). A record whose text does not end in a newline is partial: Docker
splits lines at 16 KiB and only the last piece carries the `\\n`.
"""

from __future__ import annotations

import json
import re

import polars as pl

from attribution.wrappers.base import Wrapper, records_frame

# Go's RFC3339Nano (0-9 fraction digits) with `Z` or a numeric offset.
RFC3339 = "%Y-%m-%dT%H:%M:%S%.f%#z"


def parse_time(expr: pl.Expr) -> pl.Expr:
    return expr.str.to_datetime(RFC3339, time_unit="us", time_zone="UTC", strict=False)


def decode_json(text: pl.Series, dtype: pl.Struct, looks: pl.Series) -> pl.Series:
    """`text` decoded as JSON objects of `dtype` where `looks` (a cheap shape test) holds, null elsewhere and
    where the JSON is broken (a line cut while the file was copied)."""
    cand = text.zip_with(looks, pl.Series([None] * text.len(), dtype=pl.Utf8))
    try:
        return cand.str.json_decode(dtype)
    except pl.exceptions.PolarsError:
        pass
    # Rare path: find the broken lines one by one, then decode the others in one pass.
    ok = []
    for s in cand.to_list():
        try:
            ok.append(s is not None and isinstance(json.loads(s), dict))
        except ValueError:
            ok.append(False)
    cand = cand.zip_with(pl.Series(ok, dtype=pl.Boolean), pl.Series([None] * text.len(), dtype=pl.Utf8))
    return cand.str.json_decode(dtype)


def _head_lines(head: str, n: int = 20) -> list[str]:
    return [ln for ln in head.split("\n")[:n] if ln.strip()]


class _JsonLines(Wrapper):
    TEXT: str
    STREAM: str
    TIME: str
    SNIFF_RE: re.Pattern[str]
    DTYPE: pl.Struct

    def sniff(self, head: str, path: str) -> float:
        lines = _head_lines(head)
        if not lines:
            return 0.0
        hits = sum(1 for ln in lines if self.SNIFF_RE.search(ln))
        return 0.99 if hits >= 0.8 * (len(lines) - 1 if len(lines) > 3 else len(lines)) else 0.0

    def _tag(self, dec: pl.Expr) -> pl.Expr:
        return pl.lit(None, pl.Utf8)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        text = lines["text"]
        looks = text.str.contains(r"^\s*\{.*\}\s*$")
        dec = decode_json(text, self.DTYPE, looks)
        df = lines.with_columns(dec.alias("_d"))
        d = pl.col("_d")
        body = d.struct.field(self.TEXT).fill_null("")
        out = df.select(
            "line",
            (d.is_not_null() & d.struct.field(self.STREAM).is_not_null()).alias("ok"),
            pl.when(d.is_null()).then(pl.col("text")).otherwise(body.str.strip_suffix("\n")).alias("text"),
            (~body.str.ends_with("\n")).alias("partial"),
            parse_time(d.struct.field(self.TIME)).alias("rec_ts"),
            d.struct.field(self.STREAM).alias("stream"),
            self._tag(d).alias("container"),
        )
        return records_frame(out)


class DockerJsonFile(_JsonLines):
    name = "docker_json"
    description = "Docker json-file driver (/var/lib/docker/containers/<id>/<id>-json.log)"
    TEXT, STREAM, TIME = "log", "stream", "time"
    SNIFF_RE = re.compile(r'^\{"(?:log|stream)":\s*".*"stream":\s*"(?:stdout|stderr)".*"time":\s*"\d{4}-')
    DTYPE = pl.Struct({"log": pl.Utf8, "stream": pl.Utf8, "attrs": pl.Struct({"tag": pl.Utf8}), "time": pl.Utf8})

    def _tag(self, dec: pl.Expr) -> pl.Expr:
        # `--log-opt tag=…` names the container; without it the file path does (ingest.default_deployment).
        return dec.struct.field("attrs").struct.field("tag")


class DockerJsonStream(_JsonLines):
    name = "docker_stream_json"
    description = "Docker's JSON log stream (`docker logs` with format=json / application/jsonl)"
    TEXT, STREAM, TIME = "Line", "Source", "Timestamp"
    SNIFF_RE = re.compile(r'^\{"Line":\s*".*"Source":\s*"(?:stdout|stderr)".*"Timestamp":\s*"\d{4}-')
    DTYPE = pl.Struct({"Line": pl.Utf8, "Source": pl.Utf8, "Timestamp": pl.Utf8})


WRAPPERS = [DockerJsonFile(), DockerJsonStream()]
