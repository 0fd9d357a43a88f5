"""Issue 20 item 5 / issue 21 item 5: a generated week (default 6M requests, vLLM + SGLang + LiteLLM in real
formats) ingested and analysed locally and on Spark `local[2]`, each step a whole process timed for wall, CPU
(user + system of the process and the children it waited for) and peak RSS (the largest of those processes),
with the 1-minute load before and after. Prints the cost per million requests. See README.md.

usage: python -m bench.scale.run [--requests N] [--data-dir DIR] [--steps a,b] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.analyses.run import CLI, load
from bench.scale.generate import generate

PAGE = os.sysconf("SC_PAGE_SIZE")

COMMANDS = ("lengths", "latency", "concurrency", "thresholds", "capacity")
STEPS = ("ingest", "spark_ingest", "report", "spark_report", "commands", "first_look", "spark_commands")


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def subreaper() -> None:
    """Adopt orphaned descendants (Spark's JVM outlives the driver's Python, which never waits for it): they are
    then reaped here, so RUSAGE_CHILDREN counts their CPU."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _tree_rss(root: int, seen: set[int]) -> int:
    """Bytes resident in `root`'s process tree now (every process that ever was a descendant of it)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(d)], rss[int(d)] = int(f[1]), int(f[21]) * PAGE
    for pid in parents:
        p, chain = pid, []
        while p > 1 and p not in seen and p != root:
            chain.append(p)
            p = parents.get(p, 0)
        if p == root or p in seen:
            seen.update(chain)
    seen.add(root)
    return sum(rss.get(p, 0) for p in seen)


def timed(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall, CPU (user + system of the whole process tree, orphans included) and peak RSS (the tree's sampled
    sum, every 0.2 s) of one command; SystemExit with the end of its stderr when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    la, t, peak, seen = load(), time.perf_counter(), 0, set()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        while p.poll() is None:
            peak = max(peak, _tree_rss(p.pid, seen))
            time.sleep(0.2)
        wall = time.perf_counter() - t
        deadline = time.time() + 60  # orphans (the JVM) exit once the driver has gone: reap them
        while time.time() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    time.sleep(0.2)
            except ChildProcessError:
                break
        if p.returncode:
            err.seek(0)
            raise SystemExit(f"{argv[-4:]} failed ({p.returncode}):\n{err.read()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "load": round(la, 2), "peak_mb": round(peak / 2**20)}


class Bench:
    def __init__(self, data: Path, spark_master: str, spark_conf: list[str], partial: Path | None) -> None:
        self.data, self.rows, self.partial = data, [], partial
        self.py = sys.executable
        self.env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
        self.env.pop("ATTRIBUTION_STORE", None)
        self.spark = ["--engine", "spark", "--spark-master", spark_master,
                      *[a for c in spark_conf for a in ("--spark-conf", c)]]

    def step(self, name: str, argv: list[str], stdout: Path | None = None) -> dict[str, Any]:
        """One whole process; a failure is recorded (with its stderr's end), not raised."""
        print(f"{name} ...", end=" ", flush=True)
        try:
            r = timed(argv, env=self.env)
            r["ok"] = True
        except SystemExit as e:  # timed() raises with the child's stderr
            r = {"ok": False, "error": str(e)[-600:], "load": round(load(), 2)}
        r.update(step=name, load_after=round(load(), 2))
        self.rows.append(r)
        if self.partial:  # what ran so far survives a run cut short
            self.partial.write_text(json.dumps(self.rows, indent=1))
        print({k: v for k, v in r.items() if k != "step"}, flush=True)
        return r

    def cli(self, *args: str) -> list[str]:
        return [self.py, "-c", CLI, *args]

    def status(self, store: Path) -> dict[str, Any]:
        p = subprocess.run(self.cli("status", "--store", str(store), "--format", "json"), env=self.env,
                           capture_output=True, text=True)
        return json.loads(p.stdout) if p.returncode == 0 else {"rows": {}, "error": p.stderr[-300:]}


def check(manifest: dict, status: dict) -> list[str]:
    """What the store holds that the manifest did not write (empty when every row is there)."""
    e, rows = manifest["expect"], status["rows"]
    want = {"requests": e["engine_requests"] + e["gateway_requests"], "engine_steps": e["engine_steps"],
            "access_log": e["engine_requests"]}
    return [f"{t}: {rows.get(t)} rows, expected {n}" for t, n in want.items() if rows.get(t) != n]


def run(a: argparse.Namespace) -> dict[str, Any]:
    data = a.data_dir
    t = time.time()
    week, ingests = data / f"week-{a.requests}", {"ingest", "spark_ingest"} & set(a.steps)
    if not ingests and (week / "manifest.json").exists():  # (the stores exist: their logs may be deleted)
        manifest = json.loads((week / "manifest.json").read_text())
    else:
        manifest = generate(week, a.requests, a.seed)
    logs = data / f"week-{a.requests}" / "logs"
    gen_s = time.time() - t
    print(f"data {logs}: {manifest['bytes'] / 1e9:.2f} GB, gateway {manifest['gateway_share']:.0%} of bytes, "
          f"{len(manifest['files'])} files ({gen_s:.0f} s to generate or reuse); load {load():.1f}", flush=True)
    b = Bench(data, a.spark_master, a.spark_conf, a.json.with_suffix(".partial.json") if a.json else None)
    local, spark = data / f"store-{a.requests}", data / f"store-{a.requests}-spark"
    common = ["--year", "2026", "--tz", "UTC"]
    problems: list[str] = []
    if "ingest" in a.steps:
        shutil.rmtree(local, ignore_errors=True)
        b.step("ingest (local, --jobs all cores)", b.cli("ingest", str(logs), "--store", str(local), *common,
                                                          "--jobs", str(os.cpu_count())))
        problems += [f"local: {p}" for p in check(manifest, b.status(local))]
    if "spark_ingest" in a.steps:
        shutil.rmtree(spark, ignore_errors=True)
        b.step(f"ingest --engine spark ({a.spark_master})",
               b.cli("ingest", str(logs), "--store", str(spark), *common, *b.spark))
        problems += [f"spark: {p}" for p in check(manifest, b.status(spark))]
        if local.exists():
            mine, theirs = b.status(local), b.status(spark)
            problems += [f"spark: `status` {k} differ from the local store's"
                         for k in ("files", "rows", "deployments") if mine.get(k) != theirs.get(k)]
    if "report" in a.steps:
        b.step("report (local)", b.cli("report", "--store", str(local), "--out", str(data / "report.html"),
                                       "--quiet"))
    if "spark_report" in a.steps:  # `report --engine spark` lands with branch spark20d; a usage error before
        b.step("report --engine spark", b.cli("report", "--store", str(local), "--out",
                                              str(data / "report-spark.html"), "--quiet", *b.spark))
    if "commands" in a.steps:
        for cmd in COMMANDS:
            b.step(f"{cmd} (local)", b.cli(cmd, "--store", str(local), "--format", "json"))
    if "first_look" in a.steps:
        b.step("dashboard first look", [b.py, "-m", "bench.dashboard.first_look", str(local)])
    if "spark_commands" in a.steps:
        for cmd in COMMANDS:
            b.step(f"{cmd} (spark)", b.cli(cmd, "--store", str(local), "--format", "json", *b.spark))
    out = {"requests": a.requests, "cpus": os.cpu_count(), "generate_s": round(gen_s, 1),
           "input_bytes": manifest["bytes"], "gateway_share": manifest["gateway_share"],
           "store_bytes": {s.name: _size(s) for s in (local, spark) if s.exists()},
           "steps": b.rows, "problems": problems}
    table(out)
    return out


def table(out: dict[str, Any]) -> None:
    m = out["requests"] / 1e6
    print(f"\n{out['requests']:,} requests, {out['input_bytes'] / 1e9:.2f} GB of logs "
          f"({out['input_bytes'] / 1e9 / m:.2f} GB/M), stores "
          + ", ".join(f"{k} {v / 1e9:.2f} GB ({v / 1e9 / m:.3f} GB/M)" for k, v in out["store_bytes"].items()))
    print("| step | wall s | CPU s | peak RSS GB | wall s / M | CPU s / M | load before / after |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in out["steps"]:
        if not r["ok"]:
            print(f"| {r['step']} | failed: {r['error'].splitlines()[-1][:120]} | | | | | {r['load']} / "
                  f"{r['load_after']} |")
            continue
        print(f"| {r['step']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_mb'] / 1024:.2f} | "
              f"{r['wall_s'] / m:.1f} | {r['cpu_s'] / m:.1f} | {r['load']} / {r['load_after']} |")
    for p in out["problems"]:
        print(f"\033[31mPROBLEM\033[0m {p}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=6_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/scale20"))
    ap.add_argument("--steps", type=lambda s: s.split(","), default=[s for s in STEPS if s != "spark_report"],
                    help=f"comma list of {', '.join(STEPS)} (default: all but spark_report, which needs "
                         "`report --engine spark`)")
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument("--spark-conf", action="append", default=None,
                    help="k=v for every Spark step (default spark.driver.memory=4g)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    a.spark_conf = a.spark_conf or ["spark.driver.memory=4g"]
    if unknown := set(a.steps) - set(STEPS):
        ap.error(f"unknown steps {sorted(unknown)}")
    subreaper()
    out = run(a)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
