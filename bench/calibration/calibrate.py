"""Calibration of the report's alarms: false-alarm rate on A/A weeks and detection power on A/B weeks.

Each pair is two simulated weeks (attribution.simulate's library API, request level: no logs are written
or ingested) of one scenario with different seeds. A/A: the pair as it is. A/B: the second week with a known
effect: a metric (TTFT, TPOT, queue, e2e) multiplied by 1.1, 1.5 or 2 (every percentile moves by exactly
that factor), a new workload carrying 12% of the requests, or prompts 1.5x longer. Each pair goes through
compare's tables (compare.comparison.latency_tables: its family is summary + per workload + per bucket) and
through the report's alarms (report.changes: one Holm family over the overall and per-workload rows; drift
of traffic and of lengths from report.drift), with the report's defaults (tolerance 5%, alpha 0.05, 200
resamples). Prints the tables bench/calibration/README.md shows.

    PYTHONPATH=. python bench/calibration/calibrate.py --pairs 200 --ab-pairs 30 --requests 5000 --days 7
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import polars as pl

from attribution.compare import DEFAULT_EDGES, judge
from attribution.compare.comparison import METRICS, CompareRows, latency_tables
from attribution.report import drift as drifts
from attribution.report.changes import regressions
from attribution.simulate import simulate

EFFECTS = [(m, f) for m in ("ttft_s", "tpot_s", "queue_s", "e2e_s") for f in (1.1, 1.5, 2.0)]
KINDS = ("regression", "improvement", "drift: traffic", "drift: lengths")


def week(scenario: str, requests: int, seed: int, days: float | None = None) -> pl.DataFrame:
    """One simulated week: `requests` over `days` (None: the scenario's own rate sets the span)."""
    r = simulate(scenario, requests=requests, days=days, seed=seed, workers=1, steps=False).requests
    return r.select("workload", "arrival", "prompt_tokens", "output_tokens", *METRICS)


def bucket(prompt: pl.Expr) -> pl.Expr:
    """compare_requests.sql's bucket: the number of edges <= prompt_tokens."""
    return pl.sum_horizontal([(prompt >= e).cast(pl.Int64) for e in DEFAULT_EDGES])


def rows(a: pl.DataFrame, b: pl.DataFrame) -> CompareRows:
    both = pl.concat([a.with_columns(pl.lit("before").alias("cohort")), b.with_columns(pl.lit("after").alias("cohort"))])
    return CompareRows(both.with_columns(bucket(pl.col("prompt_tokens")).alias("bucket")), DEFAULT_EDGES)


def alarms(a: pl.DataFrame, b: pl.DataFrame, hours: float, seed: int, resamples: int) -> dict:
    """What compare and the report say about week b against week a."""
    t = latency_tables(rows(a, b), resamples=resamples, seed=seed)
    cmp_changed = {(r["metric"], r["percentile"]) for name in ("summary", "by_workload", "by_bucket")
                   for r in t[name].filter(pl.col("changed")).iter_rows(named=True)}
    fam = judge.judge({"week_summary": t["summary"], "week_by_workload": t["by_workload"]},
                      judge.ALPHA * drifts.LATENCY_SHARE)
    reg = regressions(fam["week_summary"], fam["week_by_workload"])
    ra, rb = (x.rename({"workload": "grp"}) for x in (a, b))
    traffic = drifts.traffic(ra, rb, hours, hours)
    lengths = drifts.lengths(ra, rb)
    found = {
        "regression": reg.height > 0 and (reg["direction"] == "regression").any(),
        "improvement": reg.height > 0 and (reg["direction"] == "improvement").any(),
        "drift: traffic": traffic["status"].is_in(list(drifts.ALARMS)).any(),
        "drift: lengths": (lengths["status"] == "drift").any(),
    }
    overall = {(r["metric"], r["percentile"]): r["verdict"] for r in
               fam["week_summary"].iter_rows(named=True)}
    return {"report": found, "compare_any": bool(cmp_changed), "overall": overall,
            "too_few": int((fam["week_summary"]["verdict"] == "too few requests").sum())}


def effect(b: pl.DataFrame, kind: str, factor: float, rng: np.random.Generator) -> pl.DataFrame:
    if kind == "new workload":
        new = rng.random(b.height) < 0.12
        return b.with_columns(pl.when(pl.Series(new)).then(pl.lit("new-agents")).otherwise(pl.col("workload"))
                              .alias("workload"))
    if kind == "length shift":
        return b.with_columns((pl.col("prompt_tokens") * factor).round().cast(pl.Int64))
    return b.with_columns(pl.col(kind) * factor)


def run(args: argparse.Namespace) -> dict:
    hours = None
    aa = {k: 0 for k in KINDS} | {"any report alarm": 0, "any report finding": 0, "compare: any changed": 0}
    ab: dict[str, dict[str, int]] = {}
    t0 = time.perf_counter()
    for i in range(args.pairs):
        a = week(args.scenario, args.requests, 1000 + 2 * i, args.days)
        b = week(args.scenario, args.requests, 1001 + 2 * i, args.days)
        if hours is None:
            span = (a["arrival"].max() - a["arrival"].min()).total_seconds() / 3600
            hours = span
        got = alarms(a, b, hours, i, args.resamples)
        for k in KINDS:
            aa[k] += got["report"][k]
        aa["any report alarm"] += got["report"]["regression"] or got["report"]["drift: traffic"] or \
            got["report"]["drift: lengths"]
        aa["any report finding"] += any(got["report"].values())
        aa["compare: any changed"] += got["compare_any"]
        if i < args.ab_pairs:
            rng = np.random.default_rng(i)
            cases = [(m, f) for m, f in EFFECTS] + [("new workload", 0.12), ("length shift", 1.5)]
            for kind, f in cases:
                res = alarms(a, effect(b, kind, f, rng), hours, i, args.resamples)
                key = f"{kind} x{f:g}" if kind in METRICS else (f"{kind} 12%" if kind == "new workload" else
                                                                 f"prompt length x{f:g}")
                d = ab.setdefault(key, {"pairs": 0, "p90 regression": 0, "p95 regression": 0,
                                        "any report alarm": 0})
                d["pairs"] += 1
                if kind in METRICS:
                    d["p90 regression"] += res["overall"].get((kind, "p90")) == "regression"
                    d["p95 regression"] += res["overall"].get((kind, "p95")) == "regression"
                    d["any report alarm"] += res["report"]["regression"]
                elif kind == "new workload":
                    d["any report alarm"] += res["report"]["drift: traffic"]
                else:
                    d["any report alarm"] += res["report"]["drift: lengths"]
        if (i + 1) % 20 == 0:
            print(f"  {i + 1} pairs, {time.perf_counter() - t0:.0f} s", flush=True)
    return {"pairs": args.pairs, "ab_pairs": min(args.ab_pairs, args.pairs), "requests": args.requests,
            "days": args.days, "hours": round(hours or 0, 2),
            "scenario": args.scenario, "resamples": args.resamples, "aa": aa, "ab": ab,
            "seconds": round(time.perf_counter() - t0, 1)}


def tables(res: dict) -> str:
    n, m = res["pairs"], res["ab_pairs"]
    out = ["| A/A alarm kind | weeks with it | rate | 95% upper bound |", "|---|---|---|---|"]
    for k, v in res["aa"].items():
        out.append(f"| {k} | {v} / {n} | {v / n:.1%} | {_upper(v, n):.1%} |")
    out += ["", "| A/B effect | pairs | detected: that metric's p90 judged a regression | its p95 | any report "
            "alarm of its kind |", "|---|---|---|---|---|"]
    for k, d in res["ab"].items():
        metric = " x" in k and not k.startswith("prompt")
        p90, p95 = (f"{d[f'{p} regression'] / d['pairs']:.0%}" if metric else "n/a" for p in ("p90", "p95"))
        out.append(f"| {k} | {d['pairs']} | {p90} | {p95} | {d['any report alarm'] / d['pairs']:.0%} |")
    return "\n".join(out) + f"\n\n({n} A/A pairs, {m} A/B pairs per effect, {res['requests']:,} requests per " \
        f"week over {res['hours']:g} hours, scenario {res['scenario']}, {res['resamples']} resamples; " \
        f"{res['seconds']:.0f} s)"


def _upper(k: int, n: int) -> float:
    """One-sided 95% upper bound of a rate with k of n (Clopper-Pearson by bisection)."""
    from math import comb

    lo, hi = k / n, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        cdf = sum(comb(n, j) * mid**j * (1 - mid) ** (n - j) for j in range(k + 1))
        lo, hi = (mid, hi) if cdf > 0.05 else (lo, mid)
    return hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--ab-pairs", type=int, default=50)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--scenario", default="vllm-chat-small")
    ap.add_argument("--days", type=float, default=None, help="span of a week's requests (default: the "
                    "scenario's own rate: 5,000 requests of vllm-chat-small in 42 minutes)")
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = run(args)
    print(tables(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
