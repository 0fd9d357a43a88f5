"""A replay-like request trace with realistic prefix reuse, as Mooncake-style 512-token block ids, made in NumPy:
multi-turn sessions (each turn's prompt is the previous turn's prompt plus new blocks), opened by one of a few
shared system prompts drawn Zipf-like, sessions interleaved in time. Shapes follow the Mooncake conversation
trace (about 24 blocks per request, a shared first block); the figures are printed, not claimed."""

from __future__ import annotations

import numpy as np

from attribution.cache.lru import Trace

BLOCK = 512


def replay_like(requests: int = 1_000_000, seed: int = 19, system_prompts: int = 200,
                mean_turns: float = 2.0) -> tuple[Trace, dict]:
    rng = np.random.default_rng(seed)
    # sessions and their turns (geometric, mean `mean_turns`), cut to `requests` turns in all
    turns = rng.geometric(1 / mean_turns, size=int(requests / mean_turns * 1.2) + 10)
    turns = turns[: np.searchsorted(np.cumsum(turns), requests) + 1]
    turns[-1] -= turns.sum() - requests
    turns = turns[turns > 0]
    n_sess = len(turns)
    sess = np.repeat(np.arange(n_sess), turns)
    first = np.r_[0, np.cumsum(turns)[:-1]]
    turn = np.arange(requests) - first[sess]
    # a system prompt per session (Zipf-like popularity), 1-8 blocks long, ids shared by every session using it
    pop = 1 / np.arange(1, system_prompts + 1) ** 1.1
    sys_of = rng.choice(system_prompts, size=n_sess, p=pop / pop.sum())
    sys_len = rng.integers(1, 3, size=system_prompts)
    sys_base = np.r_[0, np.cumsum(sys_len)[:-1]]
    # own blocks: the first turn brings a lognormal context, each later turn adds a few blocks
    new = np.where(turn == 0, np.clip(rng.lognormal(2.3, 0.9, requests), 1, 200),
                   np.clip(rng.lognormal(1.6, 0.8, requests), 1, 100)).astype(np.int64)
    own = np.cumsum(new) - np.repeat(np.cumsum(new)[first] - new[first], turns)  # per-session running total
    own_base = sys_len.sum() + np.r_[0, np.cumsum(own[np.cumsum(turns) - 1])[:-1]]  # id range per session
    counts = sys_len[sys_of[sess]] + own
    # ids: the system prompt's ids, then the session's own ids 0..own-1, concatenated per request
    start = np.r_[0, np.cumsum(counts)[:-1]]
    k = np.arange(counts.sum()) - np.repeat(start, counts)
    r = np.repeat(np.arange(requests), counts)
    sl = sys_len[sys_of[sess]][r]
    ids = np.where(k < sl, sys_base[sys_of[sess]][r] + k, own_base[sess][r] + (k - sl))
    lengths = counts * BLOCK - rng.integers(0, BLOCK, size=requests)
    # arrival order: sessions start uniformly over an hour, turns follow after exponential think times
    order = np.argsort(_session_times(rng, turns, first, sess, n_sess), kind="stable")
    counts_o = counts[order]
    gather = np.repeat(start[order] - np.r_[0, np.cumsum(counts_o)[:-1]], counts_o) + np.arange(counts_o.sum())
    tr = Trace(ids[gather], counts_o, lengths[order], None, BLOCK)
    facts = {"requests": requests, "sessions": n_sess, "blocks": int(counts.sum()),
             "unique_blocks": int(len(np.unique(ids))), "mean_blocks_per_request": float(counts.mean()),
             "system_prompts": system_prompts, "seed": seed}
    return tr, facts


def _session_times(rng, turns, first, sess, n_sess) -> np.ndarray:
    """Arrival times: a session starts uniformly in the hour, its turns follow after exponential think times
    (mean 30 s)."""
    gaps = rng.exponential(30, len(sess))
    gaps[first] = 0
    within = np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[first], turns)
    return rng.uniform(0, 3600, n_sess)[sess] + within
