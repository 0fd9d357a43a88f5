"""Soak: `kill -9` an ingest with worker processes at random moments, rerun it to completion, and check that
the store equals a clean run's, table by table, and that a further ingest changes nothing.

The corpus is several real-format files (default: sample_logs/, vLLM, SGLang and LiteLLM, gzip), read in small
chunks (many commits) by `--jobs` workers. For each of `--kills` rounds a fresh store is ingested into and the
ingest process is killed after a random fraction of a clean run's time (`--chain`: one store, every kill on
top of the previous one, then the completion). Prints one JSON object: kills that landed mid-run, identical
stores, workers left behind, seconds, and /proc/loadavg before and after.

    python -m bench.reliability.soak [--corpus sample_logs] [--kills 20] [--jobs 2] [--chain] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINGER_S = 30.0  # a worker still alive this long after its ingest was killed is counted as left behind

# The ingest under test, in its own process; forced parallel whatever the corpus size.
_INGEST = """
import json, sys
import attribution.ingest as m
m.PARALLEL_MIN_BYTES = 0
a = json.loads(sys.argv[1])
m.ingest(a["paths"], a["store"], jobs=a["jobs"], year=a["year"], tz=a["tz"], chunk_bytes=a["chunk_bytes"])
"""

# Order-independent digest of every table (and the manifest's content columns): rows as text, sorted.
_DIGEST = """
import json, sys
from attribution.schema import TABLES
from attribution.store import Store
con = Store.open(sys.argv[1]).connect()
con.execute("set enable_progress_bar = false")  # (it writes to stdout on long queries)
out = {}
for t in [*TABLES, "ingest_files"]:
    src = ("(select file, format, status, size_bytes, bytes_read, lines, lines_parsed, lines_skipped, "
           "lines_unrecognised, rows, errors, rotated, reason from ingest_files)" if t == "ingest_files" else t)
    n, h = con.execute(f"select count(*), md5(coalesce(string_agg(r, chr(10) order by r), '')) "
                       f"from (select cast(x as varchar) as r from {src} x)").fetchone()
    out[t] = [n, h]
out["_version"] = Store.open(sys.argv[1]).snapshot().version
print(json.dumps(out))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def start(args: argparse.Namespace, store: Path) -> subprocess.Popen:
    spec = {"paths": [str(args.corpus)], "store": str(store), "jobs": args.jobs, "year": args.year, "tz": args.tz,
            "chunk_bytes": args.chunk_bytes}
    return subprocess.Popen([sys.executable, "-P", "-c", _INGEST, json.dumps(spec)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def complete(args: argparse.Namespace, store: Path) -> None:
    p = start(args, store)
    _, err = p.communicate()
    if p.returncode:
        raise SystemExit(f"ingest into {store} failed ({p.returncode}): {err.decode()[-2000:]}")


def digest(store: Path) -> dict:
    r = subprocess.run([sys.executable, "-P", "-c", _DIGEST, str(store)], env=_env(), capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def kill_at(args: argparse.Namespace, store: Path, delay: float) -> tuple[bool, int, float]:
    """Start an ingest, SIGKILL it after `delay` s: (whether it was still running, its workers still alive
    LINGER_S later, seconds until the last of them exited)."""
    p = start(args, store)
    time.sleep(delay)
    landed = p.poll() is None
    if landed:
        p.send_signal(signal.SIGKILL)
    p.wait()
    p.stderr.close()
    # Its workers exit when they next touch a pipe (end of input, broken pipe): a worker parsing a chunk
    # finishes it first. They are reparented, so they are found by the session the ingest led.
    t0 = time.monotonic()
    left = _session(p.pid)
    while left and time.monotonic() - t0 < LINGER_S:
        time.sleep(0.05)
        left = _session(p.pid)
    linger = time.monotonic() - t0
    for pid in left:  # (ours: started in the session of the ingest this script started)
        os.kill(pid, signal.SIGKILL)
    return landed, len(left), linger


def _session(sid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # field 6 of stat: the session id
            out.append(int(entry.name))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=REPO / "sample_logs")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--chunk-bytes", type=int, default=1 << 20)
    ap.add_argument("--chain", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--year", type=int, default=None)
    ap.add_argument("--tz", default="UTC")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    args = ap.parse_args(argv)
    truth = args.corpus / "ground_truth.json"
    if args.year is None and truth.exists():
        t = json.loads(truth.read_text())
        args.year, args.tz = t["year"], t.get("tz", args.tz)
    rng = random.Random(args.seed)
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    work = Path(tempfile.mkdtemp(prefix="attribution-soak-", dir=args.work))
    t0 = time.monotonic()
    try:
        complete(args, work / "reference")
        clean_s = time.monotonic() - t0
        ref = digest(work / "reference")
        rounds = []
        store = work / "chain"
        for i in range(args.kills):
            if not args.chain:
                store = work / f"round{i}"
            landed, left, linger = kill_at(args, store, rng.uniform(0.02, 1.0) * clean_s)
            rnd = {"landed": landed, "workers_left": left, "linger_s": linger}
            if not args.chain:
                rnd.update(_finish(args, store, ref))
                shutil.rmtree(store, ignore_errors=True)
            rounds.append(rnd)
        chain = _finish(args, store, ref) if args.chain else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res = {
        "corpus": str(args.corpus), "jobs": args.jobs, "chunk_bytes": args.chunk_bytes, "mode":
        "chain" if args.chain else "fresh store per kill", "clean_run_s": round(clean_s, 1),
        "kills": args.kills, "kills_mid_run": sum(r["landed"] for r in rounds),
        "workers_left": sum(r["workers_left"] for r in rounds),
        "max_worker_linger_s": round(max((r["linger_s"] for r in rounds), default=0.0), 1),
        "identical": (sum(r["identical"] for r in rounds) if not args.chain else int(chain["identical"])),
        "idempotent": (sum(r["idempotent"] for r in rounds) if not args.chain else int(chain["idempotent"])),
        "differences": sorted({t for r in ([*rounds, chain] if chain else rounds) for t in r.get("differ", [])}),
        "seconds": round(time.monotonic() - t0, 1), "loadavg_before": load0,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
    }
    print(json.dumps(res))
    return res


def _finish(args: argparse.Namespace, store: Path, ref: dict) -> dict:
    """Rerun to completion, compare with the reference, and once more: nothing may change."""
    complete(args, store)
    got = digest(store)
    differ = [t for t in ref if t != "_version" and got[t] != ref[t]]
    complete(args, store)
    again = digest(store)
    return {"identical": not differ, "differ": differ, "idempotent": again == got}


if __name__ == "__main__":
    r = main()
    sys.exit(0 if r["identical"] == (1 if r["mode"] == "chain" else r["kills"]) and not r["workers_left"] else 1)
