"""Issue 21 goal 2: each CLI analysis (`lengths`, `concurrency`, `thresholds`, `latency`, `capacity`) on a
store, against one DuckDB query computing its core answer from the same Parquet (baselines.sql), both timed
as whole processes (interpreter start and imports included for both), with the machine's load beside every
figure. See README.md.

usage: python -m bench.analyses.run STORE [--commands a,b] [--repeat N] [--json FILE] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from attribution.store import Store

HERE = Path(__file__).resolve().parent
COMMANDS = ("lengths", "concurrency", "thresholds", "latency", "capacity")
CLI = "import sys; from attribution.cli import main; sys.argv[0] = 'attribution'; main()"
DUCKDB = ("import sys, duckdb; con = duckdb.connect(); con.execute(\"set timezone = 'UTC'\"); "
          "con.execute('set enable_progress_bar = false'); print(len(con.sql(sys.stdin.read()).fetchall()))")


def baselines(store: Path) -> dict[str, str]:
    """name -> SQL of baselines.sql, with the store's live requests files and the join filled in."""
    snap = Store.open(store).snapshot()

    def paths(table: str) -> str:
        return "[" + ", ".join(f"'{store / f}'" for f in snap.live(table)) + "]"
    text = (HERE / "baselines.sql").read_text()
    out = {}
    for part in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, body = part.split("\n", 1)
        out[name.strip()] = "\n".join(ln for ln in body.splitlines() if not ln.startswith("--")).strip()
    joined = out.pop("joined").replace("{requests}", paths("requests"))
    steps = paths("engine_steps")
    return {k: v.replace("{joined}", joined).replace("{engine_steps}", steps) for k, v in out.items()}


def load() -> float:
    return os.getloadavg()[0]


def timed(argv: list[str], stdin: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall and CPU seconds (user + system) and peak RSS of one process (wait4: its own rusage)."""
    with tempfile.TemporaryFile("w+") as inp, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        inp.write(stdin or "")
        inp.seek(0)
        la = load()
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            err.seek(0)
            raise SystemExit(f"{argv[-4:]} failed ({p.returncode}):\n{err.read()[-2000:]}")
    return {"wall_s": round(wall, 3), "cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "load": round(la, 2),
            "peak_mb": round(ru.ru_maxrss / 1024)}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    mid = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    return {**mid, "walls": [r["wall_s"] for r in runs], "cpus": [r["cpu_s"] for r in runs],
            "loads": [r["load"] for r in runs], "cpu_median_s": statistics.median(r["cpu_s"] for r in runs)}


def bench(store: Path, commands: list[str], repeat: int, extra: list[str], profile: Path | None
          ) -> list[dict[str, Any]]:
    py = sys.executable
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    env.pop("ATTRIBUTION_STORE", None)
    sql = baselines(store)
    cold = timed([py, "-c", CLI, "lengths", "--store", str(store), "--format", "json"], env=env)
    rows = []
    for cmd in commands:
        argv = [py, "-c", CLI, cmd, "--store", str(store), "--format", "json", *extra]
        ours, base = [], []
        for _ in range(repeat):  # alternate, so both see the same load
            ours.append(timed(argv, env=env))
            base.append(timed([py, "-c", DUCKDB], stdin=sql[cmd], env=env))
        o, b = median_run(ours), median_run(base)
        row = {"command": cmd, "ours": o, "duckdb": b, "ratio_wall": round(o["wall_s"] / b["wall_s"], 2),
               "ratio_cpu": round(o["cpu_median_s"] / b["cpu_median_s"], 2)}
        if profile:
            profile.mkdir(parents=True, exist_ok=True)
            out = profile / f"{cmd}.prof"
            subprocess.run([py, "-m", "cProfile", "-o", str(out), "-m", "bench.analyses.cli", cmd, "--store",
                            str(store), "--format", "json", *extra], capture_output=True, env=env, check=True)
            row["profile"] = str(out)
        rows.append(row)
        print(f"{cmd:12s} ours {o['wall_s']:7.2f} s wall {o['cpu_median_s']:7.2f} s CPU "
              f"{o['peak_mb']:5d} MB | "
              f"duckdb {b['wall_s']:6.2f} s wall {b['cpu_median_s']:6.2f} s CPU {b['peak_mb']:5d} MB | "
              f"ratio {row['ratio_wall']:5.2f} wall {row['ratio_cpu']:5.2f} CPU | load {o['loads']}",
              flush=True)
    return [{"command": "cold (first lengths: builds the join cache)", "ours": cold}, *rows]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path)
    ap.add_argument("--commands", type=lambda s: s.split(","), default=list(COMMANDS))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating; median reported")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--profile", type=Path, help="also write one cProfile per command into this directory")
    ap.add_argument("--show-sql", action="store_true", help="print the baseline queries and exit")
    ap.add_argument("extra", nargs="*",
                    help="arguments passed to every command (after --), e.g. -- --since 2026-05-08")
    a = ap.parse_args(argv)
    if a.show_sql:
        for k, v in baselines(a.store).items():
            print(f"-- {k}\n{v};\n")
        return
    print(f"store {a.store} ({os.cpu_count()} CPUs, load {load():.2f})", flush=True)
    rows = bench(a.store, a.commands, a.repeat, a.extra, a.profile)
    print(f"cold: {rows[0]['ours']}")
    if a.json:
        a.json.write_text(json.dumps({"store": str(a.store), "cpus": os.cpu_count(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
