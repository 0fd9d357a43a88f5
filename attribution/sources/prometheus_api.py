"""Prometheus HTTP API exports -> metric_histograms, metric_counters and engine_steps kind `scrape` (source
`prometheus_api`; rows as in prom_common): `/api/v1/query_range` (matrix) and `/api/v1/query` (vector) JSON
as saved by curl (`{"status":"success","data":{"resultType":...,"result":[...]}}`), and the bare result array
`promtool query range -o json` prints (it encodes the model.Matrix alone).

The document is streamed with ijson one series at a time; a series' samples become columns through NumPy,
never a Python loop over samples. `line` is the series' 1-based index in the result (its census record, shown
by its metric name). Values are strings ("NaN", "+Inf" possible); the family type comes from the name (no
`# TYPE` in an export): `_bucket` -> histogram part, `_sum`/`_count` with a `_bucket` sibling in the file ->
histogram, `_total` -> counter, else gauge. A series without `__name__` (the result of an expression such as
`rate(...)`, not raw samples) is an error: only raw series carry what the tables hold.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl

from attribution.census import doc_records
from attribution.sources import prom_common as prom
from attribution.sources.base import ParseContext, ParseResult, Source, document_start, merged

BATCH_SAMPLES = 500_000  # samples parsed at a time, about (memory is bounded by a batch)
_BARE_RE = re.compile(r'^\[\s*(?:\]|\{\s*"(?:metric|values?)"\s*:)')
_TS = pl.Datetime("us", "UTC")


def _error(line: int, reason: str) -> pl.DataFrame:
    return pl.DataFrame({"line": [line], "reason": [reason], "sample": [None]},
                        schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8})


class PrometheusApi(Source):
    name = "prometheus_api"
    kind = "engine"
    mode = "whole"
    description = "Prometheus HTTP API query_range / query JSON (curl, promtool -o json)"

    def sniff(self, head: str, path: str) -> float:
        s = head.lstrip("\ufeff \t\r\n")
        top = s[:4000]
        if s.startswith("{") and '"resultType"' in top and '"result"' in top \
                and ('"matrix"' in top or '"vector"' in top):
            return 0.95
        if _BARE_RE.match(s) and ('"values"' in top or '"value"' in top) and '"metric"' in top:
            return 0.9
        return 0.0

    def parse_whole(self, data: bytes, ctx: ParseContext) -> ParseResult:
        """The document in memory (tests, previews): the streamed batches merged into one result."""
        return merged(self.parse_document([data], ctx))

    def parse_document(self, pieces: Iterable[bytes], ctx: ParseContext) -> Iterator[ParseResult]:
        from attribution.wrappers import DocumentError, iter_items

        first, it = document_start(pieces)
        prefix = "item" if first.lstrip()[:1] == b"[" else "data.result.item"
        batch = _Batch(prom.deployment_labels(ctx.options))
        line = 0
        try:
            for items in iter_items(itertools.chain([first], it), prefix):
                for item in items:  # a loop over series; the samples of each go to NumPy at once
                    line += 1
                    batch.add(line, item)
                    if batch.samples >= BATCH_SAMPLES:
                        yield batch.flush()
        except DocumentError as exc:
            out = batch.flush(final=True)
            out.add_errors(_error(line + 1, str(exc)))
            yield out
            return
        if line == 0:
            batch.res.add_errors(_error(1, "no series in the document (an empty result, or not a query "
                                           "result: status error?)"))
        yield batch.flush(final=True)


class _Batch:
    """Series collected until BATCH_SAMPLES samples, then turned into rows in one go."""

    def __init__(self, dep_labels: tuple[str, ...]) -> None:
        self.dep_labels = dep_labels
        self.buckets: set[str] = set()  # histogram families with `_bucket` series so far
        self.held: list[pl.DataFrame] = []  # `_sum`/`_count` samples whose family has no bucket yet
        self.held_records: list[dict] = []  # ... and their census records, counted with their rows
        self._reset()

    def _reset(self) -> None:
        self.res = ParseResult()
        self.series: list[dict] = []
        self.ts: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.lines: list[np.ndarray] = []
        self.samples = 0

    def add(self, line: int, item: object) -> None:
        if not isinstance(item, dict):
            item = {}
        metric = item.get("metric")
        name = metric.get("__name__") if isinstance(metric, dict) else None
        self.series.append({"line": line, "text": str(name) if name else "<series without __name__>"})
        if not isinstance(metric, dict):
            self.res.add_errors(_error(line, "a result entry without a `metric` object"))
            return
        if not name:
            self.res.add_errors(_error(line, "series without __name__ (an expression's result, not raw samples)"))
            return
        values = item.get("values")
        if values is None and item.get("value") is not None:
            values = [item["value"]]
        try:
            arr = np.asarray(values if values is not None else [], dtype=object)
            if arr.size == 0:
                return
            if arr.ndim != 2 or arr.shape[1] != 2:
                raise ValueError("not [time, value] pairs")
            ts = arr[:, 0].astype(np.float64)
        except (TypeError, ValueError) as exc:
            self.res.add_errors(_error(line, f"series {name}: samples are not [time, \"value\"] pairs ({exc})"))
            return
        self.ts.append(ts)
        self.values.append(arr[:, 1].astype(str))
        self.lines.append(np.full(len(ts), line, dtype=np.int64))
        labels = [{"k": str(k), "v": str(v)} for k, v in metric.items() if k != "__name__"]
        self.series[-1].update(name=str(name), labels=labels)
        self.samples += len(ts)

    def flush(self, final: bool = False) -> ParseResult:
        res = self.res
        frames = []
        if self.ts:
            meta = pl.DataFrame([s for s in self.series if "name" in s],
                                schema={"line": pl.Int64, "text": pl.Utf8, "name": pl.Utf8,
                                        "labels": pl.List(prom.LABEL)}).drop("text")
            raw = pl.DataFrame({"line": np.concatenate(self.lines), "secs": np.concatenate(self.ts),
                                "v": np.concatenate(self.values)})
            frames.append(raw.join(meta, on="line", how="left").select(
                "line", (pl.col("secs") * 1e6).round(0).cast(pl.Int64).cast(_TS).alias("ts"), "name", "labels",
                pl.col("v").cast(pl.Float64, strict=False).alias("value"), pl.col("v")))
        df = pl.concat(frames) if frames else None
        if df is not None:
            bad = df.filter(pl.col("value").is_null())
            res.add_errors(bad.group_by("line").agg(pl.col("v").first().alias("sample"), pl.len().alias("n")).select(
                "line", pl.format("{} sample value(s) not a number", pl.col("n")).alias("reason"), "sample"))
            df = df.filter(pl.col("value").is_not_null()).drop("v")
            self.buckets.update(df.filter(pl.col("name").str.ends_with("_bucket"))
                                .select(prom.family_of(pl.col("name")))["name"].unique().to_list())
            sibling = prom.family_of(pl.col("name")).is_in(sorted(self.buckets))
            parts = pl.col("name").str.contains(r"_(?:sum|count)$")
            if not final:  # a `_sum`/`_count` whose buckets may still come: decided at the end
                held = df.filter(parts & ~sibling)
                self.held.append(held)
                lines = set(held["line"].to_list())
                self.held_records += [s for s in self.series if s["line"] in lines]
                self.series = [s for s in self.series if s["line"] not in lines]
                df = df.filter(~(parts & ~sibling))
        if final and self.held:
            df = pl.concat([d for d in (df, *self.held) if d is not None])
            self.series += self.held_records
            self.held, self.held_records = [], []
        records = [{"line": s["line"], "text": s["text"]} for s in self.series]
        if records:
            res.records = doc_records(pl.DataFrame(records, schema={"line": pl.Int64, "text": pl.Utf8}),
                                      "prometheus_api")
        if df is not None and df.height:
            sibling = prom.family_of(pl.col("name")).is_in(sorted(self.buckets))
            ftype = prom.name_type(pl.col("name"), sibling).alias("ftype")
            samples = df.with_columns(ftype).select(list(prom.SAMPLES_SCHEMA))
            prom.samples_to_rows(samples, self.dep_labels, res)
        if res.errors is not None and res.errors.height:  # one error per series and reason, counted
            res.errors = res.errors.group_by("line", "reason", maintain_order=True).agg(
                pl.col("sample").first(), pl.len().alias("n")).select(
                "line", pl.when(pl.col("n") > 1).then(pl.format("{} ({} samples)", pl.col("reason"), pl.col("n")))
                .otherwise(pl.col("reason")).alias("reason"), "sample")
        self._reset()
        return res


SOURCES = [PrometheusApi()]
