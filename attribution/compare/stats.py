"""Re-weighted percentiles of one cohort's requests and their stratified bootstrap.

Requests fall into strata (workload x prompt-length bucket). A cohort's re-weighted percentile is the
percentile of the mixture in which stratum s has weight w_s (a common mix shared by both cohorts) and every
request of s counts w_s / n_s. The point estimate interpolates linearly between order statistics (with equal
weights it is DuckDB's quantile_cont); the bootstrap resamples n_s requests with replacement within every
stratum and takes the inverted-CDF percentile (the smallest value whose re-weighted CDF reaches p), found
by bisection over the sorted values with conditional binomial draws (a rounded normal where a draw's
variance exceeds 25), so no index arrays of size resamples x requests are ever built. Resamples come in
blocks of BLOCK, each from its own random stream, so any process can draw any block (compare on Spark).
"""

from __future__ import annotations

import numpy as np

PERCENTILES = (0.5, 0.9, 0.95, 0.99)  # judged by compare and the report (p95: >= 200 requests a cohort)
RESAMPLES = 1000
BLOCK = 125  # resamples drawn from one random stream: the unit compare's Spark path distributes
CI_LEVEL = 0.95
EPS = 1e-12
NORMAL_VAR = 25.0
TABLE_CELLS = 4_000_000  # strata x distinct values up to which cumulative counts are tabled (32 MB)


def mix_weights(codes_a: np.ndarray, codes_b: np.ndarray, n_strata: int, mix: str = "pooled") -> np.ndarray:
    """Common weights per stratum, zero where either cohort has no request: `pooled` (both cohorts' requests
    together), `before` or `after` (that cohort's mix)."""
    na = np.bincount(codes_a, minlength=n_strata).astype(float)
    nb = np.bincount(codes_b, minlength=n_strata).astype(float)
    both = (na > 0) & (nb > 0)
    base = {"pooled": na + nb, "before": na, "after": nb}[mix]
    w = np.where(both, base, 0.0)
    total = w.sum()
    return w / total if total > 0 else w


def weighted_percentiles(values: np.ndarray, codes: np.ndarray, weights: np.ndarray,
                         ps: tuple[float, ...] = PERCENTILES, order: np.ndarray | None = None,
                         method: str = "linear") -> np.ndarray:
    """Re-weighted percentiles with linear interpolation: item i (sorted, unit weight u_i, cumulative C_i)
    sits at position (C_i - u_i) / (1 - u_last); with equal weights that is (i - 1) / (n - 1), numpy's and
    DuckDB quantile_cont's rule. NaN when no request falls in a weighted stratum. `order`, if given, is the
    stable argsort of the values in weighted strata, saving the sort."""
    keep = weights[codes] > 0
    v, c = values[keep], codes[keep]
    if v.size == 0:
        return np.full(len(ps), np.nan)
    unit = unit_weights(c, weights)
    if order is None:
        order = np.argsort(v, kind="stable")
    return sorted_weighted_percentiles(v[order], c[order], unit, float(unit[c].sum()), ps, method)


def unit_weights(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per stratum, the weight of one of its requests among `codes` (the requests in weighted strata):
    w_s / n_s."""
    n_s = np.bincount(codes, minlength=weights.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        return weights / n_s


def sorted_weighted_percentiles(v: np.ndarray, c: np.ndarray, unit: np.ndarray, total: float,
                                ps: tuple[float, ...] = PERCENTILES, method: str = "linear") -> np.ndarray:
    """`weighted_percentiles` of requests already in stable sorted order (values `v`, strata `c`, all in
    weighted strata), with `unit` from `unit_weights` and `total` = the sum of their unit weights. The sum is
    the caller's, so that it is added in the same order as weighted_percentiles adds it (request order):
    floating-point sums depend on the order, and the percentiles must not. `method` inverted_cdf: the
    smallest value whose re-weighted CDF reaches p, the percentile bootstrap_percentiles computes in each
    resample (so a point estimate and its bootstrap come from one estimator)."""
    if v.size == 0:
        return np.full(len(ps), np.nan)
    if v.size == 1:
        return np.full(len(ps), v[0])
    u = unit[c] / total
    if method == "inverted_cdf":
        at = np.searchsorted(np.cumsum(u), np.asarray(ps, float) - EPS, side="left")
        return v[np.minimum(at, v.size - 1)]
    pos = (np.cumsum(u) - u) / (1.0 - u[-1])
    return np.interp(np.asarray(ps), pos, v)


def _distinct(v: np.ndarray, order: np.ndarray | None, presorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(v, return_inverse=True), from the values' argsort when known (or `v` itself, presorted)."""
    if presorted:
        new = np.empty(v.size, bool)
        new[:1] = True
        np.not_equal(v[1:], v[:-1], out=new[1:])
        return v[new], np.cumsum(new) - 1
    if order is None:
        return np.unique(v, return_inverse=True)
    sv = v[order]
    new = np.empty(sv.size, bool)
    new[:1] = True
    np.not_equal(sv[1:], sv[:-1], out=new[1:])
    inverse = np.empty(sv.size, np.intp)
    inverse[order] = np.cumsum(new) - 1
    return sv[new], inverse


def bootstrap_percentiles(values: np.ndarray, codes: np.ndarray, weights: np.ndarray,
                          ps: tuple[float, ...] = PERCENTILES, resamples: int = RESAMPLES,
                          seed: int | tuple[int, ...] = 0, order: np.ndarray | None = None,
                          presorted: bool = False) -> np.ndarray:
    """(len(ps), resamples) bootstrap draws of the re-weighted inverted-CDF percentiles (`order` as for
    weighted_percentiles; `presorted`: the values are already in sorted order). The draws depend on the
    requests' (stratum, value) pairs and `seed` only, not on the requests' order: resamples are drawn in
    blocks of BLOCK, block b from the stream `stream(seed, b)` (what compare's Spark path draws on the
    executors, block by block)."""
    blocks = [(n, stream(seed, b)) for b, n in enumerate(block_sizes(resamples))]
    return Resampler(values, codes, weights, order, presorted).draw(ps, blocks)


def block_sizes(resamples: int) -> list[int]:
    """The resamples of each block: BLOCK each, the last one the remainder."""
    return [min(BLOCK, resamples - start) for start in range(0, resamples, BLOCK)]


def stream(seed: int | tuple[int, ...], block: int) -> np.random.Generator:
    """The random stream of one block of resamples: a function of the seed (or a key of several integers)
    and the block's number only, so the draws do not depend on which process draws which block."""
    key = (seed,) if isinstance(seed, int) else tuple(seed)
    return np.random.default_rng([k % 2**64 for k in (*key, block)])


class Resampler:
    """One cohort's requests prepared for drawing resamples (`draw` as often as wanted): each resample draws
    n_s requests with replacement in every stratum s. The percentile is found by bisection over the distinct
    sorted values: the resampled count of stratum s below a cut is a binomial draw conditioned on the counts
    at the enclosing cuts, which is exactly multinomial resampling, evaluated only where the bisection looks
    (about log2(distinct values) cuts)."""

    def __init__(self, values: np.ndarray, codes: np.ndarray, weights: np.ndarray,
                 order: np.ndarray | None = None, presorted: bool = False) -> None:
        keep = weights[codes] > 0
        v, c = values[keep], codes[keep]
        self.empty = v.size == 0
        if self.empty:
            return
        counts = np.bincount(c)
        present = np.flatnonzero(counts)  # np.unique(c), by counting (strata codes are small)
        renumber = np.zeros(counts.size, np.intp)
        renumber[present] = np.arange(present.size)
        c = renumber[c]  # strata renumbered 0..S-1
        self.n_strata = n_strata = present.size
        self.distinct, g = _distinct(v, order, presorted)
        self.k = k = self.distinct.size
        self.n_s = counts[present]
        self.table = self.keys = self.offsets = None
        if n_strata * (k + 1) <= TABLE_CELLS:  # counts below every cut, per stratum: a lookup per query
            self.base = np.arange(n_strata, dtype=np.int64) * (k + 1)
            cells = np.bincount(c.astype(np.int64) * (k + 1) + g + 1, minlength=n_strata * (k + 1))
            self.table = np.cumsum(cells.reshape(n_strata, k + 1), axis=1).ravel()
        else:  # one sorted key per request: a binary search per query
            self.base = np.arange(n_strata, dtype=np.int64) * k
            self.keys = np.sort(c.astype(np.int64) * k + g)
            self.offsets = np.searchsorted(self.keys, np.arange(n_strata, dtype=np.int64) * k)
        w = weights[present]
        self.a = w / w.sum() / self.n_s  # weight of one resampled request of each stratum

    def _below(self, e: np.ndarray) -> np.ndarray:
        """Requests of each stratum below cut e (the first e distinct values)."""
        if self.table is not None:
            return self.table[self.base + e[..., None]]
        assert self.keys is not None and self.offsets is not None  # (the other branch of __init__)
        return np.searchsorted(self.keys, self.base + e[..., None]) - self.offsets

    def draw(self, ps: tuple[float, ...], blocks: list[tuple[int, np.random.Generator]]) -> np.ndarray:
        """(len(ps), total resamples) draws of the re-weighted inverted-CDF percentiles for `blocks` of
        (resamples, stream), side by side in that order. All blocks bisect together (one NumPy pass), but
        each block's random numbers come from its own stream in an order fixed within the block, so a block
        draws the same whether drawn alone or with others."""
        sizes = [n for n, _ in blocks]
        total = sum(sizes)
        if self.empty or not total:
            return np.full((len(ps), total), np.nan)
        k, n_s, a = self.k, self.n_s, self.a
        shape = (total, len(ps))  # resamples first: a block's entries are contiguous
        e_lo = np.zeros(shape, np.int64)
        e_hi = np.full(shape, k, np.int64)
        r_lo = np.zeros((*shape, self.n_strata), np.int64)
        r_hi = np.broadcast_to(n_s, r_lo.shape).copy()
        h_lo, h_hi = r_lo.copy(), r_hi.copy()
        target = (np.asarray(ps, float) - EPS)[None, :]
        starts = np.cumsum([0, *sizes[:-1]])
        rngs = [rng for _, rng in blocks]
        while True:
            active = e_hi - e_lo > 1
            if not active.any():
                break
            e_mid = (e_lo + e_hi) // 2
            h_mid = self._below(e_mid)
            span = h_hi - h_lo
            prob = np.where(span > 0, (h_mid - h_lo) / np.maximum(span, 1), 0.0)
            r_mid = r_lo + _binomial(rngs, starts, r_hi - r_lo, prob)
            left = ((r_mid * a).sum(axis=-1) >= target) & active
            right = ~left & active
            e_hi = np.where(left, e_mid, e_hi)
            e_lo = np.where(right, e_mid, e_lo)
            lft, rgt = left[..., None], right[..., None]
            r_hi, h_hi = np.where(lft, r_mid, r_hi), np.where(lft, h_mid, h_hi)
            r_lo, h_lo = np.where(rgt, r_mid, r_lo), np.where(rgt, h_mid, h_lo)
        return self.distinct[e_hi - 1].T


def _binomial(rngs: list[np.random.Generator], starts: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Binomial draws (n, p: resamples first, the blocks starting at rows `starts`, block i drawn from
    rngs[i]), drawn only where they are random (n > 0, 0 < p < 1): as the bisection narrows, most strata
    have nothing left in the bracket. Where the variance n*p*(1-p) exceeds NORMAL_VAR, the rounded normal
    approximation (its error is far below the resampling noise there; numpy's binomial is slow)."""
    out = np.where(p >= 1.0, n, 0)
    live = (n > 0) & (p > 0.0) & (p < 1.0)
    nl, pl = n[live], p[live]
    var = nl * pl * (1.0 - pl)
    big = var > NORMAL_VAR
    small = ~big
    # the live entries of each block are one run of nl (C order, a block's rows together), and so are its
    # small and big ones in nl[small] and nl[big]: only the random numbers are drawn block by block
    ends = np.cumsum(live.reshape(live.shape[0], -1).sum(axis=1))
    cuts = np.array([0, *(ends[s - 1] for s in starts[1:]), nl.size], np.int64)
    n_small = np.concatenate([[0], np.cumsum(small)])[cuts]
    n_big = cuts - n_small
    ns, ps_ = nl[small], pl[small]
    binomial = [rng.binomial(ns[n_small[i]:n_small[i + 1]], ps_[n_small[i]:n_small[i + 1]])
                if n_small[i + 1] > n_small[i] else np.empty(0, np.int64) for i, rng in enumerate(rngs)]
    normal = [rng.standard_normal(int(n_big[i + 1] - n_big[i])) for i, rng in enumerate(rngs)]
    draws = np.empty(nl.shape, np.int64)
    draws[small] = np.concatenate(binomial)
    x = np.rint(nl[big] * pl[big] + np.sqrt(var[big]) * np.concatenate(normal))
    draws[big] = np.clip(x, 0, nl[big])
    out[live] = draws
    return out


def interval(draws: np.ndarray, level: float = CI_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap draws along the last axis (NaN/inf draws ignored)."""
    d = np.where(np.isfinite(draws), draws, np.nan)
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanpercentile(d, lo, axis=-1), np.nanpercentile(d, hi, axis=-1)
