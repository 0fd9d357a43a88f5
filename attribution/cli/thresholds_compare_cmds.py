"""Commands that attribute a change to engine features: `thresholds` (which features' thresholds the traffic
crossed) and `compare` (two cohorts side by side, and which features can explain the difference). Each
calls one library function; the terminal view shows the main columns, JSON and CSV carry every column."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import polars as pl
import typer
from rich.markup import escape

from attribution import render
from attribution.choices import CohortBy
from attribution.cli import options as opt
from attribution.cli.analyses import select, show_data, table_of, with_settings
from attribution.cli.app import app, engine_flags, resolve
from attribution.columns import is_share
from attribution.errors import UsageError
from attribution.render import Format

if TYPE_CHECKING:
    from attribution.analyses import Analysis

ThresholdOpt = Annotated[list[str] | None, typer.Option(
    "--threshold", help="Add a feature, \"NAME: QUANTITY OP VALUE\" (e.g. \"sparse_prefill: kv_len_at_prefill > "
                        "95000\"), or set a known one, \"vllm.chunked_prefill = 16384\". Repeatable.",
    show_default=False)]
CatalogueOpt = Annotated[list[Path] | None, typer.Option(
    "--catalogue", help="A TOML file of more features (the layout of the bundled thresholds/catalogue.toml).",
    show_default=False)]
FeatureOpt = Annotated[list[str] | None, typer.Option(
    "--feature", help="Only these features (ids, `vllm.` prefixes or globs). Repeatable.", show_default=False)]
GpuOpt = Annotated[float | None, typer.Option(
    "--gpu-mem-gib", help="GPU memory per device, for defaults that depend on it (default: the catalogue's "
                          "assumption, 80 GiB).", show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="Also print the detail tables.")]

# Columns of the terminal view; JSON and CSV carry all of them.
VIEW = {
    "requests": ["feature", "quantity", "op", "threshold", "status", "requests", "crossed", "share_of_engine_requests",
                 "share_of_all_requests", "prefill_token_share_of_all_requests", "method"],
    "by_workload": ["feature", "workload", "requests", "crossed", "share_of_engine_requests", "share_of_all_requests",
                    "prefill_token_share_of_all_requests"],
    "by_day": ["feature", "day", "requests", "crossed", "share_of_engine_requests", "share_of_all_requests",
               "prefill_token_share_of_all_requests"],
    "steps": ["feature", "deployment", "quantity", "op", "threshold", "rows", "crossed_rows", "time_share",
              "episodes", "longest_episode_s", "max_value", "method"],
    "summary": ["metric", "percentile", "before", "after", "ratio", "ci_95", "raw_ratio", "verdict", "n_before",
                "n_after"],
    "attribution": ["feature", "metric", "threshold", "share_before", "share_after", "crossing", "others",
                    "verdict", "explanation"],
    "capacity": ["deployment", "completed_per_day_before", "completed_per_day_after", "capacity_per_day_before",
                 "capacity_per_day_after", "capacity_ratio"],
    "cohorts": ["cohort", "definition", "requests", "deployments", "engines", "first_arrival", "last_arrival"],
}
DETAIL = {"thresholds": ["settings", "steps_by_day", "not_counted"], "compare": ["by_workload", "by_bucket", "mix"]}


def _pct(v: object) -> str | None:
    if not isinstance(v, float) or v != v:
        return None
    return "0%" if v == 0 else f"{v:.1%}" if v >= 0.001 else f"{v * 100:.2g}%"


def _ci(lo: str, hi: str) -> pl.Expr:
    return pl.format("[{}, {}]", pl.col(lo).round_sig_figs(3), pl.col(hi).round_sig_figs(3))


def _view(name: str, df: pl.DataFrame) -> pl.DataFrame:
    if name == "summary":  # a metric the logs do not give (vLLM has no queue time) is left to the notes
        df = df.filter(pl.col("before").is_not_null() | pl.col("after").is_not_null()).with_columns(
            _ci("ratio_lo", "ratio_hi").alias("ci_95"))
    if name == "attribution":
        df = df.with_columns(
            pl.format("x{} {}", pl.col("crossing_ratio").round_sig_figs(3), _ci("crossing_lo", "crossing_hi"))
            .alias("crossing"),
            pl.format("x{} {}", pl.col("other_ratio").round_sig_figs(3), _ci("other_lo", "other_hi")).alias("others"))
    cols = [c for c in VIEW.get(name, df.columns) if c in df.columns]
    df = df.select(cols)
    shares = [c for c in df.columns if is_share(c)]
    return df.with_columns(pl.col(c).map_elements(_pct, return_dtype=pl.Utf8) for c in shares)


def _show(res: Analysis, fmt: Format, table: str | None, detail: bool, hide_empty: bool = True) -> None:
    """Rich tables (main columns) and notes on a terminal; one table as CSV; everything as JSON."""
    if show_data(res, fmt, table):
        return
    hidden = [] if detail else DETAIL.get(res.name, [])
    for name, df in res.tables.items():
        if name in hidden or (hide_empty and df.is_empty()):
            continue
        if not detail and name in ("by_workload", "by_day"):  # only features that split the traffic
            main = res.tables["requests"]
            split = main.filter((pl.col("crossed") > 0) & (pl.col("crossed") < pl.col("requests")))["feature"]
            df = df.filter(pl.col("feature").is_in(split.to_list()))
        render.out.print(table_of(_view(name, df), res.titles.get(name, name)))
    for note in res.notes:
        render.out.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    if res.name == "compare":
        render.out.print(f"[dim]method: {escape(res.definitions['method'])}[/]", highlight=False)


@app.command("thresholds")
def thresholds_cmd(store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
                   fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
                   threshold: ThresholdOpt = None,
                   catalogue: CatalogueOpt = None, feature: FeatureOpt = None, gpu_mem_gib: GpuOpt = None,
                   config: opt.ConfigOpt = None,
                   list_: Annotated[bool, typer.Option("--list", help="Print the feature catalogue and exit.")]
                   = False, detail: AllOpt = False, engine: opt.EngineOpt = None,
                   spark_master: opt.SparkMasterOpt = None,
                   spark_conf: opt.SparkConfOpt = None) -> None:
    """Which engine features' thresholds the traffic crossed: per feature the requests over it (count, share,
    share of prefill tokens) per workload and day; step-scoped ones (CUDA-graph batch size, running cap,
    state pool full) from the engine's step lines; the effective setting per engine start (--all).

    Example: attribution thresholds --threshold "sparse_prefill: kv_len_at_prefill > 95000"
    """
    from attribution.thresholds import feature_table, load_catalogue, thresholds

    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store,
                 catalogue=[str(p) for p in catalogue or []], thresholds=threshold)
    cat = load_catalogue(list(st.catalogue), list(st.thresholds))
    if list_:
        render.frame(feature_table(cat.select(feature)), fmt, "feature catalogue")
        return
    res = thresholds(select(st, since, until, "all", command="thresholds"), cat, features=feature,
                     gpu_mem_gib=gpu_mem_gib)
    with_settings(res, st, ("catalogue", "thresholds", "workloads"))
    _show(res, fmt, table, detail)


@app.command("compare")
def compare_cmd(
    store: opt.StoreOpt = None, since: opt.SinceOpt = None, until: opt.UntilOpt = None,
    fmt: opt.FormatOpt = Format.table, table: opt.TableOpt = None,
    before: Annotated[str | None, typer.Option(help="Before cohort: a label, an engine version (0.15.1) or, "
                                                    "with --cohort-by window, SINCE..UNTIL.", show_default=False)] = None,
    after: Annotated[str | None, typer.Option(help="After cohort, in the same form.", show_default=False)] = None,
    cohort_by: Annotated[CohortBy, typer.Option("--cohort-by", help="What --before/--after name.")] = CohortBy.label,
    metric: Annotated[list[str] | None, typer.Option(help="queue_s, ttft_s, tpot_s, e2e_s (default: all).",
                                                     show_default=False)] = None,
    buckets: Annotated[str, typer.Option(help="Prompt-length bucket edges in tokens.")] = "256,1024,4096,16384,65536",
    mix: Annotated[str, typer.Option(help="Common mix: pooled (both cohorts), before or after.")] = "pooled",
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    tolerance: Annotated[float | None, typer.Option(help="Smallest change called material (default: the "
                                                         "`tolerance` setting, 0.05 = 5%).", show_default=False)]
    = None,
    alpha: Annotated[float | None, typer.Option(help="Family-wise false-alarm rate of the verdicts (Holm; "
                                                     "default: the `alpha` setting, 0.05).", show_default=False)]
    = None,
    percentile: Annotated[float, typer.Option(help="Percentile the attribution table compares.")] = 0.5,
    capacity: Annotated[bool, typer.Option(help="Add per-pod capacity before and after.")] = True,
    threshold: ThresholdOpt = None, catalogue: CatalogueOpt = None, feature: FeatureOpt = None,
    gpu_mem_gib: GpuOpt = None, detail: AllOpt = False, config: opt.ConfigOpt = None,
    engine: opt.EngineOpt = None, spark_master: opt.SparkMasterOpt = None,
    spark_conf: opt.SparkConfOpt = None,
) -> None:
    """Two cohorts side by side: queue, TTFT, TPOT and end-to-end percentile ratios re-weighted to a common
    workload x prompt-length mix, with bootstrap intervals; per feature, whether it can explain the change.

    Example: attribution compare --cohort-by version --before 0.15.1 --after 0.20.1
    """
    from attribution.compare import compare
    from attribution.thresholds import load_catalogue

    try:
        edges = tuple(int(x) for x in buckets.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--buckets {buckets!r}: write token counts separated by commas") from None
    st = resolve(config, **engine_flags(engine, spark_master, spark_conf), store=store,
                 catalogue=[str(p) for p in catalogue or []], thresholds=threshold, tolerance=tolerance, alpha=alpha)
    # (cohorts by arrival window read the engines' histograms in those windows, wherever they fall: no pruning)
    sel = select(st, since, until, "all", command="compare", prune=CohortBy(cohort_by) != CohortBy.window)
    res = compare(sel, by=cohort_by, before=before, after=after,
                  catalogue=load_catalogue(list(st.catalogue), list(st.thresholds)), features=feature,
                  metrics=tuple(metric) if metric else tuple(("queue_s", "ttft_s", "tpot_s", "e2e_s")),
                  edges=edges, mix=mix, resamples=resamples, seed=seed, tolerance=st.tolerance, alpha=st.alpha,
                  attribution_percentile=percentile, capacity=capacity, gpu_mem_gib=gpu_mem_gib)
    with_settings(res, st, ("tolerance", "alpha", "catalogue", "thresholds", "workloads"))
    _show(res, fmt, table, detail)
