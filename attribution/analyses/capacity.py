"""Capacity and cost per pod: completed requests per day, the requests per day the pod would complete at its
running limit (Little's law with the limit and the measured service time, or the throughput it delivered while
at the limit, where it sat there long enough), with an interval, and the cost per million tokens."""

from __future__ import annotations

import numpy as np
import polars as pl

from attribution.analyses.common import Analysis, Selection, base_params, name_groups
from attribution.analyses.concurrency import concurrency as concurrency_analysis
from attribution.analyses.exact import Held, selection_held, shared_sweeps
from attribution.analyses.limits import LIMIT_SOURCES
from attribution.analyses.spend import DEFINITIONS as SPEND_DEFINITIONS
from attribution.analyses.spend import TITLE as SPEND_TITLE
from attribution.analyses.spend import spend_table
from attribution.analyses.spend import summary as spend_summary
from attribution.choices import GroupBy
from attribution.db import shed_cache
from attribution.errors import UsageError

SATURATED = "measured at saturation"
EXTRAPOLATED = "extrapolated from service times"
MIN_SATURATED_S = 1800.0  # at the limit this long, with this many completions there, to measure there
MIN_SATURATED_COMPLETIONS = 50
BLOCK_US = (60_000_000, 3_600_000_000)  # bootstrap blocks: a 24th of the sweep, between a minute and an hour
RESAMPLES = 200
DEFINITIONS = {
    "completed": "requests not failed whose end time is known, arriving in the window",
    "completed_per_day": "completed / span * 86400, span = first arrival to last end of those requests",
    "mean_in_system": "time-averaged requests in the system, from the concurrency sweep",
    "littles_in_system": "Little's law check: completed per second x mean end-to-end time; close to "
    "mean_in_system when the data is consistent",
    "busiest_hour_per_day": "completions in the busiest UTC clock hour x 24: the highest rate the pod showed",
    "observed_peak": "the most requests seen running at once (peak_metric in_system where the waiting/running "
    "split is unknown: queued requests count too)",
    "running_limit": "how many requests the engine lets run at once, with limit_source: "
    + "; ".join(f"{k} = {v}" for k, v in LIMIT_SOURCES.items()),
    "service_s": "mean time a request held a running slot: the area under the running count over the window / "
    "completed requests (Little's law for the running stage, stable under light load). Where the split is "
    "unknown the running count is min(in system, running_limit): a work-conserving engine runs every request "
    "it holds up to its limit",
    "service_s_at_limit": "the service time at running_limit requests at once: S(n) = a + b n (a step takes longer "
    "the more requests share it) fitted to the time spent and requests completed at each running count n "
    "(completions at count n per second = n / S(n))",
    "at_limit_share_of_busy_time": "share of the time with a request in the system during which the running "
    "count was at running_limit",
    "extrapolated_per_day": "Little's law at the limit: running_limit / service_s_at_limit * 86400",
    "saturated_per_day": "requests completed while at the limit with requests waiting / that time * 86400 (where the "
    f"pod spent at least {MIN_SATURATED_S / 60:.0f} min there and completed {MIN_SATURATED_COMPLETIONS} "
    "requests)",
    "capacity_per_day": "saturated_per_day where it exists (capacity_method `measured at saturation`), else "
    "extrapolated_per_day (`extrapolated from service times`, less sure the further running_limit lies "
    "beyond the counts seen); capacity_lo/hi = 95% interval from resampling blocks of the sweep (a 24th of it, between a minute and an hour)",
    "utilization": "completed_per_day / capacity_per_day",
    "usd_per_m_input/output": "pod cost per hour (gpu_hour_cost x gpus) / tokens per hour x 1e6, charging the "
    "whole cost to that token kind (e.g. $2/h at 100 output tokens/s = $5.556 per million); _at_capacity: the "
    "same at capacity_per_day with the same tokens per request",
    "gpus": "--gpus-per-pod, else the engine's tensor-parallel size (tp_size), else 1",
}
COLUMNS = ("completed_per_day", "busiest_hour_per_day", "observed_peak", "peak_metric", "running_limit",
           "limit_source", "kv_concurrency_at_max_len", "service_s", "service_s_at_limit", "at_limit_share_of_busy_time",
           "extrapolated_per_day", "saturated_per_day", "capacity_per_day", "capacity_lo", "capacity_hi",
           "capacity_method", "utilization")


def capacity(sel: Selection, *, gpu_hour_cost: float | None = None, gpus_per_pod: int | None = None,
             per_group: bool | None = None, conc: Analysis | None = None) -> Analysis:
    """Per pod (and group, when `per_group`, by default unless grouping by all or deployment): throughput, the
    capacity at the running limit with its interval and method, utilization and, with `gpu_hour_cost`, cost
    per million tokens. `conc` reuses a concurrency analysis of the same selection. A group's capacity is
    the pod's if all its traffic were like the group's."""
    if gpu_hour_cost is not None and gpu_hour_cost < 0:
        raise UsageError("--gpu-hour-cost must not be negative")
    if per_group is None:
        per_group = sel.by not in (GroupBy.all, GroupBy.deployment)
    per_group = per_group and sel.by not in (GroupBy.all, GroupBy.deployment)
    with shared_sweeps(sel):  # the concurrency analysis and the estimates read one sweep of the window
        if conc is None or (per_group and "groups" not in conc.tables):
            # _peaks reads the running and in-system rows only: the sweep skips the live KV tokens
            conc = concurrency_analysis(sel, per_group=per_group, estimate=False,
                                        exact_metrics=("running", "in_system"))
        keys = ["deployment"] + ([sel.by.value] if per_group else [])
        base = sel.run("capacity_by_deployment", per_group=per_group)
        deps = conc.tables["deployments"]
        limits = deps.select("deployment", "running_limit", "limit_source", "kv_concurrency_at_max_len",
                             pl.col("gpus").alias("tp_size"))
        est = _estimates(sel, per_group, limits)
    df = base.join(est, on=["deployment", "grp"], how="left", nulls_equal=True)
    df = (name_groups(df, sel.by) if per_group else df.drop("grp"))
    df = df.join(_peaks(conc.tables["groups" if per_group else "pods"], keys), on=keys, how="left")
    df = df.join(limits, on="deployment", how="left").filter(pl.col("completed") > 0)
    df = df.with_columns(
        (pl.col("completed") / pl.col("span_s") * pl.col("mean_e2e_s")).alias("littles_in_system"),
        (pl.col("busiest_hour_completed") * 24).alias("busiest_hour_per_day"),
        (pl.col("completed_per_day") / pl.col("capacity_per_day")).alias("utilization"),
    )
    tables = {
        "capacity": df.select(*keys, *COLUMNS),
        "littles_law": df.select(
            *keys, "completed", "span_s", (pl.col("completed") / pl.col("span_s")).alias("completed_per_s"),
            "mean_e2e_s", "littles_in_system", "mean_in_system",
        ),
    }
    titles = {"capacity": "capacity per pod at its running limit (measured at saturation, else extrapolated "
                          "from service times)",
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
    spend = spend_table(sel, per_group, df.select(*keys, "span_s"), tables.get("cost"), gpu_hour_cost)
    if spend is not None:  # only where a gateway logged requests of the window
        tables["spend"], titles["spend"] = spend, f"{SPEND_TITLE}: {spend_summary(spend)}"
    notes = [n for n in conc.notes if "queue time unknown" in n]
    guessed = df.filter(pl.col("limit_source") != "configured").unique("deployment", maintain_order=True)
    for r in guessed.iter_rows(named=True):
        notes.append(f"{r['deployment']}: no configured running limit; capacity uses {r['running_limit']:,} "
                     f"({r['limit_source']})")
    missing = sorted(set(base["deployment"]) - set(df["deployment"]), key=str)
    if missing:
        notes.append(f"no completed requests with an end time (e.g. arrival-only traces), so no capacity: "
                     f"{', '.join(map(str, missing))}")
    unlogged = sorted(set(deps["deployment"]) - set(base["deployment"]), key=str)
    if unlogged:
        notes.append(f"no requests logged in the window (engine step lines only), so no capacity: "
                     f"{', '.join(map(str, unlogged))}")
    return Analysis(
        name="capacity",
        params={**base_params(sel), "gpu_hour_cost": gpu_hour_cost, "gpus_per_pod": gpus_per_pod},
        tables=tables, titles=titles, definitions={**DEFINITIONS, **(SPEND_DEFINITIONS if spend is not None else {})},
        notes=notes,
    )


def _peaks(conc_rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per key: the exact peak of `running`, else of `in_system`, and the time-averaged in_system."""
    rows = conc_rows.filter(pl.col("source") == "exact")
    running = rows.filter(pl.col("metric") == "running").select(*keys, pl.col("peak").alias("run_peak"))
    in_sys = rows.filter(pl.col("metric") == "in_system").select(
        *keys, pl.col("peak").alias("sys_peak"), pl.col("mean").alias("mean_in_system"))
    return in_sys.join(running, on=keys, how="left").select(
        *keys,
        pl.coalesce("run_peak", "sys_peak").alias("observed_peak"),
        pl.when(pl.col("run_peak").is_not_null()).then(pl.lit("running")).otherwise(pl.lit("in_system"))
        .alias("peak_metric"),
        "mean_in_system",
    )


def _estimates(sel: Selection, per_group: bool, limits: pl.DataFrame) -> pl.DataFrame:
    """Per (deployment, grp) of the sweep: service_s, time at the limit, and the capacity estimates."""
    cap = dict(zip(limits["deployment"], limits["running_limit"], strict=True))
    parts = selection_held(sel, per_group)
    done = sel.run("capacity_completions", per_group=per_group)
    shed_cache(sel.con)  # (the report's connection: DuckDB's cached blocks are not kept beside the arrays)
    ends = {k: g["t_end"].sort().to_numpy() for k, g in
            done.partition_by("deployment", "grp", as_dict=True, maintain_order=True).items()}
    del done  # (6M requests: ~240 MB the estimates below do not read)
    rows = [_estimate(p, cap.get(p.deployment), ends.get((p.deployment, p.grp)))
            for p in parts]
    schema = {"deployment": pl.Utf8, "grp": pl.Utf8, "service_s": pl.Float64, "service_s_at_limit": pl.Float64,
              "at_limit_share_of_busy_time": pl.Float64, "extrapolated_per_day": pl.Float64,
              "saturated_per_day": pl.Float64, "capacity_per_day": pl.Float64, "capacity_lo": pl.Float64,
              "capacity_hi": pl.Float64, "capacity_method": pl.Utf8}
    out = pl.DataFrame(rows, schema=schema, orient="row")
    # with per_group the sweep also has whole-pod rows (grp None): the table's rows are the groups
    return out.filter(pl.col("grp").is_not_null()) if per_group else out


def _fit(area: np.ndarray, done: np.ndarray, n: np.ndarray) -> tuple[float, float] | None:
    """Service time per running level, S(n) = a + b n (a step takes longer the more requests share it), fitted
    to the running area A_n = n T_n and completions C_n at each level: least squares of A_n - C_n S(n) with
    variance ~ C_n. None without completions; a or b below 0 falls back to the one-parameter fit."""
    keep = (done > 0) & (n > 0)
    if not keep.any():
        return None
    A, C, k = area[keep], done[keep], n[keep].astype(np.float64)
    w = 1 / np.sqrt(C)
    if keep.sum() >= 2:
        (a, b), *_ = np.linalg.lstsq(np.stack([C * w, k * C * w], axis=1), A * w, rcond=None)
        if a >= 0 and b >= 0:
            return float(a), float(b)
        if a < 0:
            return 0.0, float((k * A).sum() / (k * k * C).sum())
    return float(A.sum() / C.sum()), 0.0


_INT32 = (int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max))


def _estimate(p: Held, limit: int | None, t_end: np.ndarray | None) -> tuple:
    """One partition's row of `_estimates` (see DEFINITIONS): the running count per segment (min(in system,
    limit) where the split is unknown), the time and completions at each count, per hour of the sweep."""
    blank = (p.deployment, p.grp, None, None, None, None, None, None, None, None, None)
    if t_end is None or not t_end.size or not p.t.size:
        return blank
    held = p.held  # requests holding a slot, or (split unknown) in the system
    # (held is int32: a limit outside its range is clipped to it, which caps the same segments)
    level = np.minimum(held, np.clip(limit, *_INT32)) if limit else held
    dur = p.dur.astype(np.float64) / 1e6
    busy_s = dur[p.busy].sum()
    # the segment a request ends in is the one before its end instant
    seg = np.searchsorted(p.t, t_end, side="left") - 1
    seg = seg[seg >= 0]
    block = (p.t - p.t[0]) // int(np.clip((p.t[-1] - p.t[0]) / 24, *BLOCK_US))
    nb, nl = int(block[-1]) + 1, int(level.max()) + 1
    # (bincount adds in the same order as np.add.at, an order of magnitude faster on a million segments)
    time_bl = np.bincount(block * nl + level, weights=dur, minlength=nb * nl).reshape(nb, nl)
    done_bl = np.bincount(block[seg] * nl + level[seg], minlength=nb * nl).reshape(nb, nl).astype(np.float64)
    n = np.arange(nl)
    T, C = time_bl.sum(axis=0), done_bl.sum(axis=0)
    if C[1:].sum() == 0:
        return blank
    service_s = float((n * T).sum() / C[1:].sum())
    at_limit_s = float(T[limit]) if limit and limit < nl else 0.0
    share = at_limit_s / busy_s if busy_s > 0 else None
    fit = _fit(n * T, C, n)
    if not limit or fit is None:
        return (p.deployment, p.grp, service_s, None, share, None, None, None, None, None, None)
    s_at_limit = fit[0] + fit[1] * limit
    extrapolated = limit * 86400 / s_at_limit if s_at_limit > 0 else None
    rng = np.random.default_rng(0)  # fixed: the same store gives the same interval
    pick = rng.integers(0, nb, size=(RESAMPLES, nb))
    # saturated: at the limit with requests waiting, so that every completion makes room for the next
    # request's prefill (at the limit with an empty queue the steps are lighter than under overload)
    sat = (level >= limit) & (p.waiting | (held > limit))
    sat_t = np.bincount(block[sat], weights=dur[sat], minlength=nb)
    sat_c = np.bincount(block[seg[sat[seg]]], minlength=nb).astype(np.float64)
    saturated = None
    if sat_t.sum() >= MIN_SATURATED_S and sat_c.sum() >= MIN_SATURATED_COMPLETIONS:
        saturated = sat_c.sum() / sat_t.sum() * 86400
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = sat_c[pick].sum(axis=1) / sat_t[pick].sum(axis=1) * 86400
        value, method = saturated, SATURATED
    else:
        boot_list = []
        for idx in pick:
            f = _fit(n * time_bl[idx].sum(axis=0), done_bl[idx].sum(axis=0), n)
            if f is not None and f[0] + f[1] * limit > 0:
                boot_list.append(limit * 86400 / (f[0] + f[1] * limit))
        boot = np.array(boot_list)
        value, method = extrapolated, EXTRAPOLATED
    boot = boot[np.isfinite(boot)]
    lo, hi = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))) if boot.size else (None, None)
    if lo is not None and value is not None:  # the interval holds its own estimate
        lo, hi = min(lo, value), max(hi, value)
    return (p.deployment, p.grp, service_s, s_at_limit, share, extrapolated, saturated, value, lo, hi, method)
