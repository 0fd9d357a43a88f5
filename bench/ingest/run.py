"""The ingest benchmark (issue 2 item 9): generate vLLM and SGLang logs, then time attribution's ingest,
DuckDB's raw line scan and a per-line Python regex parser on the same files, each in its own process
(peak RSS per method), after one warm-up read so every method finds the files in the page cache.

    python -m bench.ingest.run                       # ~300 MB, all methods, Rich table
    python -m bench.ingest.run --size 300 --json out.json --profile
    python -m bench.ingest.run --sizes 50,100,200,400 --json sizes.json   # our peak RSS per input size
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.ingest.generate import generate
from bench.ingest.wrap import KINDS, wrapped_copies

REPO = Path(__file__).resolve().parents[2]
MB = 1e6  # throughputs are in decimal MB/s
GOAL_VS_DUCKDB = 1 / 3
GOAL_VS_PERLINE = 3.0
FLAT_TOLERANCE = 1.25  # "flat": the largest input's peak RSS within 25% of the smallest's

console = Console(width=150)
err = Console(stderr=True, width=150)
TABLES = ("engine_steps", "requests", "request_events", "access_log", "engine_config")


def warm(files: list[Path]) -> None:
    """Read every file once so that each measured method finds it in the page cache."""
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(8 << 20):
                pass


def wc_lines(files: list[Path]) -> int:
    out = subprocess.run(["wc", "-l", *map(str, files)], capture_output=True, text=True, check=True).stdout
    counts = [int(line.split()[0]) for line in out.strip().splitlines()]
    return counts[-1] if len(files) > 1 else counts[0]


def run_child(method: str, files: list[Path], work: Path, profile: Path | None = None) -> dict[str, Any]:
    """Run one method in a fresh interpreter; its peak RSS comes from the child (VmHWM) and from wait4."""
    args = [sys.executable, "-m", "bench.ingest.measure", method, *map(str, files)]
    store = None
    if method == "ours":
        store = work / "stores" / uuid.uuid4().hex
        store.parent.mkdir(parents=True, exist_ok=True)
        args += ["--store", str(store)]
    if profile:
        args += ["--profile", str(profile)]
    env = {k: v for k, v in os.environ.items() if k not in ("ATTRIBUTION_CHUNK_BYTES", "ATTRIBUTION_JOBS")}
    env.update(PYTHONPATH=str(REPO), TZ="UTC")
    t = time.perf_counter()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if store:
        shutil.rmtree(store, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"{method} failed (exit {proc.returncode})")
    res = json.loads(out.strip().splitlines()[-1])
    res.update(process_wall_s=wall, ru_maxrss_kb=usage.ru_maxrss)
    return res


def expected_rows(manifest: dict[str, Any]) -> dict[str, int]:
    """Rows the logs hold per table, from the generator's counts (what a correct parser must find)."""
    c: dict[str, int] = {}
    for f in manifest["files"].values():
        for k, v in f.items():
            if isinstance(v, int):
                c[k] = c.get(k, 0) + v
    g = c.get
    return {
        "engine_steps": g("stats", 0) + g("prefill", 0) + g("decode", 0),
        "requests": g("received", 0) + g("finish", 0),
        "request_events": g("added", 0) + g("aborted", 0) + g("receive", 0),
        "access_log": g("access", 0),
        "baseline_request_events": g("added", 0),
    }


def checks(results: dict[str, dict], expect: dict[str, int], wc: int) -> list[str]:
    """Problems that make a throughput figure meaningless (a parser that drops rows is fast for free)."""
    problems = []
    for m in ("duckdb", "duckdb_len", "duckdb_parse"):
        if m in results and results[m]["lines"] != wc:
            problems.append(f"{m} counted {results[m]['lines']:,} lines, wc -l {wc:,}")
    for m in ["ours"] + [f"ours_{k}" for k in KINDS]:
        if m not in results:
            continue
        r = results[m]
        for name, (status, fmt, msg) in r["files"].items():
            if status != "read":
                problems.append(f"{m}: {name} {status} ({fmt}): {msg}")
        if r["errors"]:
            problems.append(f"{m}: {r['errors']:,} ingest_errors rows")
        for t in ("engine_steps", "requests", "request_events", "access_log"):
            if r["rows"].get(t, 0) != expect[t]:
                problems.append(f"{m}: {t} has {r['rows'].get(t, 0):,} rows, the logs hold {expect[t]:,}")
    if "perline" in results:
        r = results["perline"]
        want = dict(expect, request_events=expect["baseline_request_events"])
        for t in ("engine_steps", "requests", "request_events", "access_log"):
            if r["rows"].get(t, 0) != want[t]:
                problems.append(f"perline: {t} has {r['rows'].get(t, 0):,} rows, expected {want[t]:,}")
        if r["lines"] != wc:
            problems.append(f"perline read {r['lines']:,} lines, wc -l {wc:,}")
    return problems


def machine() -> dict[str, Any]:
    import duckdb
    import polars

    return {"cpus": os.cpu_count(), "load_average_1m_at_end": os.getloadavg()[0], "python": platform.python_version(), "polars": polars.__version__,
            "duckdb": duckdb.__version__, "platform": platform.platform()}


def dataset(data_dir: Path, size_mb: float, seed: int) -> tuple[dict[str, Any], list[Path], int, int]:
    out = data_dir / f"{size_mb:g}mb-seed{seed}"
    t = time.perf_counter()
    manifest = generate(out, size_mb, seed)
    files = sorted(out / name for name in manifest["files"])
    nbytes = sum(f.stat().st_size for f in files)
    err.print(f"data: {out} ({nbytes / MB:.1f} MB, ready in {time.perf_counter() - t:.1f} s)")
    for f in files:
        if b"\x01" in f.read_bytes():
            raise SystemExit(f"{f} contains \\x01, the DuckDB scan's delimiter")
    warm(files)
    return manifest, files, nbytes, wc_lines(files)


def measure(methods: list[str], files: list[Path], work: Path, repeat: int) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for m in methods:
        runs = []
        for i in range(repeat):
            load = os.getloadavg()[0]
            err.print(f"  {m} run {i + 1}/{repeat} (load average {load:.2f}) ...")
            runs.append(dict(run_child(m, files, work), load_before=load))
        runs.sort(key=lambda r: r["seconds"])
        best = dict(runs[len(runs) // 2])  # the median run
        best["all_seconds"] = [r["seconds"] for r in runs]
        best["peak_rss_mb"] = max(max(r["vmhwm_kb"], r["ru_maxrss_kb"], r.get("tree_peak_kb", 0))
                                  for r in runs) / 1024
        results[m] = best
    return results


def single(a: argparse.Namespace) -> dict[str, Any]:
    manifest, files, nbytes, wc = dataset(a.data_dir, a.size, a.seed)
    results = measure(a.methods, files, a.data_dir, a.repeat)
    if "ours" in a.methods and a.wrapped:
        # The same logs wrapped by Docker and containerd, in the same run: what the wrapper layer costs.
        # MB/s counts the engine lines' bytes (the plain files'), so the ratio to `ours` is a time ratio.
        for kind in KINDS:
            t = time.perf_counter()
            wfiles = wrapped_copies(files, kind)
            err.print(f"data: {kind}-wrapped copies ready in {time.perf_counter() - t:.1f} s")
            warm(wfiles)
            res = measure(["ours"], wfiles, a.data_dir, a.repeat)["ours"]
            res["wrapped_bytes"] = sum(f.stat().st_size for f in wfiles)
            res["wrapped_mb_per_s"] = res["wrapped_bytes"] / MB / res["seconds"]
            results[f"ours_{kind}"] = res
    for r in results.values():
        r["mb_per_s"] = nbytes / MB / r["seconds"]
        r["lines_per_s"] = wc / r["seconds"]
    expect = expected_rows(manifest)
    ratios = {}
    if "ours" in results:
        ours = results["ours"]["mb_per_s"]
        for m in ("duckdb", "duckdb_len", "duckdb_parse", "perline"):
            if m in results:
                ratios[f"ours/{m}"] = ours / results[m]["mb_per_s"]
        for k in KINDS:
            if f"ours_{k}" in results:
                ratios[f"ours_{k}/ours"] = results[f"ours_{k}"]["mb_per_s"] / ours
    goals = {}
    if "ours/duckdb" in ratios:
        goals["ours >= 1/3 of duckdb raw scan"] = ratios["ours/duckdb"] >= GOAL_VS_DUCKDB
    if "ours/perline" in ratios:
        goals["ours >= 3x per-line parser"] = ratios["ours/perline"] >= GOAL_VS_PERLINE
    report = {"input": {"bytes": nbytes, "lines": wc, "files": {f.name: manifest["files"][f.name] for f in files}},
              "expected_rows": expect, "results": results, "ratios": ratios, "goals": goals,
              "problems": checks(results, expect, wc)}
    table = Table(title=f"ingest benchmark: {nbytes / MB:.0f} MB, {wc:,} lines, {len(files)} files "
                        f"(median of {a.repeat})")
    for col in ("method", "seconds", "MB/s", "lines/s", "peak RSS MB", "RSS after imports MB", "load avg before"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for m, r in results.items():
        table.add_row(m, f"{r['seconds']:.2f}", f"{r['mb_per_s']:.1f}", f"{r['lines_per_s']:,.0f}",
                      f"{r['peak_rss_mb']:.0f}", f"{r['rss_start_kb'] / 1024:.0f}", f"{r['load_before']:.2f}")
    rows = Table(title="rows found (expected: counted by the generator; the per-line parser reads no "
                       "engine_config and, of the events, only vLLM `Added`)")
    rows.add_column("method")
    for t in TABLES:
        rows.add_column(t, justify="right")
    rows.add_row("expected", *(f"{expect[t]:,}" if t in expect else "" for t in TABLES))
    for m, r in results.items():
        if "rows" in r:
            rows.add_row(m, *(f"{r['rows'].get(t, 0):,}" for t in TABLES))
    console.print(table)
    console.print(rows)
    for k, v in ratios.items():
        console.print(f"{k}: {v:.3f}")
    for k, ok in goals.items():
        console.print(f"goal {k}: {'[green]met[/]' if ok else '[red]NOT met[/]'}")
    for p in report["problems"]:
        console.print(f"[red]check failed:[/] {p}")
    if a.per_engine:
        report["per_engine"] = per_engine(manifest, files, a)
    if a.profile:
        report["profile"] = profile(files, a.data_dir)
    return report


def per_engine(manifest: dict[str, Any], files: list[Path], a: argparse.Namespace) -> list[dict[str, Any]]:
    """The same measurement per engine (vLLM file alone, SGLang files together), ours and per-line only."""
    out = []
    table = Table(title="per engine")
    for col in ("files", "MB", "method", "seconds", "MB/s", "peak RSS MB", "ours/perline"):
        table.add_column(col, justify="left" if col in ("files", "method") else "right")
    for engine in ("vllm", "sglang"):
        group = [f for f in files if manifest["files"][f.name]["kind"].startswith(engine)]
        nbytes = sum(f.stat().st_size for f in group)
        res = measure([m for m in ("ours", "perline") if m in a.methods], group, a.data_dir, a.repeat)
        speed = {m: nbytes / MB / r["seconds"] for m, r in res.items()}
        ratio = speed["ours"] / speed["perline"] if len(speed) == 2 else None
        for m, r in res.items():
            out.append({"engine": engine, "files": [f.name for f in group], "bytes": nbytes, "method": m,
                        "seconds": r["seconds"], "mb_per_s": speed[m], "peak_rss_mb": r["peak_rss_mb"],
                        "load_before": r["load_before"], "ours_over_perline": ratio})
            table.add_row(engine, f"{nbytes / MB:.0f}", m, f"{r['seconds']:.2f}", f"{speed[m]:.1f}",
                          f"{r['peak_rss_mb']:.0f}", f"{ratio:.2f}" if ratio and m == "ours" else "")
    console.print(table)
    return out


def sizes(a: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for size in a.sizes:
        manifest, files, nbytes, wc = dataset(a.data_dir, size, a.seed)
        res = measure(a.methods, files, a.data_dir, a.repeat)
        for m, r in res.items():
            rows.append({"size_mb": size, "method": m, "bytes": nbytes, "lines": wc, "seconds": r["seconds"],
                         "mb_per_s": nbytes / MB / r["seconds"], "peak_rss_mb": r["peak_rss_mb"],
                         "rss_start_mb": r["rss_start_kb"] / 1024,
                         "problems": checks({m: r}, expected_rows(manifest), wc)})
    table = Table(title="peak RSS per input size")
    for col in ("method", "input MB", "lines", "seconds", "MB/s", "peak RSS MB", "RSS after imports MB", "checks"):
        table.add_column(col, justify="left" if col in ("method", "checks") else "right")
    for r in rows:
        table.add_row(r["method"], f"{r['bytes'] / MB:.0f}", f"{r['lines']:,}", f"{r['seconds']:.2f}",
                      f"{r['mb_per_s']:.1f}", f"{r['peak_rss_mb']:.0f}", f"{r['rss_start_mb']:.0f}",
                      "ok" if not r["problems"] else "; ".join(r["problems"]))
    console.print(table)
    flat = {}
    for m in a.methods:
        peaks = [r["peak_rss_mb"] for r in rows if r["method"] == m]
        ratio = max(peaks) / min(peaks)
        # Information, not the verdict: a file smaller than one chunk holds less than a chunk in memory, so
        # the peak can still rise at the small sizes; growth between the two largest sizes shows whether it
        # keeps rising with the input.
        last = peaks[-1] / peaks[-2] if len(peaks) > 1 else 1.0
        flat[m] = {"max_over_min": ratio, "flat": ratio <= FLAT_TOLERANCE, "largest_over_previous": last}
        console.print(f"{m}: peak RSS max/min over sizes {ratio:.2f} -> "
                      f"{'[green]flat[/]' if ratio <= FLAT_TOLERANCE else '[red]NOT flat[/]'} "
                      f"(flat = within {FLAT_TOLERANCE:.2f}x while the input grows {max(a.sizes) / min(a.sizes):g}x); "
                      f"largest/previous size: {last:.2f}")
    return {"rows": rows, "flatness": flat}


def profile(files: list[Path], work: Path) -> dict[str, Any]:
    from bench.ingest.stages import analyse

    prof = work / "ours.prof"
    err.print("  ours under cProfile (not part of the timings) ...")
    run_child("ours", files, work, profile=prof)
    res = analyse(str(prof))
    res["prof_file"] = str(prof)
    table = Table(title=f"where ours spends its time (cProfile, total {res['total_seconds']:.1f} s; stages nest)")
    for col in ("stage", "seconds", "share", "calls"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for s in res["stages"]:
        table.add_row(s["stage"], f"{s['seconds']:.2f}", f"{s['share']:.0%}", str(s["calls"]))
    console.print(table)
    t2 = Table(title="parser functions by cumulative time")
    t2.add_column("function")
    t2.add_column("seconds", justify="right")
    for r in res["parser_functions"][:15]:
        t2.add_row(r["function"], f"{r['cumulative_s']:.2f}")
    console.print(t2)
    t3 = Table(title="calls by own time (Polars/Rust work is timed inside the calling method)")
    t3.add_column("function")
    t3.add_column("calls", justify="right")
    t3.add_column("seconds", justify="right")
    for r in res["by_own_time"][:15]:
        t3.add_row(r["function"], str(r["calls"]), f"{r['own_s']:.2f}")
    console.print(t3)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=float, default=300.0, help="total MB of logs to generate (default 300)")
    ap.add_argument("--sizes", type=lambda s: [float(x) for x in s.split(",")],
                    help="comma-separated sizes in MB: memory-flatness mode (default method: ours only)")
    ap.add_argument("--methods", type=lambda s: s.split(","), default=None,
                    help="comma-separated subset of ours,duckdb,duckdb_len,duckdb_parse,perline (default: all; "
                         "--sizes: ours)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per method; the median run is reported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/attribution-bench"),
                    help="where logs, temporary stores and the profile go (default /tmp/attribution-bench)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--profile", action="store_true", help="also profile one ingest run with cProfile")
    ap.add_argument("--no-wrapped", dest="wrapped", action="store_false",
                    help="skip ours on the Docker- and CRI-wrapped copies of the logs (measured by default)")
    ap.add_argument("--per-engine", action="store_true",
                    help="also measure ours and perline on the vLLM file alone and on the SGLang files alone")
    a = ap.parse_args(argv)
    a.methods = a.methods or (["ours"] if a.sizes else ["ours", "duckdb", "duckdb_len", "duckdb_parse", "perline"])
    started = time.time()
    report = sizes(a) if a.sizes else single(a)
    report = {"mode": "sizes" if a.sizes else "single", "args": {k: str(v) for k, v in vars(a).items()},
              "machine": machine(), "started": started, **report}
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))
        err.print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
