"""Answers from Prometheus histograms and counters (issue 18): PromQL-faithful kernels (increase with
resets, histogram_quantile with the bucket edges around each answer), the `metrics` analysis, and the
histogram tables `latency` and `compare` show beside their exact ones, labelled bucket-interpolated."""

from attribution.histograms.analysis import latency_tables, metric_window, metrics
from attribution.histograms.compare import compare_windows
from attribution.histograms.kernels import bucket_quantile, count_above, increase

__all__ = ["bucket_quantile", "compare_windows", "count_above", "increase", "latency_tables", "metric_window",
           "metrics"]
