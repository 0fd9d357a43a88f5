"""Issue 21 item 2 / issue 20 item 1: what a date window reads with partition pruning (attribution.pruning)
against the whole store: the Parquet bytes and files each table's view names, and each command timed as a whole process
with ATTRIBUTION_PRUNE=0 (every partition), =all (the requests pruned too: a commit whose join is not cached)
and the default (the requests read through the commit's cached join, built by a first unpruned run that is
reported apart; the other tables pruned). See README.md.

usage: python -m bench.analyses.prune STORE --since S --until U [--commands a,b] [--repeat N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from attribution import layout, pruning
from attribution.schema import TABLES
from attribution.store import Store
from bench.analyses.run import CLI, median_run, timed


def read_bytes(store: Store, since: str | None, until: str | None, mode: str) -> dict[str, Any]:
    """Per table: live files and bytes, and those a pruned connection for the window reads (mode `all`: the
    requests pruned too; `auto`: read whole through the commit's cached join where it is built)."""
    os.environ["ATTRIBUTION_PRUNE"] = mode
    snap = store.snapshot()
    window = pruning.resolve(store, snap, since, until)
    days = pruning.plan(store, snap, window.since, window.until) or {}
    out: dict[str, Any] = {"since": str(window.since), "until": str(window.until), "tables": {}}
    tot = [0, 0, 0, 0]
    for table in TABLES:
        live = snap.live(table)
        rng = days.get(table)
        kept = layout.prune(live, *rng) if rng else live
        size = {p: store.locate(p).stat().st_size for p in live}
        row = [len(live), sum(size.values()), len(kept), sum(size[p] for p in kept)]
        out["tables"][table] = dict(zip(("files", "bytes", "files_read", "bytes_read"), row, strict=True))
        tot = [a + b for a, b in zip(tot, row, strict=True)]
    out["total"] = dict(zip(("files", "bytes", "files_read", "bytes_read"), tot, strict=True))
    out["share_read"] = round(tot[3] / tot[1], 4) if tot[1] else None
    del os.environ["ATTRIBUTION_PRUNE"]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path)
    ap.add_argument("--since")
    ap.add_argument("--until")
    ap.add_argument("--commands", type=lambda s: s.split(","), default=["lengths", "concurrency"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    res: dict[str, Any] = {"commands": []}
    for mode in ("all", "auto"):
        b = res[f"bytes_{mode}"] = read_bytes(Store.open(a.store), a.since, a.until, mode)
        print(f"ATTRIBUTION_PRUNE={mode}: window {b['since']} .. {b['until']}")
        for table, r in b["tables"].items():
            if r["files"]:
                print(f"  {table:20s} files {r['files_read']:4d}/{r['files']:4d}  MB "
                      f"{r['bytes_read'] / 1e6:8.1f}/{r['bytes'] / 1e6:8.1f}")
        print(f"  {'total':20s} files {b['total']['files_read']:4d}/{b['total']['files']:4d}  MB "
              f"{b['total']['bytes_read'] / 1e6:8.1f}/{b['total']['bytes'] / 1e6:8.1f}  share {b['share_read']}",
              flush=True)
    py = sys.executable
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    env.pop("ATTRIBUTION_STORE", None)
    whole_env = dict(env, ATTRIBUTION_PRUNE="0")
    window = [*(["--since", a.since] if a.since else []), *(["--until", a.until] if a.until else [])]
    res["cold"] = timed([py, "-c", CLI, "lengths", "--store", str(a.store), "--format", "json"], env=whole_env)
    print(f"cold (join cache build) {res['cold']}", flush=True)
    for cmd in a.commands:
        argv = [py, "-c", CLI, cmd, "--store", str(a.store), "--format", "json", *window]
        runs: dict[str, list[dict[str, Any]]] = {"whole": [], "all": [], "auto": []}
        for _ in range(a.repeat):  # alternate, so all see the same load
            runs["whole"].append(timed(argv, env=whole_env))
            for mode in ("all", "auto"):
                runs[mode].append(timed(argv, env=dict(env, ATTRIBUTION_PRUNE=mode)))
        row = {k: median_run(v) for k, v in runs.items()}
        res["commands"].append({"command": cmd, **row})
        print(f"{cmd:12s} " + " | ".join(
            f"{k} {r['wall_s']:7.2f} s wall {r['cpu_median_s']:6.2f} s CPU {r['peak_mb']:5d} MB load {r['loads']}"
            for k, r in row.items()), flush=True)
    if a.json:
        a.json.write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
