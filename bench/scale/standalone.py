"""Beyond one machine's process: the ingest and an analysis on a Spark standalone cluster (issue 20 item 3).

A master and two workers on localhost, started from pyspark's own jars (`spark-class ...deploy.master.Master`,
`...deploy.worker.Worker`: the pip package has no `sbin/start-*.sh`), each worker with one core, so the
application's tasks run in two executor JVMs of their own, apart from the driver's, and talk to it over the
network as on a cluster. On `sample_logs/`:

1. `ingest --engine spark --spark-master spark://...` into one store, the local ingest into another: every
   table's rows and the files' states equal (the check of tests/test_spark_ingest.py);
2. `lengths` and `latency --format json` with `--engine spark` on the cluster against DuckDB on the same store:
   the same JSON (numbers to 1e-9 relative).

Each step is a whole process (`bench.scale.run.timed`: wall, CPU of the driver's process tree, peak RSS); the
executors' CPU is read from the workers (an executor JVM is the worker's child, reaped by it: its CPU lands in
the worker's `cutime`), and the step records how many executor JVMs ran. Run from the repository root:

    python -m bench.scale.standalone [--logs sample_logs] [--out /tmp/standalone]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.scale.run import CLI, subreaper, timed

REPO = Path(__file__).resolve().parents[2]
TICK = os.sysconf("SC_CLK_TCK")
# each step's executors: one core and this much heap on each worker
EXECUTOR = ("spark.executor.cores=1", "spark.executor.memory=1g", "spark.cores.max=2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_with_reaped(pid: int) -> float:
    """CPU seconds of a process and of the children it has waited for (a worker: its finished executors)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK


class Cluster:
    """A standalone master and `workers` workers on localhost, stopped (by their process ids) on exit."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        import pyspark

        self.work, self.n = work, workers
        # (SPARK_HOME, else pip's pyspark: its jars and bin/ are the package's)
        home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
        self.spark_class = str(Path(home) / "bin" / "spark-class")
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
                        SPARK_LOCAL_DIRS=str(work / "local"))
        self.procs: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.work / f"{name}.log", "wb")
        p = subprocess.Popen([self.spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(p)
        return p

    def __enter__(self) -> Cluster:
        (self.work / "local").mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui))
        for i in range(self.n):
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "2g", "--webui-port", str(free_port()),
                        "--work-dir", str(self.work / f"worker{i}"), self.url)
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
                    alive = [w for w in json.load(r)["workers"] if w["state"] == "ALIVE"]
                if len(alive) == self.n:
                    return self
            except OSError:
                pass
            time.sleep(1)
        raise SystemExit(f"the standalone cluster did not come up: see {self.work}/*.log")

    def executors(self) -> set[str]:
        """Every executor the workers have started (one directory each: <work-dir>/<app>/<executor id>)."""
        return {str(d) for i in range(self.n) for d in (self.work / f"worker{i}").glob("*/*") if d.is_dir()}

    def workers_cpu(self) -> float:
        return sum(cpu_with_reaped(p.pid) for p in self.procs[1:])

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def stores_equal(a: Path, b: Path) -> list[str]:
    """The tables whose rows (or files' states, times of reading aside) differ between two stores."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_spark_ingest import same_store  # the Spark ingest test's own comparison

    try:
        same_store(a, b)
    except AssertionError as exc:
        return [str(exc) or "differ"]
    return []


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, default=REPO / "sample_logs")
    ap.add_argument("--out", type=Path, default=Path("/tmp/standalone"))
    a = ap.parse_args(argv)
    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    truth = json.loads((a.logs / "ground_truth.json").read_text())
    when = ["--year", str(truth["year"]), "--tz", truth["tz"]]
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("ATTRIBUTION_STORE", None)

    def cli(*args: str) -> list[str]:
        return [sys.executable, "-c", CLI, *args]

    rows: list[dict[str, Any]] = []
    local, spark = a.out / "local-store", a.out / "spark-store"
    subreaper()  # the drivers' JVMs, orphaned when their Python exits, are reaped (and counted) here
    rows.append({"step": "ingest (local)", **timed(cli("ingest", str(a.logs), "--store", str(local), *when), env)})
    with Cluster(a.out / "cluster") as cluster:
        conf = [c for kv in (*EXECUTOR, f"spark.executorEnv.PYTHONPATH={env['PYTHONPATH']}")
                for c in ("--spark-conf", kv)]
        on_cluster = ["--engine", "spark", "--spark-master", cluster.url, *conf]

        def step(name: str, argv: list[str], stdout: Path | None = None) -> dict[str, Any]:
            before, apps = cluster.workers_cpu(), cluster.executors()
            if stdout is not None:  # (the command's output kept: timed discards it)
                argv = ["sh", "-c", f'exec "$@" > {stdout}', "sh", *argv]
            r = timed(argv, env)
            time.sleep(3)  # the executors exit after the application: reaped by their workers
            r.update(step=name, executor_cpu_s=round(cluster.workers_cpu() - before, 1),
                     executor_jvms=len(cluster.executors() - apps))
            print(r, flush=True)
            rows.append(r)
            return r

        step("ingest (spark://, 2 workers)", cli("ingest", str(a.logs), "--store", str(spark), *when, *on_cluster))
        diff = stores_equal(local, spark)
        rows.append({"step": "ingest: stores equal", "ok": not diff, "diff": diff})
        for command in ("lengths", "latency"):
            args = [command, "--store", str(spark), "--format", "json"]
            want = subprocess.run(cli(*args), env=env, capture_output=True, text=True, check=True).stdout
            step(f"{command} (spark://)", cli(*args, *on_cluster), stdout=a.out / f"{command}.json")
            got = json.loads((a.out / f"{command}.json").read_text())
            rows.append({"step": f"{command}: JSON equal to DuckDB's", "ok": same(got, json.loads(want))})
    (a.out / "standalone.json").write_text(json.dumps(rows, indent=1))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
