"""compare's estimator: percentile ratios after/before of the compare rows, re-weighted to one traffic mix,
with bootstrap intervals widened by the design effect of blocks of arrivals. The point estimates and the
judgement are computed here, in the driver; the bootstrap draws of every ratio asked at once go out as one
batch of Asks to a `Draws` (in-process, or attribution.spark.bootstrap on Spark executors).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attribution.compare import judge, stats
from attribution.compare.resample import Ask, Draws, local_draws

if TYPE_CHECKING:
    from attribution.compare.comparison import CompareRows

Question = tuple[str, "np.ndarray | None", "tuple[float, ...] | None"]  # (metric, subset, ps)


@dataclass
class _Sides:
    """One ratio between the point estimates and the judgement: what its bootstrap draws are still needed
    for (`asks`: before, after; none when no stratum has both cohorts). Only numbers per percentile and
    counts: every question of a batch waits here for the draws, so no per-request array is held (they were
    51 MB for the sample report's 53 questions over 90k requests; at 1M most of the bootstrap's 957 MB peak)."""

    ps: tuple[float, ...]
    pb: np.ndarray  # re-weighted percentiles, before and after
    pa: np.ndarray
    raw_b: np.ndarray  # each cohort's own percentiles (np.quantile over all its requests)
    raw_a: np.ndarray
    d_b: np.ndarray  # design effects per percentile (judge.design_effect; 1 where nothing is drawn)
    d_a: np.ndarray
    neff_b: float  # judge.effective_n of the matched requests
    neff_a: float
    matched_b: int  # requests in strata both cohorts have
    matched_a: int
    unmatched: int
    weighted: bool  # some stratum has both cohorts
    asks: list[Ask]


class Estimator:
    """Percentile ratios after/before of CompareRows, re-weighted to one traffic mix, with bootstrap
    intervals over blocks of arrivals; cached per metric and row mask. `draws` draws the bootstrap
    (resample.local_draws unless given)."""

    def __init__(self, data: CompareRows, *, ps: tuple[float, ...], mix: str, resamples: int, seed: int,
                 tolerance: float = 0.05, draws: Draws | None = None) -> None:
        self.d, self.ps, self.mix, self.resamples, self.tolerance = data, ps, mix, resamples, tolerance
        self.seed, self.draws = seed, draws or local_draws
        self._cache: dict[bytes, list[dict[str, Any]]] = {}
        self._sorted: dict[str, tuple[np.ndarray, ...]] = {}  # metric -> its rows in stable sorted order

    def ratio(self, metric: str, subset: np.ndarray | None = None, ps: tuple[float, ...] | None = None
              ) -> list[dict[str, Any]]:
        """One dict per percentile: re-weighted before/after, ratio with interval, raw (unweighted) ratio.
        The same requests asked twice (a feature that crossed nowhere, two features with one threshold) get
        the same answer, computed once."""
        return self.ratios([(metric, subset, ps)])[0]

    def ratios(self, questions: list[Question]) -> list[list[dict[str, Any]]]:
        """`ratio` of each question, the bootstrap of all those not yet answered drawn in one batch (one
        Spark job)."""
        keyed = [self._key(*q) for q in questions]
        pending: dict[bytes, _Sides] = {}
        for key, metric, ok, ps in keyed:
            if key not in self._cache and key not in pending:
                if metric not in self._sorted:  # sorted once per metric; every subset is a mask over that order
                    vals = self.d.values[metric]
                    order = np.argsort(vals, kind="stable")
                    self._sorted[metric] = (order, vals[order], self.d.codes[order], self.d.after[order])
                pending[key] = self._sides(metric, key, ok, ps, *self._sorted[metric])
        asks = [a for s in pending.values() for a in s.asks]
        drawn: Iterator[np.ndarray] = iter(())
        if asks:
            columns = {m: (self._sorted[m][1], self._sorted[m][2]) for m in {a.column for a in asks}}
            drawn = iter(self.draws(columns, asks))
        for key, sides in pending.items():
            self._cache[key] = self._judge(sides, [next(drawn) for _ in sides.asks])
        return [self._cache[k[0]] for k in keyed]

    def _key(self, metric: str, subset: np.ndarray | None, ps: tuple[float, ...] | None
             ) -> tuple[bytes, str, np.ndarray, tuple[float, ...]]:
        ps = tuple(ps or self.ps)
        vals = self.d.values[metric]
        ok = np.isfinite(vals) if subset is None else np.isfinite(vals) & subset
        h = hashlib.blake2b(digest_size=16)
        for part in (metric.encode(), np.asarray(ps, float).tobytes(), np.packbits(ok).tobytes()):
            h.update(len(part).to_bytes(8, "little") + part)
        return h.digest(), metric, ok, ps

    def stream_key(self, key: bytes, side: int) -> tuple[int, ...]:
        """The random streams of one side (0 before, 1 after) of the question `key`: the seed and the
        question, not the order questions are asked in."""
        return (self.seed, int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little"), side)

    def _sides(self, metric: str, key: bytes, ok: np.ndarray, ps: tuple[float, ...], order: np.ndarray,
               sv: np.ndarray, sc: np.ndarray, s_after: np.ndarray) -> _Sides:
        """`ok` (request order) selects the requests; sv, sc, s_after are the metric's values, strata and
        cohort in stable sorted order (`order`). Each side's values come out sorted as the stable argsort
        would sort them, so the percentiles are those of stats.weighted_percentiles and
        stats.bootstrap_percentiles over the side's requests."""
        d = self.d
        oks = ok[order]
        b, a = oks & ~s_after, oks & s_after
        vb, cb, va, ca = sv[b], sc[b], sv[a], sc[a]
        w = stats.mix_weights(cb, ca, d.n_strata, self.mix)
        weighted = w > 0
        kb, ka = weighted[cb], weighted[ca]
        nan = np.full(len(ps), np.nan)
        ones = np.ones(len(ps))
        matched_b, matched_a = int(kb.sum()), int(ka.sum())
        sides = _Sides(ps, nan, nan, np.quantile(vb, ps) if vb.size else nan,
                       np.quantile(va, ps) if va.size else nan, ones, ones, 0.0, 0.0, matched_b, matched_a,
                       int(vb.size + va.size - matched_b - matched_a), bool(w.sum()), [])
        if w.sum() == 0:
            return sides
        ob, oa = order[b], order[a]  # request indices of each side
        # the sum of the unit weights in request order, as weighted_percentiles adds it
        kept = ok & weighted[d.codes]
        unit_b, unit_a = stats.unit_weights(cb[kb], w), stats.unit_weights(ca[ka], w)
        total_b = float(unit_b[d.codes[kept & ~d.after]].sum())
        total_a = float(unit_a[d.codes[kept & d.after]].sum())
        vb, cb, va, ca = vb[kb], cb[kb], va[ka], ca[ka]  # the matched requests, from here on
        sides.pb = pb = stats.sorted_weighted_percentiles(vb, cb, unit_b, total_b, ps, "inverted_cdf")
        sides.pa = pa = stats.sorted_weighted_percentiles(va, ca, unit_a, total_a, ps, "inverted_cdf")
        # (computed before the draws, so that the questions waiting for them hold no per-request arrays)
        blocks_b, blocks_a = d.blocks[ob[kb]], d.blocks[oa[ka]]
        sides.d_b = np.array([judge.design_effect(vb, blocks_b, pb[i], p) for i, p in enumerate(ps)])
        sides.d_a = np.array([judge.design_effect(va, blocks_a, pa[i], p) for i, p in enumerate(ps)])
        sides.neff_b, sides.neff_a = judge.effective_n(cb, w), judge.effective_n(ca, w)
        on = weighted[sc]
        sides.asks = [Ask(metric, np.packbits(m & on).tobytes(), sv.size, w, ps, self.resamples,
                          self.stream_key(key, i)) for i, m in enumerate((b, a))]
        return sides

    def _judge(self, s: _Sides, draws: list[np.ndarray]) -> list[dict[str, Any]]:
        """The rows of one ratio from its point estimates and bootstrap draws (before, after)."""
        ps, pb, pa, raw_b, raw_a = s.ps, s.pb, s.pa, s.raw_b, s.raw_a
        nan = np.full(len(ps), np.nan)
        se = dsd = nan
        d_b = d_a = np.ones(len(ps))
        if draws:
            db, da = draws
            d_b, d_a = s.d_b, s.d_a
            se = np.sqrt(judge.log_se(db) ** 2 * d_b + judge.log_se(da) ** 2 * d_a)
            dsd = np.sqrt(judge.sd(db) ** 2 * d_b + judge.sd(da) ** 2 * d_a)
        neff_b, neff_a = s.neff_b, s.neff_a
        matched_b, matched_a = s.matched_b, s.matched_a
        out = []
        with np.errstate(all="ignore"):
            for i, p in enumerate(ps):
                ratio = pa[i] / pb[i] if pb[i] > 0 else np.nan
                # the design effect is estimated from BLOCKS blocks: Student's t where it widened the se
                df = judge.BLOCKS - 1.0 if max(d_b[i], d_a[i]) > 1 else np.inf
                lo, hi = judge.ratio_interval(ratio, se[i], df)
                q = judge.z_to_t(judge.Z, df)
                diff, need = pa[i] - pb[i], judge.min_requests(p)
                out.append({
                    "percentile": f"p{p * 100:g}", "before": pb[i], "after": pa[i], "ratio": ratio,
                    "ratio_lo": lo, "ratio_hi": hi,
                    "diff": diff, "diff_lo": diff - q * dsd[i], "diff_hi": diff + q * dsd[i],
                    "raw_before": raw_b[i], "raw_after": raw_a[i],
                    "raw_ratio": raw_a[i] / raw_b[i] if raw_b[i] > 0 else np.nan,
                    "n_before": matched_b, "n_after": matched_a,
                    "unmatched": s.unmatched,
                    "n_eff_before": neff_b, "n_eff_after": neff_a, "min_requests": need,
                    "enough": bool(min(neff_b, neff_a) >= need), "se_log": se[i],
                    "design_effect": float(np.sqrt(d_b[i] * d_a[i])) if s.weighted else np.nan,
                    "df": df, "p_value": judge.p_material(ratio, se[i], self.tolerance, df),
                })  # fmt: skip
        return out
