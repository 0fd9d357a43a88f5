"""The ground truth of a simulation: per-workload, per-cohort and per-pod facts that the written logs carry
only in part (vLLM logs have no prompt lengths or per-request timings, stats lines are 10 s samples), keyed
the way `attribution ingest` names things (deployment, label, key alias and hash), for tests to compare with.

Percentiles are linear interpolation between order statistics (DuckDB `quantile_cont`); means come with the
integer sums and counts they are made of, so a test can compare them exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from attribution.db import as_float, as_int, as_time
from attribution.privacy import hash_key
from attribution.simulate.result import SimResult
from attribution.simulate.writers.common import fake_key

KV_LEN_THRESHOLD = 95_000  # tokens: the long-context threshold whose crossings the demo's tail shows
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _q(values: pl.Series) -> dict[str, float | None]:
    v = values.drop_nulls().drop_nans() if values.dtype.is_float() else values.drop_nulls()
    if v.len() == 0:
        return {k: None for k in QUANTILES}
    arr = v.to_numpy().astype(float)
    return {k: float(np.quantile(arr, q, method="linear")) for k, q in QUANTILES.items()}


def _iso(value: object) -> str | None:
    ts = as_time(value)
    return None if ts is None else ts.isoformat().replace("+00:00", "Z")


def _mean(total: int, n: int) -> float | None:
    return total / n if n else None


def _over(df: pl.DataFrame) -> int:
    """Requests whose KV length at prefill (cached + new prompt tokens, i.e. prompt_tokens) exceeds 95,000."""
    return int((df["kv_len_at_prefill"] > KV_LEN_THRESHOLD).sum())


def peak_overlap(start: pl.Series, end: pl.Series) -> int:
    """Most intervals [start, end) open at once (an interval ending when another starts does not overlap)."""
    s = start.dt.epoch("us").to_numpy()
    e = end.dt.epoch("us").to_numpy()
    t = np.concatenate([s, e])
    d = np.concatenate([np.ones(len(s), np.int64), -np.ones(len(e), np.int64)])
    if not len(t):
        return 0
    order = np.lexsort((d, t))  # by time, ends (-1) before starts (+1)
    return int(np.cumsum(d[order]).max())


def _workloads(req: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for (alias,), df in req.sort("arrival").group_by("key_alias", maintain_order=True):
        prompt = int(df["prompt_tokens"].sum())
        out.append({
            "workload": df["workload"][0], "key_alias": alias, "key_hash": hash_key(fake_key(alias)),
            "team": df["team"][0], "models": sorted(df["model"].unique().to_list()),
            "deployments": sorted(df["deployment"].unique().to_list()),
            "requests": df.height, "prompt_tokens_sum": prompt, "prompt_tokens_mean": _mean(prompt, df.height),
            "prompt_tokens": {**_q(df["prompt_tokens"]), "max": as_int(df["prompt_tokens"].max())},
            "output_tokens_sum": int(df["output_tokens"].sum()), "cached_tokens_sum": int(df["cached_tokens"].sum()),
            "kv_len_over_threshold": _over(df),
        })  # fmt: skip
    return sorted(out, key=lambda w: w["key_alias"])


def _cohorts(req: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for (engine, version, label), df in req.group_by("engine", "engine_version", "label"):
        out.append({
            "engine": engine, "engine_version": version, "label": label,
            "deployments": sorted(df["deployment"].unique().to_list()), "requests": df.height,
            "first_arrival": _iso(df["arrival"].min()), "last_finished": _iso(df["finished"].max()),
            "kv_len_over_threshold": _over(df),
            "queue_s": {"mean": as_float(df["queue_s"].mean()), **_q(df["queue_s"])},
            "ttft_s": _q(df["ttft_s"]), "tpot_s": _q(df["tpot_s"]), "e2e_s": _q(df["e2e_s"]),
            "preemptions": int(df["preemptions"].sum()),
        })  # fmt: skip
    return sorted(out, key=lambda c: (c["first_arrival"] or "", c["engine"]))


def _pod(pod: dict[str, Any], req: pl.DataFrame, stats: pl.DataFrame) -> dict[str, Any]:
    cap, slots, k = pod["max_running_requests"], pod["state_pool_slots"], pod["slots_per_request"]
    peak = peak_overlap(req["admitted"], req["finished"])
    at_cap = stats.filter(pl.col("running") >= cap)
    waiting = stats.filter(pl.col("waiting") > 0)
    return {
        "deployment": pod["deployment"], "label": pod["label"], "engine": pod["engine"],
        "engine_version": pod["version"], "model": pod["model"], "requests": req.height,
        "first_arrival": _iso(req["arrival"].min()), "last_finished": _iso(req["finished"].max()),
        "kv_len_over_threshold": _over(req),
        "kv_pool_tokens": pod["kv_pool_tokens"], "state_pool_slots": slots, "slots_per_request": k,
        "max_running_requests": cap, "max_num_batched_tokens": pod["max_num_batched_tokens"],
        "max_model_len": pod["max_model_len"],
        # Exact, from per-request intervals: running = [admitted, finished), in flight = [arrival, finished).
        "peak_running": peak, "peak_in_flight": peak_overlap(req["arrival"], req["finished"]),
        "peak_state_usage": None if not slots else peak * k / slots,
        "preemptions": int(req["preemptions"].sum()),
        # The engine's 10 s samples (what a vLLM stats line shows; SGLang logs per batch instead).
        "stats": {
            "intervals": stats.height, "peak_running": as_int(stats["running"].max() or 0),
            "peak_waiting": as_int(stats["waiting"].max() or 0), "kv_usage_max": as_float(stats["kv_usage"].max() or 0.0),
            "intervals_waiting": waiting.height, "intervals_at_cap": at_cap.height,
            "intervals_at_cap_waiting": int((at_cap["waiting"] > 0).sum()),
            "kv_usage_mean_while_waiting": as_float(waiting["kv_usage"].mean()) if waiting.height else None,
            "kv_usage_median_at_cap": as_float(at_cap["kv_usage"].median()) if at_cap.height else None,
        },
    }  # fmt: skip


def ground_truth(results: list[SimResult]) -> dict[str, Any]:
    """Facts of the simulated requests and pods (deployments already named as written)."""
    req = pl.concat([r.requests for r in results], how="vertical_relaxed")
    pods = []
    for r in results:
        for pod in r.pods.to_dicts():
            key = (pl.col("deployment") == pod["deployment"]) & (pl.col("label") == pod["label"])
            pods.append(_pod(pod, r.requests.filter(key), r.stats.filter(key)))
    days = (
        req.group_by(pl.col("arrival").dt.date().alias("day"), "engine").agg(pl.len().alias("requests"))
        .sort("day", "engine")
    )  # fmt: skip
    prompt = int(req["prompt_tokens"].sum())
    return {
        "kv_len_threshold": KV_LEN_THRESHOLD,
        "totals": {
            "requests": req.height, "prompt_tokens_sum": prompt, "prompt_tokens_mean": _mean(prompt, req.height),
            "kv_len_over_threshold": _over(req), "first_arrival": _iso(req["arrival"].min()),
            "last_finished": _iso(req["finished"].max()),
        },  # fmt: skip
        "workloads": _workloads(req),
        "cohorts": _cohorts(req),
        "deployments": pods,
        "requests_per_day": [{"day": d["day"].isoformat(), "engine": d["engine"], "requests": d["requests"]}
                             for d in days.to_dicts()],
    }
