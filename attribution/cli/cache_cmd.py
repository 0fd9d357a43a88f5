"""`attribution cache`: prompt-cache reuse measured from the logs, the LRU prefix-reuse curve where block hashes
exist, and what the cached prefill is worth (attribution.cache)."""

from __future__ import annotations

from typing import Annotated

import typer

from attribution.cli import options as opt
from attribution.cli.analyses import show, with_settings
from attribution.cli.app import app, connect, engine_flags, resolve
from attribution.errors import UsageError
from attribution.render import Format


@app.command("cache")
def cache_cmd(
    store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
    fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None, config: opt.ConfigOpt = None,
    workload: Annotated[str | None, typer.Option(help="Only this workload.", show_default=False)] = None,
    deployment: Annotated[str | None, typer.Option(help="Only this deployment.", show_default=False)] = None,
    capacity_blocks: Annotated[int | None, typer.Option(
        "--capacity-blocks", help="One LRU capacity in blocks (default: a log-spaced curve, 1, 2, 5, 10, ... "
                                  "blocks up to every distinct block).", show_default=False)] = None,
    block_tokens: Annotated[int, typer.Option(help="Tokens per hashed block (Mooncake traces: 512).")] = 512,
    gpu_hour_cost: Annotated[float | None, typer.Option(
        "--gpu-hour-cost", help="Price of one GPU-hour, for the dollars of prefill time saved.",
        show_default=False)] = None,
    gpus_per_pod: Annotated[int | None, typer.Option(help="GPUs per deployment (default: 1).",
                                                     show_default=False)] = None,
    prefill_tokens_per_s: Annotated[float | None, typer.Option(
        help="Prefill throughput per deployment (default: the p90 of the logged prompt throughput).",
        show_default=False)] = None,
    input_price: Annotated[float | None, typer.Option(
        help="API input price, USD per million tokens, for the dollars of cached reads.", show_default=False)] = None,
    cache_pricing: Annotated[str | None, typer.Option(
        help="Cached-input price: a preset (anthropic-5m, anthropic-1h, openai, gemini-vertex, mistral) or a read "
             "ratio such as 0.1 (default with --input-price: openai).", show_default=False)] = None,
    engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
    spark_conf: opt.SparkConfOpt = None,
) -> None:
    """Prompt-cache reuse: cached-token share per source, workload, deployment and day (token-weighted); where
    requests carry block hashes, the exact LRU hit ratio against cache capacity in four definitions, one
    global cache against one per deployment; prefill GPU time and dollars saved.

    Example: attribution cache --capacity-blocks 10000 --gpu-hour-cost 2.0
    """
    from attribution.analyses import resolve_window
    from attribution.cache.analysis import Economics, cache

    if capacity_blocks is not None and capacity_blocks < 1:
        raise UsageError("--capacity-blocks: a whole number of blocks >= 1")
    if block_tokens < 1:
        raise UsageError("--block-tokens: a whole number >= 1")
    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store, gpu_hour_cost=gpu_hour_cost,
                 gpus_per_pod=gpus_per_pod, prefill_tokens_per_s=prefill_tokens_per_s, input_price=input_price,
                 cache_pricing=cache_pricing)
    con = connect(st, "cache")
    res = cache(con, resolve_window(con, since, until), workload=workload, deployment=deployment,
                capacity_blocks=capacity_blocks, block=block_tokens, econ=Economics.from_settings(st))
    with_settings(res, st, ("gpu_hour_cost", "gpus_per_pod", "prefill_tokens_per_s", "input_price",
                            "cache_pricing", "workloads"))
    show(res, fmt, table, hide=("measured_by_day",))
