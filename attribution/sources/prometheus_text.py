"""Prometheus text exposition (format 0.0.4) and OpenMetrics 1.0 `/metrics` snapshots -> metric_histograms,
metric_counters and engine_steps kind `scrape` (source `prometheus_text`; rows as in prom_common).

Lines are parsed with one Polars regex per chunk; `# TYPE` declarations are remembered across chunks in
`ctx.state`. A family's type comes from `# TYPE` (a sample `foo_bucket` / `foo_total` belongs to the family
`foo`, or to `foo_total` as prometheus_client declares it in the 0.0.4 format), else from its name as for
API exports. `_created` series, `# HELP`/`# UNIT`/`# EOF`, summaries, info metrics and gauges without an
engine_steps column make no row (the census counts them as skipped). Exemplars (after ` # `) are ignored.
Scrape time, in order: the sample's own timestamp (milliseconds in the 0.0.4 format, seconds in OpenMetrics:
told apart by size), else the file name `metrics-<unix seconds | ISO time>.prom|.txt[.gz]`, else the file's
mtime (then an ingest_errors row says so). A directory of snapshots is a series of scrapes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.prom_common import (
    LABEL,
    SAMPLES_SCHEMA,
    deployment_labels,
    family_of,
    name_type,
    samples_to_rows,
)

_NAME = r"[A-Za-z_:][A-Za-z0-9_:]*"
_LABELS = r'(?:[^"}]|"(?:[^"\\]|\\.)*")*'
SAMPLE_RE = rf"^({_NAME})(?:\{{({_LABELS})\}})?[ \t]+([^ \t#]+)(?:[ \t]+([-+]?[0-9][0-9.eE+-]*))?[ \t]*(?:#.*)?$"
TYPE_RE = rf"^#[ \t]*TYPE[ \t]+({_NAME})[ \t]+([a-z]+)[ \t]*$"
_LABEL_RE = r'([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"'
_SAMPLE_PY = re.compile(SAMPLE_RE)
_TYPE_PY = re.compile(TYPE_RE, re.M)
# `metrics-1764633600.prom`, `metrics-2026-12-01T10:00:00Z.txt.gz`, `metrics_20261201T100000Z.prom`
_FILE_TIME_RE = re.compile(r"metrics[-_]([0-9T:.\-+Z]+?)\.(?:prom|txt)(?:\.gz)?$", re.I)
_MS_THRESHOLD = 1e11  # a sample timestamp above this is in milliseconds (1e11 s is the year 5138)


def file_time(path: str) -> float | None:
    """The scrape time a snapshot's file name states (POSIX seconds), or None."""
    m = _FILE_TIME_RE.search(Path(path).name)
    if not m:
        return None
    text = m.group(1)
    if re.fullmatch(r"\d{9,11}(?:\.\d+)?", text):
        return float(text)
    iso = re.sub(r"^(\d{4})-?(\d{2})-?(\d{2})T(\d{2})[:\-]?(\d{2})[:\-]?(\d{2})", r"\1-\2-\3T\4:\5:\6", text)
    try:
        ts = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).timestamp()


def _unescape(v: pl.Expr) -> pl.Expr:
    # \\ first held aside, so `\\n` stays a backslash and an n
    return (v.str.replace_all(r"\\", "\x00", literal=True).str.replace_all(r"\"", '"', literal=True)
            .str.replace_all(r"\n", "\n", literal=True).str.replace_all("\x00", "\\", literal=True))


class PrometheusText(Source):
    name = "prometheus_text"
    kind = "engine"
    description = "Prometheus text format / OpenMetrics /metrics snapshots (vLLM, SGLang)"

    def sniff(self, head: str, path: str) -> float:
        lines = [ln for ln in head.splitlines()[:400] if ln.strip()]
        if not lines:
            return 0.0
        samples = [ln for ln in lines if not ln.startswith("#")]
        good = sum(bool(_SAMPLE_PY.match(ln)) for ln in samples[:200])
        share = good / max(min(len(samples), 200), 1)
        if not good:
            return 0.0
        # `# TYPE` lines and mostly sample lines (a damaged snapshot is still one)
        if share >= 0.75 and _TYPE_PY.search(head) and (lines[0].startswith("# ") or _SAMPLE_PY.match(lines[0])):
            return 0.95
        named = _FILE_TIME_RE.search(Path(path).name) or path.endswith((".prom", ".prom.gz"))
        if share >= 0.9 and named:
            return 0.7
        return 0.0

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        df = lines.select("line", pl.col("text").str.strip_chars_end("\r\n \t"))
        types = dict(ctx.state.get("types", {}))
        decl = df.select(pl.col("text").str.extract_groups(TYPE_RE).alias("g")).unnest("g").drop_nulls()
        types.update(zip(decl["1"].to_list(), decl["2"].to_list(), strict=True))
        ctx.state["types"] = types
        body = df.filter(~pl.col("text").str.starts_with("#") & (pl.col("text").str.strip_chars() != ""))
        parsed = body.with_columns(pl.col("text").str.extract_groups(SAMPLE_RE).alias("g")).unnest("g")
        parsed = parsed.with_columns(pl.col("3").cast(pl.Float64, strict=False).alias("value"))
        bad = pl.col("1").is_null() | (pl.col("value").is_null())
        res.add_errors(parsed.filter(bad).select(
            "line", pl.when(pl.col("1").is_null()).then(pl.lit("not a Prometheus sample line"))
            .otherwise(pl.lit("sample value is not a number")).alias("reason"),
            pl.col("text").str.slice(0, 200).alias("sample")))
        parsed = parsed.filter(~bad)
        if parsed.height == 0:
            return res

        fallback = ctx.state.get("file_ts")
        if fallback is None:
            named = file_time(ctx.path)
            fallback = named if named is not None else ctx.file_mtime
            ctx.state["file_ts"] = fallback
            ctx.state["ts_from"] = "file name" if named is not None else "mtime"
        own = pl.col("4").cast(pl.Float64, strict=False)
        secs = pl.when(own > _MS_THRESHOLD).then(own / 1000).otherwise(own)
        if ctx.state["ts_from"] == "mtime" and parsed["4"].is_null().any() and not ctx.state.get("said_mtime"):
            ctx.state["said_mtime"] = True
            first = int(parsed.filter(pl.col("4").is_null())["line"][0])
            res.add_errors(pl.DataFrame({"line": [first], "reason": [
                "no sample timestamp and no time in the file name (metrics-<unix or ISO time>.prom): the scrape "
                "time is the file's mtime"], "sample": [None]}))

        labels = (pl.col("2").fill_null("").str.extract_all(_LABEL_RE).list.eval(pl.struct(
            pl.element().str.extract(_LABEL_RE, 1).alias("k"),
            _unescape(pl.element().str.extract(_LABEL_RE, 2)).alias("v"))).cast(pl.List(LABEL)))
        parsed = parsed.with_columns(
            pl.col("1").alias("name"), labels.alias("labels"),
            pl.from_epoch((pl.coalesce(secs, pl.lit(fallback)) * 1e6).round(0).cast(pl.Int64), "us")
            .dt.replace_time_zone("UTC").alias("ts"))
        buckets = set(ctx.state.get("bucket_families", []))
        buckets.update(parsed.filter(pl.col("name").str.ends_with("_bucket"))
                       .select(family_of(pl.col("name")))["name"].unique().to_list())
        ctx.state["bucket_families"] = sorted(buckets)
        tmap = pl.DataFrame({"_n": list(types), "_t": list(types.values())}, schema={"_n": pl.Utf8, "_t": pl.Utf8})
        base = pl.col("name").str.replace(r"_(?:bucket|sum|count|total|created|gsum|gcount|info)$", "")
        parsed = (parsed.with_columns(base.alias("_base"))
                  .join(tmap.rename({"_t": "_t_exact"}), left_on="name", right_on="_n", how="left")
                  .join(tmap.rename({"_t": "_t_base"}), left_on="_base", right_on="_n", how="left"))
        by_name = name_type(pl.col("name"), family_of(pl.col("name")).is_in(sorted(buckets)))
        declared = pl.coalesce(pl.col("_t_exact"), pl.col("_t_base"))
        ftype = (pl.when(pl.col("name").str.ends_with("_created")).then(pl.lit("created"))
                 .when(pl.col("_t_base") == "histogram").then(pl.lit("histogram"))
                 .when(pl.col("_t_base") == "counter").then(pl.lit("counter"))
                 .when(declared.is_in(["counter", "gauge"])).then(declared)
                 .when(declared.is_null() | declared.is_in(["untyped", "unknown"])).then(by_name)
                 .otherwise(declared))  # summary, info, stateset, gaugehistogram: no table
        samples = parsed.select(*[(ftype if c == "ftype" else pl.col(c)).alias(c) for c in SAMPLES_SCHEMA])
        samples_to_rows(samples, deployment_labels(ctx.options), res)
        return res


SOURCES = [PrometheusText()]
