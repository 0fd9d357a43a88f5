"""One measured case in its own process, so that its peak RSS is its own. Prints one JSON line.

    python -m bench.cache.measure mooncake PATH      # a Mooncake JSONL trace
    python -m bench.cache.measure replay N           # the generated replay-like trace of N requests
    python -m bench.cache.measure reference PATH     # a plain OrderedDict LRU, one capacity (for scale)
"""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from collections import OrderedDict

import numpy as np


def vm_kb(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def load_mooncake(path: str):
    import polars as pl

    from attribution.cache.lru import Trace

    df = pl.read_ndjson(path)
    ids = df["hash_ids"].explode().to_numpy().astype(np.int64)
    counts = df["hash_ids"].list.len().to_numpy().astype(np.int64)
    return Trace(ids, counts, df["input_length"].to_numpy().astype(np.int64)), {"requests": df.height}


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def simulate(tr, facts: dict) -> dict:
    from attribution.cache.analysis import curve_capacities
    from attribution.cache.lru import Trace, profile

    rss_loaded = vm_kb("VmRSS")
    tracemalloc.start()
    p, wall, cpu = timed(lambda: profile(tr))
    caps = curve_capacities(int(len(np.unique(tr.ids))))
    r, wall_c, cpu_c = timed(lambda: p.ratios(caps))
    _, sim_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    groups = np.arange(len(tr.counts)) % 8  # 8 instances, round-robin: the per-deployment variant
    _, wall_g, cpu_g = timed(lambda: profile(Trace(tr.ids, tr.counts, tr.lengths, groups, tr.block)))
    return {**facts, "accesses": int(len(tr.ids)), "profile_wall_s": wall, "profile_cpu_s": cpu,
            "curve_points": len(caps), "curve_wall_s": wall_c, "curve_cpu_s": cpu_c,
            "per_instance_wall_s": wall_g, "per_instance_cpu_s": cpu_g,
            "unbounded": {k: float(v[-1]) for k, v in r.items()},
            "sim_peak_alloc_mb": sim_peak / 2**20, "rss_loaded_mb": rss_loaded / 1024,
            "peak_rss_mb": vm_kb("VmHWM") / 1024}


def reference(path: str, cap: int = 10_000) -> dict:
    rows = [json.loads(line) for line in open(path)]

    def run():
        cache: OrderedDict = OrderedDict()
        hit = total = 0
        for r in rows:  # the loop the NumPy pass replaces: one pass per capacity
            k = 0
            for x in r["hash_ids"]:
                if x not in cache:
                    break
                k += 1
            for x in r["hash_ids"]:
                cache[x] = None
                cache.move_to_end(x)
                if len(cache) > cap:
                    cache.popitem(last=False)
            hit, total = hit + k, total + len(r["hash_ids"])
        return hit / total

    ratio, wall, cpu = timed(run)
    return {"requests": len(rows), "capacity_blocks": cap, "block_weighted": ratio, "wall_s": wall, "cpu_s": cpu,
            "peak_rss_mb": vm_kb("VmHWM") / 1024}


def main() -> None:
    kind, arg = sys.argv[1], sys.argv[2]
    load = os.getloadavg()[0]
    if kind == "mooncake":
        res = simulate(*load_mooncake(arg))
    elif kind == "replay":
        from bench.cache.generate import replay_like

        tr, facts = replay_like(int(arg))
        res = simulate(tr, facts)
    else:
        res = reference(arg)
    print(json.dumps({"case": kind, **res, "load_before": load, "load_after": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
