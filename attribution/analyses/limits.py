"""The running limit of each pod (how many requests the engine lets run at once) and where it comes from: the
engine start's own setting (vLLM's max_num_seqs, SGLang's max_running_requests, which SGLang also logs when it
derives it from the pool), else the engine's documented default, labelled as such. vLLM's startup `Maximum
concurrency for N tokens per request: Xx` is a KV-pool figure at the maximum length, kept in its own column."""

from __future__ import annotations

import polars as pl

# vLLM's default max_num_seqs when the flag is unset (EngineArgs): 256, and 1024 for the V1 engine on GPUs
# with at least 70 GiB other than the A100 (vLLM >= 0.9). The log does not say the GPU's memory, so the
# larger default is assumed only where more than 256 requests were seen running.
VLLM_DEFAULT_MAX_NUM_SEQS = 256
VLLM_LARGE_GPU_MAX_NUM_SEQS = 1024

LIMIT_SOURCES = {
    "configured": "the engine start's max_num_seqs (vLLM) or max_running_requests (SGLang, set or derived and "
    "logged at start)",
    "vllm default": f"max_num_seqs unset: vLLM's default {VLLM_DEFAULT_MAX_NUM_SEQS} "
    f"({VLLM_LARGE_GPU_MAX_NUM_SEQS} on >= 70 GiB GPUs, assumed where more than {VLLM_DEFAULT_MAX_NUM_SEQS} ran)",
    "observed peak": "no limit in the logs: the highest number of requests seen running (a lower bound)",
}


def with_limits(deps: pl.DataFrame, observed_peak: pl.DataFrame | None = None) -> pl.DataFrame:
    """`deps` (concurrency_sources_by_deployment rows) with `running_limit` and `limit_source` (configured,
    vllm default, observed peak, or null). `observed_peak` (deployment, observed_peak) supplies a peak where
    the engine's step lines do not (steps_peak_running is used first)."""
    df = deps
    if observed_peak is not None and observed_peak.height:
        df = df.join(observed_peak.select("deployment", pl.col("observed_peak").alias("_peak")), on="deployment",
                     how="left")
    else:
        df = df.with_columns(pl.lit(None, pl.Float64).alias("_peak"))
    seen = pl.max_horizontal(pl.col("steps_peak_running").cast(pl.Float64), pl.col("_peak").cast(pl.Float64))
    vllm = pl.col("engine").fill_null("").str.to_lowercase() == "vllm"
    default = (pl.when(seen > VLLM_DEFAULT_MAX_NUM_SEQS).then(pl.lit(VLLM_LARGE_GPU_MAX_NUM_SEQS))
               .otherwise(pl.lit(VLLM_DEFAULT_MAX_NUM_SEQS)))
    configured = pl.col("configured_max_running").is_not_null()
    return df.with_columns(
        pl.when(configured).then(pl.col("configured_max_running"))
        .when(vllm).then(default)
        .when(seen.is_not_null() & (seen > 0)).then(seen.cast(pl.Int64))
        .cast(pl.Int64).alias("running_limit"),
        pl.when(configured).then(pl.lit("configured"))
        .when(vllm).then(pl.lit("vllm default"))
        .when(seen.is_not_null() & (seen > 0)).then(pl.lit("observed peak"))
        .cast(pl.Utf8).alias("limit_source"),
    ).drop("_peak")


def describe(limit: int | None, source: str | None) -> str:
    """`limit 13 (configured)`-style text for a pod's running limit."""
    if limit is None:
        return "no running limit known"
    return f"running limit {limit:,} ({source})"


def with_step_share(deps: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """`deps` (with running_limit) with `at_limit_share_of_busy_steps`: of the engine step lines printed while
    a request ran or waited (`steps`: running_by_step_lines rows), the share at running_limit or above."""
    if not steps.height:
        return deps.with_columns(pl.lit(None, pl.Float64).alias("at_limit_share_of_busy_steps"))
    share = (steps.join(deps.select("deployment", "running_limit"), on="deployment", how="inner")
             .group_by("deployment").agg(
                 ((pl.col("running") >= pl.col("running_limit")).cast(pl.Int64) * pl.col("lines")).sum()
                 .truediv(pl.col("lines").sum()).alias("at_limit_share_of_busy_steps")))
    return deps.join(share, on="deployment", how="left")
