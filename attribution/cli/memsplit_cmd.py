"""`attribution memsplit`: where to put the KV / recurrent-state boundary of a hybrid model, from the store
(attribution.memsplit computes it; this parses options and renders the result)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from attribution.cli import options as opt
from attribution.cli.analyses import show, with_settings
from attribution.cli.app import app, connect_window, engine_flags, resolve
from attribution.render import Format

BRIEF = ("summary", "flags", "whatif")  # what the terminal shows unless --all


class Engine(StrEnum):
    sglang = "sglang"
    vllm = "vllm"


@app.command("memsplit")
def memsplit_cmd(
    model: Annotated[
        str | None,
        typer.Option(
            help="Model preset (e.g. qwen3.5-35b-a3b) or config.json path; "
            "default: the model each engine start logged."
        ),
    ] = None,
    engine: Annotated[Engine | None, typer.Option(help="Only engine starts of this engine.")] = None,
    tp: Annotated[
        int | None,
        typer.Option(help="Tensor-parallel size (default: the logged tp_size, else 1).", show_default=False),
    ] = None,
    cache_gib: Annotated[
        float | None,
        typer.Option(help="GiB per GPU the caches had (default: from the log).", show_default=False),
    ] = None,
    kv_cache_dtype: Annotated[
        str | None,
        typer.Option(help="KV cache dtype if not in the logged flags (fp8, bfloat16).", show_default=False),
    ] = None,
    mamba_ssm_dtype: Annotated[
        str | None, typer.Option(help="SSM state dtype if not in the logged flags.", show_default=False)
    ] = None,
    slots_per_request: Annotated[
        int | None,
        typer.Option(help="State slots per running request (default: from the flags).", show_default=False),
    ] = None,
    deployment: Annotated[
        list[str] | None, typer.Option(help="Only this deployment (repeatable).", show_default=False)
    ] = None,
    since: opt.SinceOpt = None,
    until: opt.UntilOpt = None,
    percentile: Annotated[float, typer.Option(help="Demand percentile the pools are sized for.")] = 0.99,
    headroom: Annotated[float, typer.Option(help="Extra share on top of that demand.")] = 0.10,
    kv_low: Annotated[
        float, typer.Option(help="KV usage below which the KV pool counts as having room.")
    ] = 0.8,
    whatif: Annotated[bool, typer.Option(help="Replay the arrivals under both splits (simulator).")] = True,
    service_model: Annotated[
        str | None,
        typer.Option(
            help="Simulator engine profile for the replay (default: the one nearest the engine's version).",
            show_default=False,
        ),
    ] = None,
    replay: Annotated[
        str | None,
        typer.Option(
            help="Replay this trace's arrivals in the what-if instead of each start's own (an `attribution "
            "replay` export, a Mooncake, BurstGPT or Azure trace).",
            show_default=False,
        ),
    ] = None,
    store: opt.StoreOpt = None,
    config: opt.ConfigOpt = None,
    fmt: opt.FormatOpt = Format.table,
    table: opt.TableOpt = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Print every table, not only summary, flags, what-if.")
    ] = False,
    # --engine names the inference engine here: where the queries run is --analysis-engine
    analysis_engine: Annotated[str | None, typer.Option(
        "--analysis-engine", help="Where the demand inputs are computed: duckdb (default) or spark (the "
                                  "--engine of the other commands; default: $ATTRIBUTION_ENGINE, else the "
                                  "`engine` setting).", show_default=False)] = None,
    spark_master: opt.SparkMasterOpt = None,
    spark_conf: opt.SparkConfOpt = None,
) -> None:
    """The current KV / state split of each engine start, how often the state pool (or running cap) bound
    while the KV pool had room, the split the traffic asks for with the flags that enact it, and a replay of
    the measured arrivals under both.

    Example: attribution memsplit --model qwen3.5-35b-a3b --engine vllm --cache-gib 5 --kv-cache-dtype fp8
    """
    from attribution.memory.profile import GiB
    from attribution.memsplit import Overrides, Settings, memsplit

    ov = Overrides(
        cache_bytes=None if cache_gib is None else int(cache_gib * GiB),
        tp=tp,
        kv_cache_dtype=kv_cache_dtype,
        mamba_ssm_dtype=mamba_ssm_dtype,
        slots_per_request=slots_per_request,
    )
    st = resolve(config, **engine_flags(analysis_engine, spark_master, spark_conf), store=store, model=model)
    con, w = connect_window(st, "memsplit", since, until)  # only the window's days (attribution.pruning)
    res = memsplit(
        con,
        st.model,
        engine=engine and engine.value,
        deployments=deployment,
        since=w.since if w else since,
        until=w.until if w else until,
        overrides=ov,
        run_whatif=whatif,
        service_model=service_model,
        replay=replay,
        settings=Settings(kv_low=kv_low, percentile=percentile, headroom=headroom),
    )
    with_settings(res, st, ("model", "workloads"))
    hide = () if show_all else tuple(n for n in res.tables if n not in BRIEF)
    show(res, fmt, table, hide=hide)
