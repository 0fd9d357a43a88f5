"""One simulation task = one pod in one phase: build its arrivals and engine configuration, run the engine.

Tasks are independent (each has its own seed, spawned from the scenario seed by task index), so they run
in worker processes and the result does not depend on how many workers there are. Numpy only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attribution.simulate import arrivals
from attribution.simulate.engine import PodConfig, run_pod
from attribution.simulate.model import Scenario


@dataclass(frozen=True)
class Task:
    scenario: Scenario
    phase: int
    pod: int
    seed: np.random.SeedSequence
    record_steps: bool
    replay: dict[str, np.ndarray] | None = None  # this pod's share of replayed arrivals
    hashes: list[list[int]] | None = None


def pod_config(scn: Scenario, phase: int, record_steps: bool, cache: bool) -> PodConfig:
    prof = scn.phases[phase].profile
    return PodConfig(
        pool=scn.memory.kv_pool_tokens,
        cap=scn.running_cap,
        budget=scn.max_num_batched_tokens,
        mixed=prof.batching == "mixed",
        base=prof.base_s,
        p_tok=prof.prefill_per_token_s,
        p_attn=prof.prefill_attn_s,
        d_seq=prof.decode_per_seq_s,
        d_tok=prof.decode_per_kv_token_s,
        cache=cache,
        block=scn.block_size,
        interval=scn.stats_interval_s,
        record_steps=record_steps,
        long_min=prof.long_prefill_min_tokens,
        long_scale=prof.long_prefill_scale,
    )


def run_task(task: Task) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    scn = task.scenario
    arr = task.replay if task.replay is not None else arrivals.generate(scn, task.phase, task.pod, task.seed)
    cfg = pod_config(scn, task.phase, task.record_steps, scn.prefix_cache)
    res = run_pod(arr, cfg, task.hashes)
    res["arrivals"] = arr
    res["phase"] = task.phase
    res["pod"] = task.pod
    res["wall_s"] = time.perf_counter() - t0
    res["cpu_s"] = time.process_time() - c0
    return res
