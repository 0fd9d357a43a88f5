"""Prometheus samples -> rows, shared by `prometheus_text` (/metrics snapshots) and `prometheus_api` (HTTP API
exports): histograms to `metric_histograms`, counters to `metric_counters`, the engines' known gauges to
`engine_steps` kind `scrape`. The input is a long frame of samples (line, ts, name, ftype, labels, value); the
sources own reading their format and deciding each family's type.

Deployment = the first label of the `deployment_labels` setting present (default pod, then instance), else the
ingest's file or folder naming; model = `model_name`; engine = the namespace (vllm:, sglang:); series = the
other labels (not le, model_name, the deployment label) sorted `k=v` joined by `,`.
"""

from __future__ import annotations

import polars as pl

from attribution.schema import PolarsType
from attribution.sources.base import ParseResult

DEFAULT_DEPLOYMENT_LABELS = ("pod", "instance")
LABEL = pl.Struct({"k": pl.Utf8, "v": pl.Utf8})
SAMPLES_SCHEMA: dict[str, PolarsType] = {"line": pl.Int64, "ts": pl.Datetime("us", "UTC"), "name": pl.Utf8, "ftype": pl.Utf8,
                  "labels": pl.List(LABEL), "value": pl.Float64}
ENGINE_INDEX_LABELS = ("engine", "dp_rank")  # vLLM V1 `engine="0"`, SGLang `dp_rank` under data parallelism

# Gauges with an engine_steps column (names read from source: vLLM vllm/engine/metrics.py (V0) and
# vllm/v1/metrics/loggers.py (V1); SGLang metrics/collector.py; versions in tests/test_prometheus_names.py). vLLM's usages
# and hit rates are fractions ("1 means 100 percent"), SGLang's token_usage is used/total, also a fraction.
GAUGES: dict[str, str] = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_swapped": "swapped",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",  # the V0 name, a deprecated alias in V1 up to 0.14
    "vllm:cpu_cache_usage_perc": "cpu_kv_usage",
    "vllm:gpu_prefix_cache_hit_rate": "prefix_hit_rate",
    "vllm:cpu_prefix_cache_hit_rate": "cpu_prefix_hit_rate",
    "vllm:avg_prompt_throughput_toks_per_s": "prompt_tput",
    "vllm:avg_generation_throughput_toks_per_s": "gen_tput",
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "waiting",
    "sglang:token_usage": "kv_usage",
    "sglang:num_used_tokens": "kv_tokens",
    "sglang:mamba_usage": "state_usage",
    "sglang:swa_token_usage": "swa_usage",
    "sglang:cache_hit_rate": "prefix_hit_rate",
    "sglang:gen_throughput": "gen_tput",
}
_STEP_COLUMNS = sorted(set(GAUGES.values()))
_NAMESPACE_RE = r"^(vllm|sglang)[:_]"


def deployment_labels(options: dict) -> tuple[str, ...]:
    """The labels naming a deployment, in order (the ingest passes the `deployment_labels` setting)."""
    labels = options.get("deployment_labels")
    return tuple(labels) if labels else DEFAULT_DEPLOYMENT_LABELS


def name_type(names: pl.Expr, bucket_families: pl.Expr) -> pl.Expr:
    """A family type from the exposed name alone (API exports carry no `# TYPE`): `_bucket` -> histogram (one
    without `le` is then an error); `_sum`/`_count` whose family has `_bucket` series (`bucket_families`: a
    bool expression) -> histogram; `_total` -> counter; `_created` -> created (skipped); else gauge."""
    return (pl.when(names.str.ends_with("_created")).then(pl.lit("created"))
            .when(names.str.ends_with("_bucket")).then(pl.lit("histogram"))
            .when(names.str.contains(r"_(?:sum|count)$") & bucket_families).then(pl.lit("histogram"))
            .when(names.str.ends_with("_total")).then(pl.lit("counter"))
            .otherwise(pl.lit("gauge")))


def family_of(names: pl.Expr) -> pl.Expr:
    """The histogram family of a `_bucket`/`_sum`/`_count` sample name."""
    return names.str.replace(r"_(?:bucket|sum|count)$", "")


def one_tp_rank(df: pl.DataFrame) -> pl.DataFrame:
    """The samples of the lowest `tp_rank` among series that differ in nothing else. SGLang exports its
    scheduler metrics from attention-TP rank 0 only, unless `--enable-metrics-for-all-schedulers`: then every
    TP rank of a scheduler group exports the same requests' gauges and histograms (labels model_name,
    engine_type, tp_rank, pp_rank, dp_rank; python/sglang/srt/managers/scheduler.py), which summed would
    count each request once per rank. Data-parallel ranks keep their own series (dp_rank differs)."""
    if df["_l_tp_rank"].is_null().all():
        return df
    tp = pl.col("_l_tp_rank").cast(pl.Int64, strict=False)
    others = pl.col("series").str.replace_all(r"(?:^|,)tp_rank=[^,]*", "")
    group = ["ts", "deployment", "name", "_l_le", "_others"]
    return (df.with_columns(others.alias("_others"))
            .filter(tp.is_null() | (tp == tp.min().over(group)))
            .drop("_others"))


def _errors(df: pl.DataFrame, reason: pl.Expr) -> pl.DataFrame:
    return df.select(pl.col("line"), reason.alias("reason"),
                     pl.concat_str(pl.col("name"), pl.lit(" "), pl.col("value").cast(pl.Utf8)).alias("sample"))


def samples_to_rows(samples: pl.DataFrame, dep_labels: tuple[str, ...], res: ParseResult) -> None:
    """Add the rows of `samples` (SAMPLES_SCHEMA; ftype histogram / counter / gauge / anything else, which
    makes no row) to `res`, and the errors: a non-finite value, a negative counter or bucket, a bucket
    without `le`."""
    if samples.height == 0:
        return
    df = samples.select(pl.col(c).cast(t) for c, t in SAMPLES_SCHEMA.items()).with_row_index("_r")
    finite = pl.col("value").is_finite()
    res.add_errors(_errors(df.filter(~finite & pl.col("ftype").is_in(["histogram", "counter", "gauge"])),
                           pl.lit("sample value is not a finite number: dropped")))
    df = df.filter(finite)
    negative = (pl.col("value") < 0) & pl.col("ftype").is_in(["histogram", "counter"])
    res.add_errors(_errors(df.filter(negative), pl.lit("negative counter or bucket value: dropped")))
    df = df.filter(~negative)
    lab = (df.select("_r", "labels").explode("labels").drop_nulls("labels").unnest("labels")
           .filter(pl.col("k").is_not_null()))

    def label(key: str) -> pl.DataFrame:
        return lab.filter(pl.col("k") == key).group_by("_r").agg(pl.col("v").first().alias(f"_l_{key}"))

    dep_cols = []
    for key in dict.fromkeys(dep_labels):
        df = df.join(label(key), on="_r", how="left")
        dep_cols.append(key)
    dep = pl.coalesce([pl.col(f"_l_{k}") for k in dep_cols]) if dep_cols else pl.lit(None, pl.Utf8)
    dep_key = pl.coalesce([pl.when(pl.col(f"_l_{k}").is_not_null()).then(pl.lit(k)) for k in dep_cols]) \
        if dep_cols else pl.lit(None, pl.Utf8)
    for key in ("model_name", "le", *ENGINE_INDEX_LABELS):
        if key not in dep_cols:
            df = df.join(label(key), on="_r", how="left")
    df = df.with_columns(dep.alias("deployment"), dep_key.alias("_dep_key"),
                         pl.col("name").str.extract(_NAMESPACE_RE, 1).alias("engine"),
                         pl.col("_l_model_name").alias("model"))
    series = (lab.join(df.select("_r", "_dep_key"), on="_r")
              .filter(~pl.col("k").is_in(["le", "model_name", "__name__"])
                      & (pl.col("k") != pl.col("_dep_key")).fill_null(True))
              .sort("_r", "k")
              .group_by("_r").agg(pl.concat_str(pl.col("k"), pl.lit("="), pl.col("v")).str.join(",").alias("series")))
    df = df.join(series, on="_r", how="left").with_columns(pl.col("series").fill_null(""))
    df = one_tp_rank(df if "tp_rank" in dep_cols else df.join(label("tp_rank"), on="_r", how="left"))
    common = ["ts", "line", "deployment", "engine", "model", "series"]

    hist = df.filter(pl.col("ftype") == "histogram").with_columns(
        pl.col("name").str.extract(r"_(bucket|sum|count)$", 1).alias("part"),
        pl.col("_l_le").cast(pl.Float64, strict=False).alias("le"))
    bad_le = (pl.col("part") == "bucket") & pl.col("le").is_null()
    res.add_errors(_errors(hist.filter(bad_le | pl.col("part").is_null()),
                           pl.lit("histogram sample without a part (_bucket with le, _sum, _count): dropped")))
    hist = hist.filter(~bad_le & pl.col("part").is_not_null())
    res.add("metric_histograms", hist.select(
        *common, family_of(pl.col("name")).alias("metric"), "part",
        pl.when(pl.col("part") == "bucket").then(pl.col("le")).alias("le"), "value"))
    res.add("metric_counters", df.filter(pl.col("ftype") == "counter").select(
        *common, pl.col("name").alias("metric"), "value"))

    gauges = df.filter((pl.col("ftype") == "gauge") & pl.col("name").is_in(list(GAUGES)))
    if gauges.height:
        eidx = pl.coalesce([pl.col(f"_l_{k}") for k in ENGINE_INDEX_LABELS]).cast(pl.Int64, strict=False)
        gauges = gauges.with_columns(pl.col("name").replace_strict(GAUGES).alias("_col"), eidx.alias("engine_index"))
        res.add_consumed(gauges["line"])  # one row per scrape and engine: its other gauges go into it
        cols = [c for c in _STEP_COLUMNS if c in set(gauges["_col"])]
        steps = gauges.group_by("ts", "deployment", "engine_index", maintain_order=True).agg(
            pl.col("line").min(), pl.col("engine").drop_nulls().first(),
            *(pl.col("value").filter(pl.col("_col") == c).first().alias(c) for c in cols))
        # counts stay floats here: the ingest checks them against their domain (whole numbers)
        steps = steps.with_columns(pl.lit("scrape").alias("kind"))
        res.add("engine_steps", steps)
