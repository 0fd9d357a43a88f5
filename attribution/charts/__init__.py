"""Plotly figure builders, one module per analysis, shared by the report and the dashboard. Each builder
takes an `Analysis` (the library's answer) and returns a `plotly.graph_objects.Figure`; it reshapes the
analysis' tables for drawing and computes nothing. A table that is missing or empty gives a figure that
says so, never an error.

    lengths.count_vs_tokens(a, metric="prompt_tokens")    lengths.histogram(a, metric=, weight="requests"|"tokens")
    lengths.percentiles(a, metric=)                        concurrency.over_time(a, deployments=None)
    concurrency.peaks(a, metric="running")                 latency.percentiles(a, metrics=, quantiles=)
    latency.by_bucket(a, metric="ttft_s", quantile="p90")  latency.goodput(a)
    capacity.utilization(a)                                capacity.cost(a)
    thresholds.crossings(a, only_crossed=True)             thresholds.by_day(a, features=None)
    thresholds.steps(a)                                    compare.ratios(a)
    compare.by_group(a, kind="workload"|"bucket", metric=, percentile=)
    compare.attribution(a, metric="ttft_s")                memsplit.pools(a)     memsplit.whatif(a)
    changes.drift(a)                                       changes.ratios(a, which="upgrade"|"week")
    spend.billed_vs_gpu(a)
    arrivals.per_minute(a)    arrivals.burstiness(a)       arrivals.hour_profile(a)

Every builder also takes `title=` (keyword) to replace its default title.
"""

from attribution.charts import (
    arrivals,
    capacity,
    changes,
    compare,
    concurrency,
    latency,
    lengths,
    memsplit,
    spend,
    thresholds,
)
from attribution.charts.common import colours, layout, message

__all__ = ["arrivals", "capacity", "changes", "colours", "compare", "concurrency", "latency", "layout", "lengths",
           "memsplit", "message", "spend", "thresholds"]
