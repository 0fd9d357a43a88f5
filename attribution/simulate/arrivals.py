"""Arrival streams for one pod and one phase: Poisson or bursty (Gamma renewal) processes per workload,
multi-turn sessions, a daily rate cycle, or a replay of given arrivals. Numpy only (runs in worker processes).

Times are seconds since the scenario start. A daily cycle is applied by time change: events of a unit-rate
process in "operational time" u are mapped through the inverse of the cumulative intensity Lambda(t).
"""

from __future__ import annotations

import math

import numpy as np

from attribution.simulate.model import Scenario, Workload

DAY = 86400.0
FIELDS = ("t", "prompt", "output", "max_tokens", "workload", "session", "turn", "cached")


def _cum_intensity(scn: Scenario, t: np.ndarray) -> np.ndarray:
    """Lambda(t) for the rate multiplier m(t) = 1 + A cos(2 pi (clock - peak) / day), whose daily mean is 1."""
    amp = scn.diurnal_amplitude
    if amp == 0.0:
        return t
    clock0 = scn.start.hour * 3600 + scn.start.minute * 60 + scn.start.second - scn.diurnal_peak_hour * 3600
    w = 2 * math.pi / DAY
    return t + amp / w * (np.sin(w * (t + clock0)) - math.sin(w * clock0))


def _event_times(
    scn: Scenario, rng: np.random.Generator, rate: float, cv: float, process: str, t0: float, t1: float
) -> np.ndarray:
    grid = np.linspace(t0, t1, max(2, int((t1 - t0) / 30.0) + 2))
    lam = _cum_intensity(scn, grid)
    u0, u1 = lam[0], lam[-1]
    expect = rate * (u1 - u0)
    if process == "poisson" or cv == 1.0:
        u = np.sort(rng.uniform(u0, u1, rng.poisson(expect)))
    else:
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / (rate * shape), int(expect * 1.2) + 16)
        u = u0 + np.cumsum(gaps)
        while u[-1] < u1:  # rare: draw more gaps until the window is covered
            more = rng.gamma(shape, 1.0 / (rate * shape), int(expect * 0.2) + 16)
            u = np.concatenate([u, u[-1] + np.cumsum(more)])
        u = u[u < u1]
    return np.interp(u, lam, grid)


def _grouped_cumsum(x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    cs = np.cumsum(x)
    starts = np.cumsum(sizes) - sizes
    return cs - np.repeat(cs[starts] - x[starts], sizes)


def _workload(
    scn: Scenario, w: Workload, wi: int, rng: np.random.Generator, t0: float, t1: float, session0: int
) -> dict[str, np.ndarray]:
    assert w.prompt is not None and w.output is not None  # (only replayed workloads have none; never sampled)
    rate = scn.requests_per_day / DAY * w.share / scn.pods
    limit = scn.max_model_len - w.max_tokens  # prompt + max_tokens must fit, else the engine rejects
    if w.sessions is None:
        t = _event_times(scn, rng, rate, w.cv, w.process, t0, t1)
        n = len(t)
        prompt = np.minimum(w.prompt.sample(rng, n), limit)
        session = session0 + np.arange(n)
        turn = np.zeros(n, dtype=np.int64)
    else:
        starts = _event_times(scn, rng, rate / w.sessions.turns_mean, w.cv, w.process, t0, t1)
        turns = rng.geometric(1.0 / w.sessions.turns_mean, len(starts))
        n = int(turns.sum())
        sid = np.repeat(np.arange(len(starts)), turns)
        turn = np.arange(n) - np.repeat(np.cumsum(turns) - turns, turns)
        gaps = rng.exponential(w.sessions.think_s, n)
        gaps[turn == 0] = 0.0
        t = starts[sid] + _grouped_cumsum(gaps, turns)
        new = w.prompt.sample(rng, n)
        out_tmp = np.minimum(w.output.sample(rng, n), w.max_tokens)
        prev_out = np.roll(out_tmp, 1)
        prev_out[turn == 0] = 0
        # The context of turn k is every earlier prompt message and answer of the session plus the new message.
        prompt = _grouped_cumsum(new + prev_out, turns)
        session = session0 + sid
    output = np.minimum(w.output.sample(rng, n), w.max_tokens) if w.sessions is None else out_tmp
    keep = (t < t1) & (prompt <= limit)
    return {
        "t": t[keep],
        "prompt": prompt[keep].astype(np.int64),
        "output": output[keep].astype(np.int64),
        "max_tokens": np.full(int(keep.sum()), w.max_tokens, dtype=np.int64),
        "workload": np.full(int(keep.sum()), wi, dtype=np.int64),
        "session": session[keep].astype(np.int64),
        "turn": turn[keep].astype(np.int64),
        "cached": np.full(int(keep.sum()), -1, dtype=np.int64),
    }


def merge(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in FIELDS}
    order = np.lexsort((out["session"], out["t"]))  # ties broken by session: deterministic
    return {k: v[order] for k, v in out.items()}


def generate(scn: Scenario, phase: int, pod: int, seed_seq: np.random.SeedSequence) -> dict[str, np.ndarray]:
    """Arrivals of one pod in one phase, sorted by time. Session ids are unique per (phase, pod)."""
    t0 = DAY * sum(p.days for p in scn.phases[:phase])
    t1 = t0 + DAY * scn.phases[phase].days
    parts = []
    session0 = 0
    for wi, (w, ss) in enumerate(zip(scn.workloads, seed_seq.spawn(len(scn.workloads)), strict=True)):
        part = _workload(scn, w, wi, np.random.default_rng(ss), t0, t1, session0)
        if len(part["session"]):
            session0 = int(part["session"].max()) + 1
        parts.append(part)
    return merge(parts)
