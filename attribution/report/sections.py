"""The report's sections, each built from the analyses in `Inputs`: a few sentences that read the tables,
the tables themselves cut to the columns a reader needs, the charts (attribution.charts) and the analyses'
own notes. Reading and arranging only; the numbers are the analyses'."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import polars as pl

from attribution import charts
from attribution.analyses.common import percentile_columns
from attribution.charts.common import grouped_by
from attribution.columns import view
from attribution.report.arrivals_section import arrivals_section
from attribution.report.cache_section import cache_section
from attribution.report.fmt import num, pct
from attribution.report.metrics_section import bucket_thresholds_sections, metrics_sections
from attribution.report.model import Section, present
from attribution.report.review_sections import (
    changes_section,
    health_section,
    memsplit_section,
    thresholds_section,
)
from attribution.report.spend import spend_part

if TYPE_CHECKING:
    from attribution.report.build import Inputs


def all_sections(inp: Inputs) -> list[Section]:
    if not inp.requests:
        empty = Section("traffic", "Traffic and workloads", [f"No requests in this window ({inp.skipped['requests']})."])
        return [empty, *metrics_sections(inp), *bucket_thresholds_sections(inp), memsplit_section(inp),
                health_section(inp)]
    return [changes_section(inp), traffic_section(inp), lengths_section(inp), arrivals_section(inp),
            concurrency_section(inp), latency_section(inp), *metrics_sections(inp), capacity_section(inp),
            cache_section(inp), thresholds_section(inp), memsplit_section(inp), health_section(inp)]


def traffic_section(inp: Inputs) -> Section:
    s = Section("traffic", "Traffic and workloads")
    stats = present(inp.lengths, "lengths").tables["stats"]
    gcol = grouped_by(stats, exclude=("metric",))
    prompt = stats.filter(pl.col("metric") == "prompt_tokens")
    output = stats.filter(pl.col("metric") == "output_tokens")
    deps = present(inp.concurrency, "concurrency").tables["deployments"]
    s.lines.append(f"{inp.requests:,} requests from {prompt.height} {gcol}s on {deps.height} deployments.")
    good = present(inp.latency, "latency").tables["goodput"]
    rate = good.select(gcol, "requests_per_s") if gcol in good.columns else None
    table = prompt.select(gcol, "requests", pl.col("tokens").alias("prompt_tokens"),
                          pl.col("mean").alias("prompt_mean"), pl.col("p99").alias("prompt_p99")).join(
        output.select(gcol, pl.col("tokens").alias("output_tokens"), pl.col("mean").alias("output_mean")),
        on=gcol, how="left")
    if rate is not None:
        table = table.join(rate, on=gcol, how="left")
    s.table("workloads", f"requests and tokens per {gcol}", table.sort("requests", descending=True))
    for r in table.sort("requests", descending=True).head(3).iter_rows(named=True):
        s.lines.append(f"{r[gcol]}: {r['requests']:,} requests, {num(r['prompt_mean'])} prompt tokens on average.")
    versions = None
    if inp.thresholds is not None:
        versions = (inp.thresholds.tables["settings"].select("deployment", "engine", "version", "start_ts")
                    .unique().sort("deployment", "start_ts"))
    s.table("deployments", "deployments: requests, configured running limit and KV pool",
            view(deps, ["deployment", "requests", "running_limit", "limit_source", "kv_concurrency_at_max_len",
                        "kv_pool_tokens", "gpus", "source"]))
    s.table("engine_starts", "engine starts serving this window", versions)
    return s


def lengths_section(inp: Inputs) -> Section:
    a = present(inp.lengths, "lengths")
    s = Section("lengths", "Prompt and output lengths", definitions=a.definitions)
    stats = a.tables["stats"]
    gcol = grouped_by(stats, exclude=("metric",))
    for r in stats.filter(pl.col("metric") == "prompt_tokens").sort("top1_token_share", descending=True,
                                                                     nulls_last=True).head(3).iter_rows(named=True):
        share = r["top1_token_share"]
        s.lines.append(f"{r[gcol]}: prompts p50 {num(r['p50'])}, p99 {num(r['p99'])}, max {num(r['max'])} tokens"
                       + (f"; the longest 1% carry {pct(share)} of its prompt tokens." if share is not None else "."))
    s.table("stats", a.titles["stats"], view(stats.filter(pl.col("metric") != "cached_tokens"), [
        gcol, "metric", "requests", "mean", *percentile_columns(stats), "max", "tok_p50", "tok_p90", "tok_p95",
        "tok_p99", "top1_token_share"]))
    s.chart("prompt", partial(charts.lengths.count_vs_tokens, a, metric="prompt_tokens"))
    s.chart("output", partial(charts.lengths.count_vs_tokens, a, metric="output_tokens"))
    s.notes += a.notes
    return s


def concurrency_section(inp: Inputs) -> Section:
    a = present(inp.concurrency, "concurrency")
    s = Section("concurrency", "Concurrency and live tokens per pod", definitions=a.definitions)
    pods, deps = a.tables["pods"], a.tables["deployments"]
    limit = {d: (n, src) for d, n, src in deps.select("deployment", "running_limit", "limit_source").iter_rows()}
    for dep in deps["deployment"]:
        rows = {r["metric"]: r for r in pods.filter(pl.col("deployment").eq_missing(dep)).iter_rows(named=True)}
        run = rows.get("running") or rows.get("in_system")
        if run is None:
            continue
        what = "running" if "running" in rows else "in system"
        text = (f"{dep}: at most {num(run['peak'])} requests {what} ({run['source']}; p99 {num(run['p99'])}"
                + (f", running limit {limit[dep][0]:,} ({limit[dep][1]})" if limit.get(dep, (None,))[0] is not None
                   else "") + ")")
        if (w := rows.get("waiting")) and w["peak"]:
            text += f", up to {num(w['peak'])} waiting"
        if kv := rows.get("kv_tokens"):
            text += f", live KV tokens up to {num(kv['peak'])}"
        s.lines.append(text + ".")
    s.table("pods", a.titles["pods"], view(pods, ["deployment", "metric", "source", "peak", "mean",
                                                   *percentile_columns(pods), "peak_at"]))
    s.chart("over_time", partial(charts.concurrency.over_time, a))
    s.chart("peaks", partial(charts.concurrency.peaks, a, metric="running"))
    s.notes += a.notes
    return s


def latency_section(inp: Inputs) -> Section:
    a = present(inp.latency, "latency")
    s = Section("latency", "Latency and goodput", definitions=a.definitions)
    s.lines.append(f"SLO: {inp.slo.describe()}" + (f" (preset {inp.slo.name})" if inp.slo.name else "") + ".")
    good = a.tables["goodput"]
    gcol = grouped_by(good)
    share = "good_share_of_judged_requests"
    for r in good.sort(share, nulls_last=True).iter_rows(named=True):
        if r[share] is not None:
            rate = r["goodput_per_s"]  # null when the window has no length (one instant)
            judged = "" if r["judged"] == r["requests"] else f" ({r['judged']:,} of {r['requests']:,} judged)"
            s.lines.append(f"{r[gcol]}: {pct(r[share])} of judged requests met it{judged}"
                           + (f" ({rate:.3g} good requests/s)." if rate is not None else "."))
    cl = inp.cohort_latency
    if cl is not None:
        cgood = cl.tables["goodput"]
        ccol = grouped_by(cgood)
        parts = [f"{r[ccol]} {pct(r[share])}" for r in cgood.iter_rows(named=True) if r[share] is not None]
        if parts:
            s.lines.append(f"Per {ccol}: " + ", ".join(parts) + " of judged requests met the SLO.")
    pct_table = a.tables["percentiles"]
    s.table("percentiles", a.titles["percentiles"], view(pct_table, [gcol, "metric", "requests", "mean",
                                                                      *percentile_columns(pct_table), "max"]))
    if cl is not None:
        ccol = grouped_by(cl.tables["percentiles"], exclude=("metric",))
        s.table("cohorts", f"latency by {ccol} (seconds)", view(cl.tables["percentiles"], [
            ccol, "metric", "requests", *percentile_columns(cl.tables["percentiles"]), "max"]))
    s.table("goodput", a.titles["goodput"], view(good, [gcol, "requests", "failed", "judged", "good", share,
                                                        "goodput_per_s", "requests_per_s"]))
    s.table("slo_terms", a.titles["slo_terms"], view(a.tables["slo_terms"], [gcol, "term", "limit_s", "measured",
                                                                             "met_share"]))
    if "scores" in a.tables:
        s.table("scores", a.titles["scores"], view(a.tables["scores"], ["score", gcol, "requests", "mean", "p10",
                                                                          "p50", "p90", "zero_share"]))
    s.chart("percentiles", partial(charts.latency.percentiles, a))
    if cl is not None:
        s.chart("cohorts", partial(charts.latency.percentiles, cl, title=f"latency percentiles by {ccol}: before / after"))
    s.chart("goodput", partial(charts.latency.goodput, a))
    s.chart("by_bucket", partial(charts.latency.by_bucket, a, metric="ttft_s", quantile="p90"))
    s.notes += a.notes
    return s


def capacity_section(inp: Inputs) -> Section:
    a = present(inp.capacity, "capacity")
    s = Section("capacity", "Capacity and cost", definitions=a.definitions)
    cap = a.tables["capacity"]
    for r in cap.iter_rows(named=True):
        if r["utilization"] is not None:
            s.lines.append(f"{r['deployment']}: {num(r['completed_per_day'])} requests/day completed, "
                           f"{pct(r['utilization'])} of the {num(r['capacity_per_day'])} (95% "
                           f"{num(r['capacity_lo'])}-{num(r['capacity_hi'])}) it could complete at its running "
                           f"limit of {num(r['running_limit'])} ({r['limit_source']}), {r['capacity_method']}.")
    s.table("capacity", a.titles["capacity"], cap)
    cost = a.tables.get("cost")
    if cost is not None:
        s.table("cost", a.titles["cost"], view(cost, ["deployment", "gpus", "input_tps", "output_tps",
                                                      "usd_per_m_input", "usd_per_m_output"]))
    else:
        s.lines.append("No GPU-hour cost is configured (gpu_hour_cost), so there is no cost per token.")
    s.chart("utilization", partial(charts.capacity.utilization, a))
    if cost is not None:
        s.chart("cost", partial(charts.capacity.cost, a))
    spend_part(s, a)
    s.notes += a.notes
    return s

