"""Capacity and cost per pod: completed requests per day, what the observed concurrency ceiling and service
times allow by Little's law, and the cost per million input and output tokens for a GPU-hour price."""

from __future__ import annotations

import polars as pl

from attribution.analyses.common import Analysis, GroupBy, Selection, base_params, name_groups
from attribution.analyses.concurrency import concurrency as concurrency_analysis
from attribution.errors import UsageError

DEFINITIONS = {
    "completed": "requests not failed whose end time is known, arriving in the window",
    "completed_per_day": "completed / span * 86400, span = first arrival to last end of those requests",
    "mean_in_system": "time-averaged requests in the system, from the concurrency sweep",
    "littles_in_system": "Little's law check: completed per second x mean end-to-end time; close to "
    "mean_in_system when the data is consistent",
    "busiest_hour_per_day": "completions in the busiest UTC clock hour x 24: the highest rate the pod showed",
    "ceiling": "the observed peak of running requests, from per-request intervals (of requests in the system "
    "where the waiting/running split is unknown)",
    "busy_service_s": "mean time a request held a running slot (admission to end; arrival to end where the split "
    "is unknown), over the requests completing in the busiest hour: the service time under the heaviest "
    "observed load",
    "capacity_per_day": "Little's law at the ceiling: ceiling / busy_service_s * 86400, what the pod would "
    "complete running at its observed peak concurrency all day with the service time of its busiest hour",
    "utilization": "completed_per_day / capacity_per_day",
    "usd_per_m_input/output": "pod cost per hour (gpu_hour_cost x gpus) / tokens per hour x 1e6, charging the "
    "whole cost to that token kind (e.g. $2/h at 100 output tokens/s = $5.556 per million); _at_capacity: the "
    "same at capacity_per_day with the same tokens per request",
    "gpus": "--gpus-per-pod, else the engine's tensor-parallel size (tp_size), else 1",
}


def capacity(sel: Selection, *, gpu_hour_cost: float | None = None, gpus_per_pod: int | None = None,
             per_group: bool | None = None, conc: Analysis | None = None) -> Analysis:
    """Per pod (and group, when `per_group`, by default unless grouping by all or deployment): throughput, the
    Little's-law capacity at the observed ceiling, utilization and, with `gpu_hour_cost`, cost per million
    tokens. `conc` reuses a concurrency analysis of the same selection."""
    if gpu_hour_cost is not None and gpu_hour_cost < 0:
        raise UsageError("--gpu-hour-cost must not be negative")
    if per_group is None:
        per_group = sel.by not in (GroupBy.all, GroupBy.deployment)
    per_group = per_group and sel.by not in (GroupBy.all, GroupBy.deployment)
    if conc is None or (per_group and "groups" not in conc.tables):
        conc = concurrency_analysis(sel, per_group=per_group, estimate=False)
    keys = ["deployment"] + ([sel.by.value] if per_group else [])
    base = sel.run("capacity_by_deployment", per_group=per_group)
    base = name_groups(base, sel.by) if per_group else base.drop("grp")
    conc_rows = conc.tables["groups" if per_group else "pods"]
    peaks = _ceilings(conc_rows, keys)
    limits = conc.tables["deployments"].select(
        "deployment", pl.col("configured_max_running").alias("configured_max"), pl.col("gpus").alias("tp_size"))
    df = (base.join(peaks, on=keys, how="left").join(limits, on="deployment", how="left")
          .filter(pl.col("completed") > 0))
    df = df.with_columns(
        (pl.col("completed") / pl.col("span_s") * pl.col("mean_e2e_s")).alias("littles_in_system"),
        (pl.col("busiest_hour_completed") * 24).alias("busiest_hour_per_day"),
        (pl.col("ceiling") / pl.col("busy_service_s") * 86400).alias("capacity_per_day"),
    ).with_columns((pl.col("completed_per_day") / pl.col("capacity_per_day")).alias("utilization"))
    tables = {
        "capacity": df.select(
            *keys, "completed_per_day", "busiest_hour_per_day", "ceiling", "ceiling_metric", "configured_max",
            "busy_service_s", "capacity_per_day", "utilization",
        ),
        "littles_law": df.select(
            *keys, "completed", "span_s", (pl.col("completed") / pl.col("span_s")).alias("completed_per_s"),
            "mean_e2e_s", "littles_in_system", "mean_in_system",
        ),
    }
    titles = {"capacity": "capacity per pod (Little's law at the observed ceiling)",
              "littles_law": "check: completed per second x mean end-to-end time against the measured mean in system"}
    if gpu_hour_cost is not None:
        gpus = pl.lit(gpus_per_pod) if gpus_per_pod else pl.col("tp_size").fill_null(1)
        pod_hour = pl.lit(float(gpu_hour_cost)) * pl.col("gpus")
        tables["cost"] = df.with_columns(gpus.cast(pl.Int64).alias("gpus")).select(
            *keys, "gpus", "input_tps", "output_tps",
            (pod_hour / (pl.col("input_tps") * 3600) * 1e6).alias("usd_per_m_input"),
            (pod_hour / (pl.col("output_tps") * 3600) * 1e6).alias("usd_per_m_output"),
            (pod_hour / (pl.col("input_tps") * 3600) * 1e6 * pl.col("utilization")).alias("usd_per_m_input_at_capacity"),
            (pod_hour / (pl.col("output_tps") * 3600) * 1e6 * pl.col("utilization"))
            .alias("usd_per_m_output_at_capacity"),
        )
        titles["cost"] = f"cost at ${gpu_hour_cost:g} per GPU-hour"
    notes = [n for n in conc.notes if "queue time unknown" in n]
    queued = df.filter(pl.col("ceiling_metric") == "in_system")["deployment"].unique().sort().to_list()
    if queued:
        notes.append(f"the waiting/running split is unknown for {', '.join(queued)}: their ceiling counts queued "
                     "requests too, so capacity_per_day is an upper bound; busiest_hour_per_day is what they did "
                     "deliver")
    missing = sorted(set(base["deployment"]) - set(df["deployment"]), key=str)
    if missing:
        notes.append(f"no completed requests with an end time (e.g. arrival-only traces), so no capacity: "
                     f"{', '.join(map(str, missing))}")
    return Analysis(
        name="capacity",
        params={**base_params(sel), "gpu_hour_cost": gpu_hour_cost, "gpus_per_pod": gpus_per_pod},
        tables=tables, titles=titles, definitions=DEFINITIONS, notes=notes,
    )


def _ceilings(conc_rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per key: the peak of `running`, else of `in_system`, and the time-averaged in_system."""
    rows = conc_rows.filter(pl.col("source") == "exact")
    running = rows.filter(pl.col("metric") == "running").select(*keys, pl.col("peak").alias("run_peak"))
    in_sys = rows.filter(pl.col("metric") == "in_system").select(
        *keys, pl.col("peak").alias("sys_peak"), pl.col("mean").alias("mean_in_system"))
    both = in_sys.join(running, on=keys, how="left")
    return both.select(
        *keys,
        pl.coalesce("run_peak", "sys_peak").alias("ceiling"),
        pl.when(pl.col("run_peak").is_not_null()).then(pl.lit("running")).otherwise(pl.lit("in_system"))
        .alias("ceiling_metric"),
        "mean_in_system",
    )
