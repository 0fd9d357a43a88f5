"""`simulate --replay`: run a scenario's engine on a real arrival sequence (a replay export, a Mooncake,
BurstGPT or Azure trace, any log the ingest reads; attribution.replay.read_trace) with what-if changes to the
deployment: the KV pool and state slots (a memory split), the running cap (`max_num_seqs`), a faster prefill,
the number of pods. Returns the simulated run and a per-workload latency summary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from attribution.errors import UsageError
from attribution.simulate.model import Scenario, load_scenario
from attribution.simulate.result import SimResult
from attribution.simulate.truth import peak_overlap


@dataclass(frozen=True)
class WhatIf:
    """Changes to the scenario's deployment for the replay; None keeps the scenario's value."""

    kv_tokens: int | None = None
    state_slots: int | None = None
    max_num_seqs: int | None = None
    prefill_speedup: float | None = None
    pods: int | None = None

    def apply(self, scn: Scenario) -> Scenario:
        for name in ("kv_tokens", "state_slots", "max_num_seqs", "pods"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {v})")
        if self.prefill_speedup is not None and not self.prefill_speedup > 0:
            raise UsageError(f"--prefill-speedup must be positive (got {self.prefill_speedup})")
        mem = scn.memory
        if self.kv_tokens is not None or self.state_slots is not None:
            mem = replace(mem, kv_pool_tokens=self.kv_tokens or mem.kv_pool_tokens,
                          state_slots=self.state_slots if self.state_slots is not None else mem.state_slots)
        phases = scn.phases
        if self.prefill_speedup:
            # a faster prefill: its per-token and attention costs divided (decode and the step base unchanged)
            f = self.prefill_speedup
            phases = tuple(replace(p, profile=replace(p.profile, prefill_per_token_s=p.profile.prefill_per_token_s / f,
                                                      prefill_attn_s=p.profile.prefill_attn_s / f)) for p in phases)
        return replace(scn, memory=mem, phases=phases, pods=self.pods or scn.pods,
                       max_running_requests=self.max_num_seqs or scn.max_running_requests)


def fit_context(scn: Scenario, arrivals: pl.DataFrame) -> tuple[Scenario, list[str]]:
    """Raise max_model_len to the trace's longest request where the KV pool holds it (a replay must not drop
    requests the real deployment served); a pool too small for it stays an error of the simulator."""
    longest = int(arrivals.select((pl.col("prompt_tokens") + pl.col("output_tokens").fill_null(1)).max()).item() or 0)
    if longest + 1 <= scn.max_model_len or longest + 1 > scn.memory.kv_pool_tokens:
        return scn, []
    return replace(scn, max_model_len=longest + 1), [
        f"max_model_len raised from {scn.max_model_len:,} to {longest + 1:,} for the trace's longest request"]


def summary(res: SimResult) -> pl.DataFrame:
    """Per workload (and overall, when there are several): requests, queue, TTFT and end-to-end p50 / p99 (seconds), peak running."""
    r = res.requests

    def stats(df: pl.DataFrame) -> list[pl.Expr]:
        return [pl.len().alias("requests"),
                *[pl.col(c).quantile(q, "linear").alias(f"{c[:-2]}_p{int(q * 100)}")
                  for c in ("queue_s", "ttft_s", "e2e_s") for q in (0.5, 0.99)],
                pl.lit(peak_overlap(df["admitted"], df["finished"])).alias("peak_running")]

    per = []
    for w in r["workload"].unique(maintain_order=True).to_list():
        sub = r.filter(pl.col("workload") == w)
        per.append(sub.select(pl.lit(w).alias("workload"), *stats(sub)))
    every = r.select(pl.lit("all").alias("workload"), *stats(r))
    return pl.concat([*per, every]) if len(per) > 1 else (per[0] if per else every)


def simulate_replay(path: str | Path, scenario: str | Path, what: WhatIf | None = None, *, seed: int | None = None,
                    workers: int | None = None) -> tuple[SimResult, pl.DataFrame, list[str]]:
    """Replay the trace at `path` through `scenario` (a packaged name or .toml) changed by `what`."""
    from attribution.replay import read_trace
    from attribution.simulate import simulate

    arrivals, notes = read_trace(path)
    scn = (what or WhatIf()).apply(load_scenario(scenario))
    scn, more = fit_context(scn, arrivals)
    res = simulate(scn, arrivals=arrivals, seed=seed, workers=workers, steps=None)
    return res, summary(res), notes + more
