"""Time and peak memory of the LRU prefix-cache simulation (attribution.cache.lru) on the Mooncake conversation
trace and on a generated replay-like trace (default 1M requests), each in its own process, with the machine
load recorded. Writes a table and, with --json, the raw figures.

    python -m bench.cache.run                      # Mooncake conversation + 1M replay-like + reference
    python -m bench.cache.run --requests 200000 --json /tmp/cache-bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MOONCAKE = REPO.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"


def child(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "bench.cache.measure", *args], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine() -> dict:
    import numpy

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__,
            "load_average_1m_start": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests of the generated trace")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--no-reference", action="store_true", help="skip the OrderedDict comparison")
    a = ap.parse_args()
    info = machine()
    runs = [child("mooncake", str(MOONCAKE)), child("replay", str(a.requests))]
    if not a.no_reference:
        runs.append(child("reference", str(MOONCAKE)))
    info["load_average_1m_end"] = os.getloadavg()[0]
    print(f"machine: {info}")
    print(f"{'case':<10} {'requests':>9} {'accesses':>10} {'profile s (wall/cpu)':>22} {'curve pts':>9} "
          f"{'8 caches s':>10} {'sim alloc MB':>12} {'peak RSS MB':>11} {'load':>10}")
    for r in runs:
        if r["case"] == "reference":
            print(f"reference  {r['requests']:>9} {'':>10} {r['wall_s']:>10.1f} / {r['cpu_s']:<9.1f} "
                  f"{'1':>9} {'':>10} {'':>12} {r['peak_rss_mb']:>11.0f} "
                  f"{r['load_before']:>4.1f}-{r['load_after']:<4.1f}  (OrderedDict, {r['capacity_blocks']} blocks)")
            continue
        print(f"{r['case']:<10} {r['requests']:>9} {r['accesses']:>10} {r['profile_wall_s']:>10.1f} / "
              f"{r['profile_cpu_s']:<9.1f} {r['curve_points']:>9} {r['per_instance_cpu_s']:>10.1f} "
              f"{r['sim_peak_alloc_mb']:>12.0f} {r['peak_rss_mb']:>11.0f} {r['load_before']:>4.1f}-{r['load_after']:<4.1f}")
    if a.json:
        a.json.write_text(json.dumps({"machine": info, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
