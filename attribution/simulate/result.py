"""The simulator's output as Polars frames: requests, step runs, 10 s stats rows and pod configurations.

Step runs are run-length encoded: a row stands for `n_steps` consecutive steps of identical composition,
the first taking `step_s` seconds and each next one `step_growth_s` more (live tokens grow linearly);
`expand_steps` turns them into one row per step for small runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from attribution.errors import UsageError
from attribution.simulate.arrivals import DAY
from attribution.simulate.model import Scenario

TS = pl.Datetime("us", "UTC")
_STEP_INTS = (
    "n_steps", "running", "waiting", "prefill_tokens", "prefill_reqs", "decode_reqs", "new_seqs", "new_tokens",
    "new_cached", "kv_tokens", "preemptions",
)  # fmt: skip


@dataclass
class SimResult:
    scenario: Scenario
    requests: pl.DataFrame  # one row per request
    steps: pl.DataFrame | None  # one row per run of identical steps (None unless kept)
    stats: pl.DataFrame  # one row per pod per stats interval (vLLM's periodic line)
    pods: pl.DataFrame  # one row per pod and phase: engine configuration and simulation cost
    wall_s: float

    def step_rows(self) -> pl.DataFrame:
        """The step runs expanded to one row per engine step (mind the size: ~50-100 steps/s per pod)."""
        if self.steps is None:
            raise UsageError("this result kept no step rows: run simulate(..., steps=True)")
        return expand_steps(self.steps, self.scenario.memory.kv_pool_tokens)


def hex16(x: np.ndarray) -> pl.Series:
    shifts = np.arange(60, -1, -4, dtype=np.uint64)
    nib = ((x[:, None] >> shifts) & np.uint64(15)).astype(np.uint8)
    chars = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[nib]
    return pl.Series(np.ascontiguousarray(chars).view("S16").ravel()).cast(pl.Utf8)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, a bijection: distinct inputs give distinct, random-looking 64-bit ids."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class _Pod:
    """What every frame of one task needs: names, time origin, pool sizes."""

    def __init__(self, scn: Scenario, res: dict) -> None:
        self.scn, self.res = scn, res
        self.phase = scn.phases[res["phase"]]
        self.dep = f"pod-{res['pod']:02d}"
        self.start_us = int(scn.start.timestamp() * 1_000_000)
        self.k = scn.memory.slots_per_request
        self.slots = scn.memory.state_slots
        self.pool = scn.memory.kv_pool_tokens

    def ts(self, seconds: np.ndarray) -> pl.Series:
        return pl.Series(self.start_us + np.rint(seconds * 1e6).astype(np.int64)).cast(TS)

    def state_usage(self, running: np.ndarray) -> np.ndarray:
        return running * self.k / self.slots if self.slots else np.full(len(running), np.nan)

    def requests(self) -> pl.DataFrame:
        scn, res, a = self.scn, self.res, self.res["arrivals"]
        t, adm, first, fin, out = a["t"], res["admitted"], res["first"], res["finished"], a["output"]
        n = len(t)
        prof = self.phase.profile
        task = np.uint64((scn.seed & 0xFFFF) << 48 | (res["phase"] * scn.pods + res["pod"]) << 32)
        names = {
            f: pl.Series([getattr(w, f) for w in scn.workloads]).gather(a["workload"])
            for f in ("name", "key_alias", "team")
        }
        decode = fin - first
        ids = mix64(task + np.arange(n, dtype=np.uint64))
        if prof.engine == "sglang":  # SGLang's rid (also its OpenAI response id) is uuid4().hex: 32 hex
            rid = hex16(ids) + hex16(mix64(ids ^ np.uint64(0x5BD1E995)))
        else:  # vLLM's OpenAI id: chatcmpl-<random_uuid()>, 16 hex in recent versions
            rid = "chatcmpl-" + hex16(ids)
        df = pl.DataFrame({
            "request_id": rid,
            "deployment": [self.dep] * n, "label": [self.phase.label] * n, "engine": [prof.engine] * n,
            "engine_version": [prof.version] * n, "model": [scn.model] * n,
            "workload": names["name"], "key_alias": names["key_alias"], "team": names["team"],
            "session": a["session"], "turn": a["turn"],
            "arrival": self.ts(t), "admitted": self.ts(adm), "first_token": self.ts(first),
            "finished": self.ts(fin),
            "queue_s": adm - t, "ttft_s": first - t,
            "tpot_s": np.where(out > 1, decode / np.maximum(out - 1, 1), np.nan),
            "e2e_s": fin - t, "prefill_s": first - adm, "decode_s": decode,
            "prompt_tokens": a["prompt"], "output_tokens": out, "cached_tokens": res["cached"],
            "max_tokens": a["max_tokens"], "kv_len_at_prefill": a["prompt"], "preemptions": res["preemptions"],
            "finish_reason": np.where(out >= a["max_tokens"], "length", "stop"),
        })  # fmt: skip
        return df.with_columns(pl.col("tpot_s").fill_nan(None))

    def stats(self) -> pl.DataFrame:
        st, dt = self.res["stats"], self.scn.stats_interval_s
        run = st["running"]
        hit = np.where(st["query_tokens"] > 0, st["hit_tokens"] / np.maximum(st["query_tokens"], 1), 0.0)
        df = pl.DataFrame({
            "ts": self.ts(st["t"]), "t_s": st["t"], "deployment": self.dep, "label": self.phase.label,
            "engine": self.phase.profile.engine, "kind": "stats",
            "running": run.astype(np.int64), "waiting": st["waiting"].astype(np.int64),
            "preemptions": st["preemptions"].astype(np.int64),
            "kv_usage": st["kv_tokens"] / self.pool, "kv_tokens": st["kv_tokens"].astype(np.int64),
            "state_usage": self.state_usage(run), "state_slots": (run * self.k).astype(np.int64),
            "prefix_hit_rate": hit if self.scn.prefix_cache else np.full(len(run), np.nan),
            "prompt_tput": st["prompt_tokens"] / dt, "gen_tput": st["gen_tokens"] / dt,
            "new_seqs": st["new_seqs"].astype(np.int64),
        })  # fmt: skip
        return df.with_columns(pl.col("state_usage", "prefix_hit_rate").fill_nan(None))

    def steps(self) -> pl.DataFrame:
        sp = self.res["steps"]
        ints = {c: sp[c].astype(np.int64) for c in _STEP_INTS}
        df = pl.DataFrame({
            "ts": self.ts(sp["t"]), "t_s": sp["t"], "deployment": self.dep, "label": self.phase.label,
            **ints,
            "batch_tokens": ints["prefill_tokens"] + ints["decode_reqs"],
            "kv_usage": sp["kv_tokens"] / self.pool, "state_usage": self.state_usage(sp["running"]),
            "step_s": sp["step_s"], "step_growth_s": sp["step_growth_s"], "duration_s": sp["duration_s"],
            "wait_area_s": sp["wait_area_s"],
        })  # fmt: skip
        return df.rename({"new_cached": "cached_tokens"}).with_columns(pl.col("state_usage").fill_nan(None))

    def config(self) -> dict:
        scn, res, prof = self.scn, self.res, self.phase.profile
        t0 = DAY * sum(p.days for p in scn.phases[: res["phase"]])
        return {
            "deployment": self.dep, "label": self.phase.label, "engine": prof.engine, "version": prof.version,
            "profile": prof.name, "model": scn.model, "batching": prof.batching,
            "kv_pool_tokens": self.pool, "state_pool_slots": self.slots, "slots_per_request": self.k,
            "kv_bytes_per_token": scn.memory.kv_bytes_per_token,
            "state_bytes_per_slot": scn.memory.state_bytes_per_slot,
            "max_running_requests": scn.running_cap, "max_num_batched_tokens": scn.max_num_batched_tokens,
            "max_model_len": scn.max_model_len, "prefix_cache": scn.prefix_cache, "block_size": scn.block_size,
            "start_s": t0, "end_s": t0 + DAY * self.phase.days, "requests": len(res["arrivals"]["t"]),
            "iterations": res["iterations"], "steps": res["total_steps"], "wall_s": res["wall_s"],
            "cpu_s": res["cpu_s"],
        }  # fmt: skip


def assemble(scn: Scenario, results: list[dict], wall_s: float) -> SimResult:
    pods = [_Pod(scn, r) for r in results]
    keep = [p for p in pods if p.res["steps"] is not None]
    return SimResult(
        scenario=scn,
        requests=pl.concat([p.requests() for p in pods]),
        steps=pl.concat([p.steps() for p in keep]) if keep else None,
        stats=pl.concat([p.stats() for p in pods]),
        pods=pl.DataFrame([p.config() for p in pods]),
        wall_s=wall_s,
    )


def expand_steps(steps: pl.DataFrame, kv_pool_tokens: int) -> pl.DataFrame:
    """One row per engine step: step j of a run starts at t + j*step_s + growth*j*(j-1)/2 and lasts
    step_s + growth*j; KV grows by one token per decoding request per step; admissions, cached tokens and
    preemptions belong to a run's first step."""
    j = pl.col("j")
    offset = j * pl.col("step_s") + pl.col("step_growth_s") * j * (j - 1) / 2
    once = ("new_seqs", "new_tokens", "cached_tokens", "preemptions")
    kv = pl.col("kv_tokens") + j * pl.col("decode_reqs")
    return (
        steps.with_columns(pl.int_ranges(0, pl.col("n_steps")).alias("j"))
        .explode("j")
        .with_columns(
            pl.col("ts") + pl.duration(microseconds=(offset * 1e6).round().cast(pl.Int64)),
            pl.col("t_s") + offset,
            pl.col("step_s") + pl.col("step_growth_s") * j,
            kv.alias("kv_tokens"),
            (kv / kv_pool_tokens).alias("kv_usage"),
            *[pl.when(j == 0).then(pl.col(c)).otherwise(0).alias(c) for c in once],
        )
        .drop("j", "n_steps", "duration_s", "step_growth_s", "wait_area_s")
    )
