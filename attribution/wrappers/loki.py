"""Grafana Loki exports (log-wrappers.md §6): `logcli query --output=jsonl`, logcli's default text output
(`<RFC3339> {labels} line`) and the `/loki/api/v1/query_range` JSON document. All three are newest-first by
default, so each reads the whole file and hands records back in time order through the spill sort."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import polars as pl

from attribution.wrappers._platforms import (
    DocumentError,
    document_sniff,
    epoch_ts,
    error_record,
    iso_ts,
    iter_events,
    json_lines,
    line_sniff,
    split_message_lines,
)
from attribution.wrappers.base import Wrapper, records_frame
from attribution.wrappers.spill import Spill, sorted_lines

# identity column -> the label names agents use for it, first found wins (Promtail/Alloy Kubernetes configs,
# the OpenTelemetry-style names of newer Loki, docker_sd)
LABELS: dict[str, tuple[str, ...]] = {
    "namespace": ("namespace", "namespace_name", "k8s_namespace_name"),
    "pod": ("pod", "pod_name", "k8s_pod_name"),
    "container": ("container", "container_name", "k8s_container_name"),
    "host": ("host", "node_name", "hostname", "instance"),
    "unit": ("job", "app", "service_name", "unit"),
    "stream": ("stream",),
}
ALL_LABELS = sorted({n for names in LABELS.values() for n in names} | {"filename"})
# /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log in a `filename` label names the pod
POD_PATH = r"/var/log/pods/([^_/]+)_([^_/]+)_[^/]+/([^/]+)/"


def identity_from_struct(labels: pl.Expr) -> list[pl.Expr]:
    """Identity columns from a struct of label values (every name in ALL_LABELS a field)."""
    path = labels.struct.field("filename")
    from_path = {"namespace": 1, "pod": 2, "container": 3}
    out = []
    for col, names in LABELS.items():
        options = [labels.struct.field(n) for n in names]
        if col in from_path:
            options.append(path.str.extract(POD_PATH, from_path[col]))
        out.append(pl.coalesce(options).alias(col))
    return out


def identity_from_dict(labels: dict) -> dict:
    row = {"sid": labels.pop("_sid")}
    path = labels.get("filename") or ""
    m = re.search(POD_PATH, path) if isinstance(path, str) else None
    for col, names in LABELS.items():
        row[col] = next((str(labels[n]) for n in names if labels.get(n) is not None), None)
    if m:
        for col, i in (("namespace", 1), ("pod", 2), ("container", 3)):
            row[col] = row[col] or m.group(i)
    return row


class LogcliJsonl(Wrapper):
    name = "loki_jsonl"
    mode = "document"
    description = "Grafana Loki: logcli query --output=jsonl ({labels, line, timestamp} per line)"
    DTYPE = pl.Struct(
        {"labels": pl.Struct({n: pl.Utf8 for n in ALL_LABELS}), "line": pl.Utf8, "timestamp": pl.Utf8}
    )
    HEAD = re.compile(r'^\{"labels":\{.*\},"line":".*","timestamp":"\d{4}-\d\d-\d\dT[^"]+"\}$')

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.HEAD)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        dec, ok = json_lines(lines["text"], self.DTYPE)
        ok = ok & dec.struct.field("line").is_not_null()
        df = pl.DataFrame({"line": lines["line"], "raw": lines["text"], "d": dec, "ok": ok})
        d = pl.col("d")
        return split_message_lines(
            records_frame(
                df.select(
                    "line",
                    "ok",
                    pl.when("ok").then(d.struct.field("line")).otherwise("raw").alias("text"),
                    iso_ts(d.struct.field("timestamp")).alias("rec_ts"),
                    *identity_from_struct(d.struct.field("labels")),
                )
            )
        )

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state, newest_first=True)


_LABEL = r'[A-Za-z_][A-Za-z0-9_]*="(?:[^"\\]|\\.)*"'


class LogcliDefault(Wrapper):
    name = "loki_logcli"
    mode = "document"
    description = "Grafana Loki: logcli query default output (<RFC3339 seconds> {labels} line)"
    ANSI = r"(?:\x1b\[[0-9;]*m)?"
    LINE = re.compile(
        rf"^{ANSI}(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)){ANSI} "
        # Labels are `{}` or `{name="value", ...}` (Prometheus label syntax), never a JSON object: a JSON line
        # behind a timestamp (a LiteLLM log under a CI prefix) is not logcli output.
        rf'{ANSI}(\{{\}}|\{{{_LABEL}(?:, ?{_LABEL})*\}}){ANSI} ?(.*)$'
    )

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.LINE)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        g = lines.select("line", "text", m=pl.col("text").str.extract_groups(self.LINE.pattern)).unnest("m")
        g = g.rename({"1": "ts", "2": "labels", "3": "body"})
        lab = pl.col("k")
        fields = {
            n: lab.str.extract(rf'[{{ ,]{re.escape(n)}="((?:[^"\\]|\\.)*)"', 1).str.replace_all(
                r"\\(.)", "$1"
            )
            for n in ALL_LABELS
        }
        # one label set per stream: the label regexes run once per distinct set
        sets = pl.DataFrame({"k": g["labels"].unique().drop_nulls()}).with_columns(
            lab=pl.struct([e.alias(n) for n, e in fields.items()]))
        g = g.join(sets, left_on="labels", right_on="k", how="left", maintain_order="left")
        ok = pl.col("ts").is_not_null()
        return records_frame(
            g.select(
                "line",
                ok.alias("ok"),
                pl.when(ok).then(pl.col("body").str.strip_chars()).otherwise("text").alias("text"),
                iso_ts(pl.col("ts")).alias("rec_ts"),
                *identity_from_struct(pl.col("lab")),
            )
        )

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_lines(self, pieces, state, newest_first=True)


class LokiApi(Wrapper):
    name = "loki_api"
    mode = "document"
    description = "Grafana Loki: /loki/api/v1/query_range JSON (data.result[].stream + values)"
    SNIFF = re.compile(r'"resultType"\s*:\s*"streams"|"result"\s*:\s*\[\s*\{\s*"stream"\s*:\s*\{')
    BATCH = 20_000

    def sniff(self, head: str, path: str) -> float:
        return document_sniff(head, self.SNIFF)

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        # one pass over ijson events: a stream's labels and its values arrive in either key order, so
        # records carry the stream's ordinal (`sid`) and the labels are joined when the spill is read back
        item, stream, value = "data.result.item", "data.result.item.stream", "data.result.item.values.item"
        inner, stream_dot = value + ".item", stream + "."
        slen = len(stream_dot)
        labels: list[dict] = []
        ts: list[str | None] = []
        text: list[str | None] = []
        sids: list[int] = []
        cur: list = []
        sid = -1
        n = 0
        with Spill(newest_first=True) as sp:
            try:
                for events in iter_events(pieces):
                    for prefix, event, val in events:
                        if prefix == inner:
                            if event == "string" or event == "number":
                                cur.append(val)
                        elif prefix == value:
                            if event == "start_array":
                                cur = []
                            elif event == "end_array":
                                ts.append(str(cur[0]) if cur else None)
                                text.append(cur[1] if len(cur) > 1 and isinstance(cur[1], str) else None)
                                sids.append(sid)
                                if len(ts) >= self.BATCH:
                                    n = self._add(sp, ts, text, sids, n)
                        elif prefix == item and event == "start_map":
                            sid += 1
                            labels.append({"_sid": sid})
                        elif prefix.startswith(stream_dot) and event in ("string", "number"):
                            labels[-1][prefix[slen:]] = val
            except DocumentError as exc:
                n = self._add(sp, ts, text, sids, n)
                sp.add(error_record(n + 1, str(exc)).with_columns(sid=pl.lit(None, pl.Int64)))
            n = self._add(sp, ts, text, sids, n)
            schema = {"sid": pl.Int64, **{c: pl.Utf8 for c in LABELS}}
            lab = pl.DataFrame([identity_from_dict(x) for x in labels], schema=schema) if labels else None
            yield from sp.sorted(
                labels=lab, empty="no Loki log streams (data.result[].values) in this JSON document"
            )

    def _add(self, sp: Spill, ts: list, text: list, sids: list, n: int) -> int:
        if not ts:
            return n
        schema = {"ts": pl.Utf8, "text": pl.Utf8, "sid": pl.Int64}
        df = pl.DataFrame({"ts": ts, "text": text, "sid": sids}, schema=schema)
        df = df.with_columns(
            line=pl.int_range(n + 1, n + 1 + df.height, dtype=pl.Int64),
            ok=pl.col("text").is_not_null() & pl.col("ts").str.contains(r"^\d+$"),
            rec_ts=epoch_ts(pl.col("ts"), "ns"),
        )
        df = df.with_columns(text=pl.col("text").fill_null(pl.lit("unreadable Loki value")))
        out = split_message_lines(records_frame(df).with_columns(df["sid"]))
        sp.add(out)
        n += len(ts)
        ts.clear()
        text.clear()
        sids.clear()
        return n


WRAPPERS = [LogcliJsonl(), LogcliDefault(), LokiApi()]
