"""Text prefixes that tools put before each line (../shared/formats/log-wrappers.md §2.2, §3.3, §4):
`docker logs -t` / `kubectl logs --timestamps` (9 digits), GitHub Actions (7 digits) and bracketed
`[2025-08-12T08:42:31Z] ` times; `kubectl logs --prefix` (`[pod/<pod>/<container>] `, with or without
--timestamps); docker compose / similar `name  | ` prefixes (the name is the identity `unit`).

The wrapper is decided once per file by its sniff (most of the first lines carry the prefix); decoding then
strips the prefix wherever it is and passes a line without it through unchanged.
"""

from __future__ import annotations

import re

import polars as pl

from attribution.wrappers.base import Wrapper, records_frame
from attribution.wrappers.docker import parse_time

_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
_ZONE = r"(?:Z|[+-]\d\d:\d\d)"
# docker -t and kubectl --timestamps pad to 9 digits; GitHub Actions prints 7; brackets take any precision.
_BARE = rf"{_DATE}\.(?:\d{{9}}|\d{{7}}){_ZONE}"
_BRACKET = rf"\[{_DATE}(?:\.\d{{1,9}})?{_ZONE}\]"
TS_RE = rf"^(?:({_BARE})|\[({_DATE}(?:\.\d{{1,9}})?{_ZONE})\]) (.*)$"
KUBECTL_RE = rf"^\[pod/([^/\]\s]+)/([^\]\s]+)\] (?:({_BARE}) )?(.*)$"
_ANSI = r"(?:\x1b\[[0-9;]*m)*"
# `compose logs --timestamps` prints Go's RFC3339NanoFixed (9 digits) after `| `: an engine's own leading time
# (Dynamo's 6-digit `...123456Z`) is part of the line, not compose's.
COMPOSE_RE = rf"^{_ANSI}([A-Za-z0-9][\w.-]*)\s+\|{_ANSI}(?: (?:({_DATE}\.\d{{9}}{_ZONE}) )?(.*))?$"


def _share(head: str, pattern: str, least: float = 0.8) -> float:
    lines = [ln for ln in head.split("\n")[:50] if ln.strip()]
    if not lines:
        return 0.0
    rx = re.compile(pattern, re.S)
    hits = sum(1 for ln in lines if rx.match(ln))
    return hits / len(lines) if hits >= least * (len(lines) - 1 if len(lines) > 3 else len(lines)) else 0.0


def _group(k: str) -> pl.Expr:
    """Group `k` of the prefix pattern matched by `_unprefix`."""
    return pl.col("_g").struct.field(k)


def _unprefix(lines: pl.DataFrame, pattern: str, hit: str, text: pl.Expr, rec_ts: pl.Expr,
              **identity: str) -> pl.DataFrame:
    """Lines -> records: where `pattern` matches (its group `hit` is not null) the record is `text` at
    `rec_ts`, with an identity column from each named group (`pod="1"`); another line is kept whole."""
    df = lines.with_columns(pl.col("text").str.extract_groups(pattern).alias("_g"))
    return records_frame(df.select(
        "line",
        pl.when(_group(hit).is_not_null()).then(text).otherwise(pl.col("text")).alias("text"),
        rec_ts.alias("rec_ts"),
        *(_group(g).alias(column) for column, g in identity.items()),
    ))


class Timestamped(Wrapper):
    name = "timestamped"
    description = "RFC 3339 time before each line: docker logs -t, kubectl logs --timestamps, CI logs, [time] "

    def sniff(self, head: str, path: str) -> float:
        return 0.97 if _share(head, TS_RE) else 0.0

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return _unprefix(lines, TS_RE, "3", _group("3"), parse_time(pl.coalesce(_group("1"), _group("2"))))


class KubectlPrefix(Wrapper):
    name = "kubectl_prefix"
    description = "kubectl logs --prefix ([pod/<pod>/<container>] ), with or without --timestamps"

    def sniff(self, head: str, path: str) -> float:
        return 0.98 if _share(head, KUBECTL_RE) else 0.0

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return _unprefix(lines, KUBECTL_RE, "4", _group("4"), parse_time(_group("3")), pod="1", container="2")


class Compose(Wrapper):
    name = "compose"
    description = "docker compose (v1, v2) and similar `name  | ` prefixes"

    def sniff(self, head: str, path: str) -> float:
        return 0.97 if _share(head, COMPOSE_RE) else 0.0

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return _unprefix(lines, COMPOSE_RE, "1", _group("3").fill_null(""), parse_time(_group("2")), unit="1")


WRAPPERS = [Timestamped(), KubectlPrefix(), Compose()]
