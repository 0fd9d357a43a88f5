"""Exact LRU simulation over prefix-block hashes, at every capacity at once (stack distances).

A block is in an LRU cache of C blocks iff fewer than C other distinct blocks were touched since its last use
(the inclusion property), so one pass computing each block's recency rank at its request's arrival gives the
prefix hit of every request at every capacity. The ranks are counted with NumPy, not a per-block loop (see
`_count_nested`). Semantics follow ../shared/formats/replay-arrivals-cache.md §3.2: a request hits the longest prefix
of its blocks present on arrival, then touches all its blocks in order; capacity is floor(C_tokens / B) blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

NEVER = np.iinfo(np.int64).max  # the rank of a block never seen before (a miss at any capacity)
# The four hit-ratio definitions (formats doc §3.2), always labelled: no single one reproduces both published
# Mooncake "Cache Ratio" figures.
DEFINITIONS = {
    "block_weighted": "D1: hit blocks / blocks (sum over requests)",
    "token_weighted": "D2: hit tokens min(k*B, L) / prompt tokens (sum over requests); what vLLM and SGLang count",
    "mean_request_blocks": "D3: mean over requests of hit blocks / blocks (aiperf analyze-trace)",
    "mean_request_tokens": "D4: mean over requests of hit tokens / prompt tokens",
}


@dataclass
class Trace:
    """Requests in arrival order: `ids` the blocks of all requests concatenated, `counts` blocks per request,
    `lengths` prompt tokens, `groups` the cache a request goes to (0 for one global cache)."""

    ids: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray | None = None
    block: int = 512

    @classmethod
    def from_lists(cls, hashes: list[list[int]], lengths, groups=None, block: int = 512) -> Trace:
        counts = np.fromiter((len(h) for h in hashes), np.int64, len(hashes))
        ids = np.fromiter((x for h in hashes for x in h), np.int64, int(counts.sum()))
        g = None if groups is None else np.asarray(groups, np.int64)
        return cls(ids, counts, np.asarray(lengths, np.int64), g, block)


@dataclass
class Profile:
    """Per block access: the largest recency rank among the request's blocks up to this one (`m`: the block
    hits at capacity C iff m < C) and its weight in each definition; plus each definition's denominator."""

    m: np.ndarray
    weights: dict[str, np.ndarray]
    totals: dict[str, float]
    requests: int

    def ratios(self, capacities) -> dict[str, np.ndarray]:
        """Hit ratio in each definition at each capacity (blocks; np.inf for an unbounded cache)."""
        order = np.argsort(self.m, kind="stable")
        ms = self.m[order]
        caps = np.asarray(capacities, dtype=float)
        # capacity in blocks is whole: floor (a 10^4-token cache holds 19 blocks of 512)
        at = np.searchsorted(ms, np.floor(np.minimum(caps, 2.0**62)).astype(np.int64), side="left")
        out = {}
        for name, w in self.weights.items():
            cum = np.concatenate([[0.0], np.cumsum(w[order])])
            out[name] = cum[at] / self.totals[name] if self.totals[name] else np.full(len(caps), np.nan)
        return out


def _prev_next(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each position: the previous and next position with the same key (-1 / len when none)."""
    n = len(key)
    order = np.argsort(key, kind="stable")
    same = key[order][1:] == key[order][:-1]
    prev = np.full(n, -1, np.int64)
    nxt = np.full(n, n, np.int64)
    prev[order[1:][same]] = order[:-1][same]
    nxt[order[:-1][same]] = order[1:][same]
    return prev, nxt


def _count_nested(s: np.ndarray, v: np.ndarray, p: np.ndarray, t: np.ndarray, n: int) -> np.ndarray:
    """For each query (p, t): how many points (s, v) have s > p and v < t (positions < n). Offline dominance
    counting by bit levels of the position, every pass a NumPy array operation: points and queries are sorted
    once by value (a query before a point of equal value: strictly less), then from the top bit down the
    items stay ordered by (position >> (k+1), value); a query in the left half of its 2^(k+1) block counts
    the right-half points before it (a cumulative sum), and a stable partition by bit k (O(n), no sort) gives
    the next level's order. Every pair s > p is counted once, at the highest bit where they differ."""
    nq = len(p)
    out = np.zeros(nq, np.int64)
    if nq == 0 or len(s) == 0:
        return out
    it: Any = np.int32 if 2 * n + 2 < 2**31 else np.int64  # half the memory traffic on any realistic trace
    order = np.argsort(np.concatenate([v * 2 + 1, t * 2]), kind="stable")
    pos = np.concatenate([s, p]).astype(it)[order]
    qid = (order - len(s)).astype(it)  # a query's index, negative for a point
    del order
    m = len(pos)
    idx = np.arange(m, dtype=it)
    start = np.empty(m, bool)
    start[0] = True
    for k in range(max(1, int(n).bit_length()) - 1, -1, -1):
        blk = pos >> (k + 1)
        np.not_equal(blk[1:], blk[:-1], out=start[1:])
        del blk
        bit = ((pos >> k) & 1).astype(bool)
        isq = qid >= 0
        starts = np.flatnonzero(start).astype(it)
        run = np.cumsum(start, dtype=it) - 1
        bs = starts[run]  # where the item's block begins in the current order
        right_pt = bit & ~isq
        c = np.cumsum(right_pt, dtype=it) - right_pt  # right-half points strictly before the item
        sel = np.flatnonzero(isq & ~bit)
        out[qid[sel]] += c[sel] - c[bs[sel]]
        zero = ~bit
        c0 = np.cumsum(zero, dtype=it) - zero
        n0 = np.add.reduceat(zero.astype(it), starts)
        newpos = np.where(zero, bs + (c0 - c0[bs]), bs + n0[run] + ((idx - c0) - (bs - c0[bs])))
        tmp = np.empty_like(pos)
        tmp[newpos] = pos
        pos = tmp
        tmp = np.empty_like(qid)
        tmp[newpos] = qid
        qid = tmp
    return out


def profile(tr: Trace) -> Profile:
    """The stack-distance profile of a trace (see the module docstring); requests without blocks are left out."""
    keep = tr.counts > 0
    counts, lengths = tr.counts[keep], tr.lengths[keep]
    groups = None if tr.groups is None else tr.groups[keep]
    ids = tr.ids[np.repeat(keep, tr.counts)]
    req = np.repeat(np.arange(len(counts)), counts)
    if groups is not None:  # one cache per group: concatenate the groups' sequences, keys made distinct
        order = np.argsort(groups[req], kind="stable")
        ids, req = ids[order], req[order]
        g = groups[req]
        codes = np.unique(ids, return_inverse=True)[1].ravel()  # dense, so (code, group) fits one int64
        key = codes * (int(g.max()) - int(g.min()) + 1) + (g - g.min())
    else:
        key = ids
    n = len(key)
    pos = np.arange(n, dtype=np.int64)
    # each request's first position (its blocks are contiguous, also after grouping)
    start = np.zeros(len(counts), np.int64)
    first = np.r_[True, req[1:] != req[:-1]] if n else np.zeros(0, bool)
    start[req[first]] = pos[first]
    t0 = start[req]
    prev, nxt = _prev_next(key)
    rank = np.full(n, NEVER, np.int64)
    q = (prev >= 0) & (prev < t0)  # seen before this request: rank at the request's arrival
    pt = nxt < n
    nested = _count_nested(pos[pt], nxt[pt], prev[q], t0[q], n)
    rank[q] = (t0[q] - prev[q] - 1) - nested
    dup = prev >= t0  # a block repeated within its request: same status as its first occurrence there
    if dup.any():
        # with positions ordered by (key, position), a request's repeats of one key are one run: its first
        order = np.argsort(key, kind="stable")
        new_run = np.r_[True, (key[order][1:] != key[order][:-1]) | (req[order][1:] != req[order][:-1])]
        first_of = np.empty(n, np.int64)
        first_of[order] = order[np.maximum.accumulate(np.where(new_run, np.arange(n), 0))]
        rank = rank[first_of]
    big = np.int64(n + 2)
    capped = np.minimum(rank, big - 1)
    run = np.cumsum(first) - 1  # the request's index in access order (grouping reorders requests)
    seg = np.maximum.accumulate(run * big + capped) - run * big  # prefix max within each request
    m = np.where(seg >= big - 1, NEVER, seg)
    j = pos - t0
    L = lengths[req].astype(np.float64)
    b = tr.block
    tok = np.clip(np.minimum((j + 1) * b, L) - np.minimum(j * b, L), 0, None)
    nreq = len(counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = {
            "block_weighted": np.ones(n),
            "token_weighted": tok,
            "mean_request_blocks": 1.0 / counts[req],
            "mean_request_tokens": np.where(L > 0, tok / L, 0.0),
        }
    totals = {"block_weighted": float(n), "token_weighted": float(lengths.sum()),
              "mean_request_blocks": float(nreq), "mean_request_tokens": float(nreq)}
    return Profile(m, weights, totals, nreq)
