"""Could any estimator find a 1.5x p90 change? The spread of log(p90 after / p90 before) over A/A pairs.

For each metric, the overall row and each workload: the standard deviation across A/A pairs (same scenario,
seeds 1000 + 2i and 1001 + 2i, as calibrate.py) of the log ratio of compare's re-weighted p90, against the
mean se the estimator reports for it. That spread is what an oracle that knew the true variance would face:
a 1.5x change beyond the 5% tolerance is found with power Phi((log 1.5 - log 1.05) / sd - z) at a critical
value z (1.96 for one test at 5%; the Holm step of the report's family is stricter). If sd is near
log 1.5 / 3.3 = 0.123 or above, no test reaches 90% on that scenario.

    PYTHONPATH=. python bench/calibration/spread.py --pairs 40 --requests 5000 --days 7
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import polars as pl
from calibrate import rows, week  # bench/calibration is the script's own directory

from attribution.compare.comparison import METRICS, latency_tables


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def run(args: argparse.Namespace) -> pl.DataFrame:
    got = []
    t0 = time.perf_counter()
    for i in range(args.pairs):
        a = week(args.scenario, args.requests, 1000 + 2 * i, args.days)
        b = week(args.scenario, args.requests, 1001 + 2 * i, args.days)
        t = latency_tables(rows(a, b), percentiles=(args.percentile,), resamples=args.resamples, seed=i)
        for name, key in (("summary", None), ("by_workload", "workload")):
            f = t[name]
            got.append(f.select(
                (pl.col(key) if key else pl.lit("all")).alias("group"), "metric", "ratio", "se_log",
                "design_effect", (pl.col("before") == 0).alias("before_zero")))
    print(f"  {args.pairs} pairs, {time.perf_counter() - t0:.0f} s", flush=True)
    df = pl.concat(got)
    limit = math.log(1.5) - math.log(1.05)
    out = df.group_by("group", "metric", maintain_order=True).agg(
        pl.len().alias("pairs"), pl.col("ratio").is_not_null().sum().alias("with_ratio"),
        pl.col("ratio").log().std().alias("sd_log_ratio"), pl.col("se_log").mean().alias("mean_se"),
        pl.col("design_effect").mean().alias("mean_design_effect"))
    return out.with_columns(
        (pl.col("mean_se") / pl.col("sd_log_ratio")).alias("se_over_sd"),
        (limit / pl.col("sd_log_ratio") - 1.959964).map_elements(_phi, return_dtype=pl.Float64)
        .alias("oracle_power_one_test"),
    ).sort("group", "metric")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--scenario", default="vllm-chat-small")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--percentile", type=float, default=0.9)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args()
    res = run(args)
    with pl.Config(tbl_rows=100, tbl_cols=20, float_precision=3, tbl_formatting="MARKDOWN",
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(res.filter(pl.col("metric").is_in(list(METRICS))))
    if args.csv:
        res.write_csv(args.csv)


if __name__ == "__main__":
    main()
