"""`simulate()`: run a scenario's pods and phases as independent tasks (in worker processes when there
are several), generating arrivals or splitting replayed ones, and return a `SimResult` (see result.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from attribution.db import as_float, as_time
from attribution.errors import InputError, UsageError
from attribution.simulate.arrivals import DAY
from attribution.simulate.model import Scenario, Workload, load_scenario, validate
from attribution.simulate.pods import Task, run_task
from attribution.simulate.result import SimResult, assemble

STEP_ROWS_AUTO = 500_000  # keep per-step rows by default up to this many expected requests


def _replay_tasks(scn: Scenario, df: pl.DataFrame) -> tuple[Scenario, list]:
    """Split replayed arrivals by phase (time) and pod (round robin); workloads are matched by name."""
    for col in ("arrival", "prompt_tokens", "output_tokens"):
        if col not in df.columns:
            raise InputError(f"replay arrivals need a column {col!r} (have {df.columns})")
    if df.schema["arrival"].is_temporal():
        start = as_time(df["arrival"].min())
        assert start is not None  # (replay arrivals have an arrival time)
        df = df.with_columns(((pl.col("arrival") - pl.lit(start)).dt.total_microseconds() / 1e6).alias("t"))
        scn = replace(scn, start=start if start.tzinfo else start.replace(tzinfo=scn.start.tzinfo))
    else:
        df = df.with_columns(pl.col("arrival").cast(pl.Float64).alias("t"))
    df = df.sort("t", maintain_order=True)
    names = df["workload"].cast(pl.Utf8).fill_null("replay") if "workload" in df.columns else None
    known = {w.name: w for w in scn.workloads}
    order = ["replay"] if names is None else list(dict.fromkeys(names.to_list()))
    # Unknown workload names become workloads of their own (alias and team = the name).
    wls = [known.get(nm) or Workload(nm, nm, nm, 0.0, None, None, scn.max_model_len - 1) for nm in order]
    idx = {nm: i for i, nm in enumerate(order)}
    phases = scn.phases
    if len(phases) == 1:  # one phase spans the whole replay
        phases = (replace(phases[0], days=as_float(df["t"].max() or 0.0) / DAY + 1e-9),)
    scn = replace(scn, workloads=tuple(wls), phases=phases)
    # an unknown output length (a trace without it) replays as one token, never as a NaN cast to int64
    output = df["output_tokens"].fill_null(1)
    max_tok = df["max_tokens"].fill_null(output) if "max_tokens" in df.columns else output
    arr = {
        "t": df["t"].to_numpy().astype(float),
        "prompt": df["prompt_tokens"].to_numpy().astype(np.int64),
        "output": np.maximum(output.to_numpy().astype(np.int64), 1),
        "max_tokens": max_tok.to_numpy().astype(np.int64),
        "workload": np.zeros(df.height, np.int64) if names is None else names.replace_strict(idx).to_numpy(),
        "session": np.arange(df.height, dtype=np.int64),
        "turn": np.zeros(df.height, np.int64),
        "cached": df["cached_tokens"].fill_null(-1).to_numpy().astype(np.int64)
        if "cached_tokens" in df.columns
        else np.full(df.height, -1, np.int64),
    }
    # The engine rejects these (prompt + output must fit the context); kept, they could never run.
    too_long = arr["prompt"] + arr["output"] > scn.max_model_len
    if too_long.any():
        raise InputError(
            f"{int(too_long.sum())} replayed requests need more than max_model_len={scn.max_model_len} tokens"
        )
    hashes = df["block_hashes"].to_list() if "block_hashes" in df.columns else None
    bounds = np.cumsum([0.0] + [p.days * DAY for p in scn.phases])
    phase_of = np.clip(np.searchsorted(bounds, arr["t"], side="right") - 1, 0, len(scn.phases) - 1)
    parts = []
    for ph in range(len(scn.phases)):
        for pod in range(scn.pods):
            sel = np.nonzero((phase_of == ph) & (np.arange(df.height) % scn.pods == pod))[0]
            sub = {k: v[sel] for k, v in arr.items()}
            parts.append((sub, None if hashes is None else [hashes[i] or [] for i in sel]))
    return scn, parts


def simulate(
    scenario: Scenario | str | Path,
    *,
    requests: int | None = None,
    days: float | None = None,
    seed: int | None = None,
    arrivals: pl.DataFrame | None = None,
    steps: bool | None = None,
    workers: int | None = None,
) -> SimResult:
    """Simulate `scenario` (a Scenario, a TOML path or a packaged scenario name).

    `requests`/`days` rescale the run (see `Scenario.with_horizon`); `seed` overrides the scenario's seed;
    `arrivals` replays a frame (arrival, prompt_tokens, output_tokens[, workload, cached_tokens,
    max_tokens, block_hashes]) instead of generating traffic; `steps` keeps one row per step run (default:
    only when the run has at most 500,000 requests, as the rows take ~120 bytes each); `workers` is the
    number of processes (default: one per core, at most one per pod and phase).
    """
    t_start = time.perf_counter()
    scn = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if seed is not None:
        scn = replace(scn, seed=int(seed))
    if (arrivals is not None or scn.replay is not None) and (requests is not None or days is not None):
        raise UsageError("requests/days do not apply to a replay: it has its own arrivals")
    if arrivals is None and scn.replay is not None:
        arrivals = _read_replay(scn.replay)
    validate(scn, replay=arrivals is not None)
    parts = None
    if arrivals is None:
        scn = scn.with_horizon(requests=requests, days=days)
        expected = scn.requests_per_day * scn.days
    else:
        scn, parts = _replay_tasks(scn, arrivals)
        expected = arrivals.height
    record = expected <= STEP_ROWS_AUTO if steps is None else bool(steps)
    seeds = np.random.SeedSequence(scn.seed).spawn(len(scn.phases) * scn.pods)
    tasks = []
    for ph in range(len(scn.phases)):
        for pod in range(scn.pods):
            i = ph * scn.pods + pod
            rep, hs = (None, None) if parts is None else parts[i]
            tasks.append(Task(scn, ph, pod, seeds[i], record, rep, hs))
    n_workers = min(len(tasks), workers or os.cpu_count() or 1)
    if n_workers <= 1:
        results = [run_task(t) for t in tasks]
    else:
        # fork where there is one: workers run numpy-only code (never Polars, whose thread pool makes a
        # forked child unsafe to use Polars in), and need no `if __name__ == "__main__"` guard in scripts.
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*fork.*", category=RuntimeWarning)
            with ProcessPoolExecutor(n_workers, mp_context=mp.get_context(method)) as ex:
                results = list(ex.map(run_task, tasks))
    return assemble(scn, results, time.perf_counter() - t_start)


def _read_replay(path: str) -> pl.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"replay file {path} does not exist")
    if p.suffix == ".parquet":
        return pl.read_parquet(p)
    if p.suffix in (".jsonl", ".ndjson"):
        return pl.read_ndjson(p)
    if p.suffix == ".csv":
        return pl.read_csv(p)
    raise UsageError(f"replay file {path}: use .parquet, .jsonl or .csv")
