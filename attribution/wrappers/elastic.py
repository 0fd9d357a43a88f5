"""Elasticsearch / OpenSearch and the shippers that feed them (log-wrappers.md §7-8): the `_search` / scroll
response document, dumps with one hit per line, shipper documents per line (Filebeat, Fluent Bit, Fluentd,
Vector) and Fluentd's `out_file` (`<time>\\t<tag>\\t<json>`). The shippers differ only in field names, so one
table (`FIELDS`) maps them; hits come by score, not time, so exports are read back through the spill sort."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from itertools import product

import polars as pl

from attribution.wrappers._platforms import (
    document_sniff,
    extract_groups_unique,
    iso_ts,
    item_batches,
    json_lines,
    line_sniff,
    split_message_lines,
)
from attribution.wrappers.base import TS, Wrapper, records_frame
from attribution.wrappers.spill import sorted_lines, sorted_records

# record column -> document paths, first non-null wins. Filebeat (ECS), Fluent Bit / Fluentd kubernetes
# filter, Vector kubernetes_logs. `log` is the text for Fluent Bit but an object in ECS (log.file.path), so
# lines are decoded with one of two dtypes depending on which it is.
FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("message", "log"),
    # the CRI/Docker time (ns) before ES's ms; `date`: Fluent Bit's `stdout`/`file` json_lines output (its
    # `json_date_key`), a float epoch by default or ISO 8601
    "rec_ts": ("time", "timestamp", "@timestamp", "date"),
    "stream": ("stream",),
    "pod": ("kubernetes.pod.name", "kubernetes.pod_name"),
    "namespace": ("kubernetes.namespace", "kubernetes.namespace_name", "kubernetes.pod_namespace"),
    "container": ("kubernetes.container.name", "kubernetes.container_name"),
    "host": ("kubernetes.node.name", "kubernetes.host", "kubernetes.pod_node_name"),
    # the node file the shipper read (Filebeat 7+, Vector, Filebeat 6 `source`): a pod when labels are absent
    "path": ("log.file.path", "file", "source"),
}
# /var/log/containers/<pod>_<ns>_<container>-<id>.log (also as a Fluent Bit tag, slashes turned to dots) and
# /var/log/pods/<ns>_<pod>_<uid>/<container>/
CONTAINERS_PATH = r"containers[./]([^_/]+)_([^_/]+)_(.+)-[0-9a-f]{64}\.log"
PODS_PATH = r"/var/log/pods/([^_/]+)_([^_/]+)_[^/]+/([^/]+)/"
LOG_IS_TEXT = r'(?:^|[{,])\s*"log"\s*:\s*"'


def _spellings(path: str) -> list[str]:
    """A dotted path as stored nested, flat (`"kubernetes.pod_name": …`) or half-flat."""
    parts = path.split(".")
    out = []
    for cuts in product((".", "/"), repeat=len(parts) - 1):
        s = parts[0]
        for sep, p in zip(cuts, parts[1:], strict=True):
            s += sep + p
        out.append(s)  # "/" marks a nesting level, "." stays part of a key
    return out


def _dtype(log_text: bool) -> tuple[pl.Struct, dict[str, list[list[str]]]]:
    """The struct dtype holding every spelling of every path, and per column the field chains to read."""
    tree: dict = {}
    chains: dict[str, list[list[str]]] = {}
    for col, paths in FIELDS.items():
        for path in paths:
            if path == "log" and not log_text or path.startswith("log.") and log_text:
                continue
            for sp in _spellings(path):
                keys = sp.split("/")
                node = tree
                for k in keys[:-1]:
                    node = node.setdefault(k, {})
                node[keys[-1]] = None
                chains.setdefault(col, []).append(keys)

    def build(node: dict) -> pl.Struct:
        return pl.Struct({k: pl.Utf8 if v is None else build(v) for k, v in node.items()})

    doc = build(tree)
    return pl.Struct({**{f.name: f.dtype for f in doc.fields}, "_source": doc}), chains


DTYPES = {flag: _dtype(flag) for flag in (True, False)}


def _columns(dec: pl.Series, chains: dict[str, list[list[str]]]) -> pl.DataFrame:
    """Decoded documents (or hits: `_source` is looked in first) -> one column per FIELDS key."""
    frame = pl.DataFrame({"d": dec})
    cols = []
    for col, options in chains.items():
        exprs = []
        for base in (pl.col("d").struct.field("_source"), pl.col("d")):
            for keys in options:
                e = base
                for k in keys:
                    e = e.struct.field(k)
                exprs.append(e)
        if col == "rec_ts":  # a candidate that is not an ISO time (an epoch number) gives way to the next
            exprs = [iso_ts(e) for e in exprs] + [epoch_seconds(e) for e in exprs]
        cols.append(pl.coalesce(exprs).alias(col))
    return frame.select(cols)


def epoch_seconds(text: pl.Expr) -> pl.Expr:
    """A float epoch in seconds as text (`1475898721.123456`) -> UTC; anything else -> null."""
    secs = text.cast(pl.Float64, strict=False)
    ok = secs.is_between(1e9, 1e10)  # 2001-2286: an epoch in seconds, not ms or a count
    us = pl.from_epoch((secs * 1e6).round(0).cast(pl.Int64), time_unit="us")
    return pl.when(ok).then(us).dt.replace_time_zone("UTC").cast(TS)


def decode_documents(lines: pl.DataFrame) -> pl.DataFrame:
    """Lines each holding one shipper document or one hit -> records (the mapping of FIELDS)."""
    text = lines["text"]
    log_text = text.str.contains(LOG_IS_TEXT)
    parts = []
    for flag in (True, False):
        dtype, chains = DTYPES[flag]
        mask = log_text if flag else ~log_text
        dec, ok = json_lines(text.zip_with(mask, pl.Series([None], dtype=pl.Utf8)), dtype)
        parts.append(_columns(dec, chains).with_columns(ok=ok))
    cols = pl.DataFrame([parts[0][c].zip_with(log_text, parts[1][c]) for c in parts[0].columns])
    ok_expr = pl.col("ok") & pl.col("text").is_not_null()
    df = path_identity(pl.concat([lines.select("line", raw="text"), cols], how="horizontal"))
    return records_frame(
        df.select(
            "line",
            ok_expr.alias("ok"),
            pl.when(ok_expr).then(pl.col("text")).otherwise("raw").alias("text"),
            "rec_ts",
            "stream",
            "pod",
            "namespace",
            "container",
            "host",
        )
    )


def path_identity(df: pl.DataFrame) -> pl.DataFrame:
    """`pod`, `namespace`, `container` filled from the node file the shipper read (`path`) where the
    document has no kubernetes labels."""
    df = df.with_columns(
        cp=extract_groups_unique(df["path"], CONTAINERS_PATH),
        pp=extract_groups_unique(df["path"], PODS_PATH),
    )
    cp, pp = pl.col("cp").struct, pl.col("pp").struct
    return df.with_columns(
        pl.coalesce("pod", cp.field("1"), pp.field("2")).alias("pod"),
        pl.coalesce("namespace", cp.field("2"), pp.field("1")).alias("namespace"),
        pl.coalesce("container", cp.field("3"), pp.field("3")).alias("container"),
    ).drop("cp", "pp")


def _hit(h: object) -> object:
    """A hit as `{"_source": …}`; a search with `"_source": false` and `fields` returns each field as a list
    of values under its dotted name (`"kubernetes.pod.name": ["vllm-0"]`): the first value stands for it."""
    if isinstance(h, dict) and "_source" not in h and isinstance(h.get("fields"), dict):
        return {"_source": {k: v[0] if isinstance(v, list) and v else v for k, v in h["fields"].items()}}
    return h


class ElasticSearch(Wrapper):
    name = "elastic_search"
    mode = "document"
    description = "Elasticsearch / OpenSearch _search or scroll response (hits.hits[]._source)"
    SNIFF = re.compile(
        r'"hits"\s*:\s*\{.*?"hits"\s*:\s*\[\s*(?:\]|\{[^{}]*?"_(?:index|id|source)"\s*:)', re.S
    )
    BATCH = 20_000

    def sniff(self, head: str, path: str) -> float:
        return document_sniff(head, self.SNIFF)

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        # several responses (scroll pages) concatenated in one file are read one after the other
        yield from sorted_records(item_batches(pieces, "hits.hits.item", self.BATCH, _hit_text, _hits_records),
                                  "no Elasticsearch hits (hits.hits[]) in this JSON document")


def _hit_text(h: object) -> str:
    return json.dumps(_hit(h), default=str)


def _hits_records(text: list, first_line: int) -> pl.DataFrame:
    lines = pl.DataFrame({"line": pl.int_range(first_line, first_line + len(text), eager=True), "text": text})
    return split_message_lines(decode_documents(lines))


class ElasticLines(Wrapper):
    name = "elastic_ndjson"
    mode = "document"
    description = "one Elasticsearch hit or one Filebeat / Fluent Bit / Fluentd / Vector document per line"
    HEAD = re.compile(
        r'^\{(?=.*"(?:message|log)"\s*:\s*")(?=.*"(?:_source|@timestamp|kubernetes|source_type)"\s*:).*\}$'
    )

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.HEAD)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        return split_message_lines(decode_documents(lines))

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state)


class FluentdOutFile(Wrapper):
    name = "fluentd_out_file"
    description = "Fluentd out_file (<ISO time>\\t<tag>\\t<JSON record>)"
    LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))\t([^\t]*)\t(\{.*\})$")

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.LINE)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        g = lines.select("line", "text", m=pl.col("text").str.extract_groups(self.LINE.pattern)).unnest("m")
        inner = decode_documents(g.select("line", text=pl.col("3").fill_null("")))
        # the tag names the node file (kube.var.log.containers.<pod>_<ns>_<container>-<id>.log)
        tag = extract_groups_unique(g["2"], CONTAINERS_PATH)
        ok = inner["ok"] & g["1"].is_not_null()
        return split_message_lines(
            inner.with_columns(
                ok=ok,
                text=inner["text"].zip_with(ok, lines["text"]),
                rec_ts=inner["rec_ts"].fill_null(g.select(iso_ts(pl.col("1"))).to_series()),
                pod=inner["pod"].fill_null(tag.struct.field("1")),
                namespace=inner["namespace"].fill_null(tag.struct.field("2")),
                container=inner["container"].fill_null(tag.struct.field("3")),
            )
        )


WRAPPERS = [ElasticSearch(), ElasticLines(), FluentdOutFile()]
