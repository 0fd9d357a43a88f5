"""vLLM V1's Prometheus metrics of simulated pods, as a Prometheus `/api/v1/query_range` export would save
them (one JSON file per pod, `{"status":"success","data":{"resultType":"matrix","result":[...]}}`), scraped on
a grid of `step_s` seconds aligned to the epoch, as a range query's steps are.

What is written, with vLLM's names, labels and bucket edges (../shared/formats/engine-logs.md §V-5, 0.8.5+):
- histograms (`_bucket{le}`, `_sum`, `_count`): `time_to_first_token_seconds` (observed at the first token),
  `request_time_per_output_token_seconds`, `e2e_request_latency_seconds`, `request_queue_time_seconds`,
  `request_prompt_tokens`, `request_generation_tokens` (observed when the request finishes);
- gauges `num_requests_running`, `num_requests_waiting`, `kv_cache_usage_perc`: the pod's last 10 s stats
  row at or before the scrape;
- counters `prefix_cache_queries_total` / `prefix_cache_hits_total` (prompt and cached tokens, counted when the
  request is scheduled).
Every value counts from the engine's start: an engine restart (a new phase, the upgrade) resets the counters
and histograms, as a restarted pod's do. The per-iteration `inter_token_latency_seconds` is not written: the
simulator keeps one mean time per output token per request, not each token's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl

from attribution.simulate.result import SimResult

TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
        80.0, 160.0, 640.0, 2560.0)
TPOT = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
PHASES = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0)


def tokens_1_2_5(max_model_len: int) -> tuple[float, ...]:
    """vLLM's `build_1_2_5_buckets(max_model_len)`: 1, 2, 5, 10, 20, 50, ... up to max_model_len."""
    out: list[int] = []
    mag = 1
    while True:
        for m in (1, 2, 5):
            if m * mag > max_model_len:
                return tuple(float(v) for v in out)
            out.append(m * mag)
        mag *= 10


# metric -> (the request column holding the observation's time, the observed value's column, edges or None
# for the token edges of the pod's max_model_len)
HISTOGRAMS: dict[str, tuple[str, str, tuple[float, ...] | None]] = {
    "vllm:time_to_first_token_seconds": ("first_token", "ttft_s", TTFT),
    "vllm:request_time_per_output_token_seconds": ("finished", "tpot_s", TPOT),
    "vllm:e2e_request_latency_seconds": ("finished", "e2e_s", PHASES),
    "vllm:request_queue_time_seconds": ("finished", "queue_s", PHASES),
    "vllm:request_prompt_tokens": ("finished", "prompt_tokens", None),
    "vllm:request_generation_tokens": ("finished", "output_tokens", None),
}
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
          "vllm:kv_cache_usage_perc": "kv_usage"}
COUNTERS = {"vllm:prefix_cache_queries_total": "prompt_tokens", "vllm:prefix_cache_hits_total": "cached_tokens"}


def _num(v: float) -> str:
    """A sample value as Prometheus' API prints it: the shortest text that reads back as the float."""
    return repr(float(v)) if v != int(v) else str(int(v))


def _series(labels: dict[str, str], ts: np.ndarray, values: np.ndarray) -> dict:
    return {"metric": labels, "values": [[int(t), _num(v)] for t, v in zip(ts, values, strict=True)]}


def _seconds(s: pl.Series) -> np.ndarray:
    return s.dt.epoch("us").to_numpy() / 1e6


def _phase_series(req: pl.DataFrame, stats: pl.DataFrame, grid: np.ndarray, base: dict[str, str],
                  max_model_len: int) -> list[dict]:
    """The series of one engine start (counts from zero) at the scrape times `grid` (epoch seconds)."""
    out = []
    for metric, (when, col, edges) in HISTOGRAMS.items():
        rows = req.filter(pl.col(col).is_not_null() & pl.col(when).is_not_null())
        edges = edges or tokens_1_2_5(max_model_len)
        t = _seconds(rows[when])
        k = np.searchsorted(grid, t, "left")  # the first scrape at or after the observation counts it
        v = rows[col].cast(pl.Float64).to_numpy()
        keep = k < len(grid)
        k, v = k[keep], v[keep]
        b = np.searchsorted(np.asarray(edges), v, "left")  # the first bucket whose `le` holds the value
        nb = len(edges) + 1
        counts = np.bincount(k * nb + b, minlength=len(grid) * nb).reshape(len(grid), nb)
        cum = counts.cumsum(axis=0).cumsum(axis=1)  # over time, then over buckets (le is cumulative)
        for j, le in enumerate([*edges, float("inf")]):
            le_text = "+Inf" if le == float("inf") else repr(float(le))  # prometheus_client: 1.0, 0.001
            out.append(_series({"__name__": f"{metric}_bucket", **base, "le": le_text}, grid, cum[:, j]))
        out.append(_series({"__name__": f"{metric}_sum", **base}, grid,
                           np.bincount(k, weights=v, minlength=len(grid)).cumsum()))
        out.append(_series({"__name__": f"{metric}_count", **base}, grid, cum[:, -1]))
    sched = req.filter(pl.col("admitted").is_not_null())
    k = np.searchsorted(grid, _seconds(sched["admitted"]), "left")
    keep = k < len(grid)
    for metric, col in COUNTERS.items():
        w = sched[col].fill_null(0).cast(pl.Float64).to_numpy()[keep]
        out.append(_series({"__name__": metric, **base}, grid, np.bincount(k[keep], weights=w,
                                                                           minlength=len(grid)).cumsum()))
    st = stats.sort("ts")
    idx = np.searchsorted(_seconds(st["ts"]), grid, "right") - 1  # the last stats row at or before the scrape
    for metric, col in GAUGES.items():
        vals = st[col].cast(pl.Float64).fill_null(0.0).to_numpy()
        out.append(_series({"__name__": metric, **base}, grid, np.where(idx >= 0, vals[np.maximum(idx, 0)], 0.0)))
    return out


def write_prometheus(res: SimResult, out_dir: Path, step_s: int, *, gz: bool = True) -> list[Path]:
    """One `<deployment>.json[.gz]` per vLLM pod of `res` in `out_dir`; returns the paths written."""
    written = []
    pods = res.pods.filter(pl.col("engine") == "vllm").sort("start_s")
    start_us = int(res.scenario.start.timestamp() * 1_000_000)
    for (dep,), phases in pods.group_by("deployment", maintain_order=True):
        result: dict[str, dict] = {}
        for ph in phases.iter_rows(named=True):
            t0 = start_us / 1e6 + ph["start_s"]
            t1 = start_us / 1e6 + ph["end_s"]
            grid = np.arange(np.ceil(t0 / step_s) * step_s, t1, step_s, dtype=np.float64)
            if not len(grid):
                continue
            sel = (pl.col("deployment") == dep) & (pl.col("label") == ph["label"])
            base = {"engine": "0", "instance": f"{dep}:8000", "job": "vllm", "model_name": ph["model"],
                    "namespace": "llm", "pod": dep}
            for s in _phase_series(res.requests.filter(sel), res.stats.filter(sel), grid, base,
                                   int(ph["max_model_len"])):
                key = json.dumps(s["metric"], sort_keys=True)
                if key in result:
                    result[key]["values"].extend(s["values"])  # the same series after a restart
                else:
                    result[key] = s
        doc = {"status": "success", "data": {"resultType": "matrix", "result": list(result.values())}}
        text = json.dumps(doc, separators=(",", ":")).encode()
        path = out_dir / f"{dep}.json{'.gz' if gz else ''}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text, mtime=0) if gz else text)
        written.append(path)
    return written
