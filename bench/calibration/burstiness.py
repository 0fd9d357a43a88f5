"""Calibration of the report's "burstiness changed" line (attribution.analyses.arrival_change): how often does
it call a change between two windows drawn from the same arrival process (A/A), and how often does it find a
real one (A/B)? Processes: Gamma renewal (shape k: CV = 1/sqrt(k)) and a Gamma renewal whose rate follows a
day/night cycle (rate x (1 + 0.8 sin)), with N requests a window.

    PYTHONPATH=. python bench/calibration/burstiness.py --pairs 400 --requests 5000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from attribution.analyses.arrival_change import ChangeRule, judge


def window(rng: np.random.Generator, n: int, k: float, diurnal: bool) -> np.ndarray:
    """Gaps of n arrivals of a Gamma(k) renewal process at mean rate 1/s; with `diurnal`, time-warped so
    that the rate follows 1 + 0.8 sin over a day spanning the window."""
    g = rng.gamma(k, 1 / k, n) if k > 0 else rng.weibull(-k, n)  # k < 0: Weibull of shape -k (heavy tail)
    if not diurnal:
        return g
    t = np.cumsum(g)
    span = t[-1]
    # operational time -> clock time: dt_clock = dt_op / rate(t), rate = 1 + 0.8 sin(2 pi t / span)
    rate = 1 + 0.8 * np.sin(2 * math.pi * t / span)
    return g / rate


def run(pairs: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rule = ChangeRule()
    cases = [("A/A gamma k=1 (Poisson)", 1.0, 1.0, False), ("A/A gamma k=0.25 (CV 2)", 0.25, 0.25, False),
             ("A/A gamma k=0.05 (CV 4.5)", 0.05, 0.05, False), ("A/A Poisson + day cycle", 1.0, 1.0, True),
             ("A/A k=0.25 + day cycle", 0.25, 0.25, True), ("A/A Weibull shape 0.4 (CV 2.9)", -0.4, -0.4, False),
             ("A/A Weibull shape 0.3 (CV 4.6) + day cycle", -0.3, -0.3, True),
             ("A/B CV 1 -> 1.5 (k 1 -> 0.44)", 1.0, 1 / 1.5 ** 2, False),
             ("A/B CV 1 -> 2 (k 1 -> 0.25)", 1.0, 0.25, False), ("A/B CV 2 -> 4 (k 0.25 -> 0.0625)", 0.25, 0.0625, False),
             ("A/B CV 1 -> 3 (k 1 -> 0.11)", 1.0, 1 / 9, False)]
    print(f"{pairs} pairs a case, {n} requests a window; rule: {rule.text()}\n")
    print("| case | pairs | called changed | rate |\n|---|---|---|---|")
    for name, k_before, k_now, diurnal in cases:
        t0 = time.time()
        called = 0
        for _ in range(pairs):
            res = judge({"w": window(rng, n, k_before, diurnal)}, {"w": window(rng, n, k_now, diurnal)}, rule)
            called += res["status"][0] in ("burstier", "smoother")
        print(f"| {name} | {pairs} | {called} | {called / pairs:.1%} |  <!-- {time.time() - t0:.1f} s -->")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    run(args.pairs, args.requests, args.seed)
