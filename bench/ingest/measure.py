"""One measured method in its own process, so that peak RSS is the method's own: `ours` (attribution's
ingest into a fresh store), `duckdb` (DuckDB's raw line scan, count only), `duckdb_len` (the same scan that
also reads every line's length) and `perline` (bench.ingest.baseline). Prints one JSON object on stdout.

    python -m bench.ingest.measure METHOD FILE... [--store DIR] [--profile OUT.prof]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its waited-for children (the parse workers): the
    steadier figure on a shared machine, where wall time follows the load."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def status_kb(key: str) -> int:
    """A `Vm*` figure of this process from /proc/self/status, in KiB (VmHWM: peak RSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def _tree_rss_kb(pid: int) -> int:
    """Resident KiB of a process and all its descendants (its worker processes), now."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        kids = " ".join(p.read_text() for p in Path(f"/proc/{pid}/task").glob("*/children")).split()
    except OSError:
        return total
    return total + sum(_tree_rss_kb(int(k)) for k in kids)


class TreePeak:
    """Samples the summed RSS of this process and its descendants every 20 ms (VmHWM sees one process only,
    while an ingest parses in worker processes); `peak_kb` is the largest sum seen. `cpu_s` is the sampling
    thread's own CPU (~1.3% of a core while it runs): measurement, not the method's work, so `_ours` takes it
    out of its `cpu_s` (the other methods run without a sampler)."""

    def __init__(self) -> None:
        import threading

        self.peak_kb = 0
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        c0 = time.thread_time()
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, _tree_rss_kb(os.getpid()))
            self._stop.wait(0.02)
        self.cpu_s = time.thread_time() - c0

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _ours(files: list[str], store: str, profile: str | None) -> dict:
    from attribution import sources
    from attribution.ingest import ingest

    sources.registry()  # imports every source module (and DuckDB): import time is not measured for any method
    start_kb = status_kb("VmRSS")
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    c0, t = cpu_s(), time.perf_counter()
    with TreePeak() as tree:
        summary = ingest(files, store, tz="UTC", year=2026)
    seconds = time.perf_counter() - t
    cpu = cpu_s() - c0 - tree.cpu_s
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    store_bytes = sum(p.stat().st_size for p in Path(store).rglob("*") if p.is_file())
    return {
        "seconds": seconds, "cpu_s": cpu, "rss_start_kb": start_kb, "rows": dict(summary.rows),
        "errors": summary.errors,
        "files": {Path(f.path).name: [f.status, f.format, f.message] for f in summary.files},
        "store_bytes": store_bytes, "tree_peak_kb": tree.peak_kb, "sampler_cpu_s": tree.cpu_s,
    }


def _duckdb(files: list[str], with_len: bool, parse: bool = False) -> dict:
    import duckdb

    con = duckdb.connect()
    start_kb = status_kb("VmRSS")
    paths = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    # \x01 never occurs in the logs (run.py checks), so each line is one VARCHAR column.
    what = "count(*), sum(strlen(line))" if with_len else "count(*)"
    sql = _parse_sql(paths) if parse else (
        f"select {what} from read_csv({paths}, columns={{'line': 'VARCHAR'}}, delim='\x01', quote='', "
        "escape='', header=false, auto_detect=false)")
    c0, t = cpu_s(), time.perf_counter()
    row = con.execute(sql).fetchone()
    seconds = time.perf_counter() - t
    cpu = cpu_s() - c0
    return {"seconds": seconds, "cpu_s": cpu, "rss_start_kb": start_kb, "lines": int(row[0]),
            "threads": con.execute("select current_setting('threads')").fetchone()[0],
            **({"chars": int(row[1])} if with_len else {})}


# `duckdb_parse`: what a vectorised parse alone reaches here. One DuckDB query classifies every line by a
# literal test, extracts the fields the canonical tables need from each kind (timestamp parsed; stats,
# prefill/decode, request and access fields) and sums them so nothing is skipped. No provenance, no year or
# zone logic, no glued lines, no errors table, no writing: a ceiling for a parser, not a parser.
_NUM = r"([0-9.]+)"
_PARSE_FIELDS = {
    "vllm_ts": (r"contains(line, 'INFO 0') or contains(line, 'WARNING 0')",
                r"strptime('2026-' || regexp_extract(line, '(?:INFO|WARNING) (\d\d-\d\d \d\d:\d\d:\d\d)', 1),"
                r" '%Y-%m-%d %H:%M:%S')"),
    "sglang_ts": ("starts_with(line, '[20')",
                  r"strptime(regexp_extract(line, '^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)', 1), "
                  "'%Y-%m-%d %H:%M:%S')"),
}
_PARSE_NUMS = [
    ("contains(line, 'Engine 000:')", k) for k in ("Avg prompt throughput: ", "Avg generation throughput: ",
                                                   "Running: ", "Waiting: ", "GPU KV cache usage: ",
                                                   "Prefix cache hit rate: ")
] + [
    ("contains(line, ' batch, ')", k) for k in ("#running-req: ", "#queue-req: ", "token usage: ", "#new-token: ",
                                               "#cached-token: ", "throughput (token/s): ")
] + [
    ("contains(line, 'Finish: ')", k) for k in ("'prompt_tokens': ", "'completion_tokens': ",
                                               "'cached_tokens': ", "'e2e_latency': ")
] + [("contains(line, 'Received request ')", "max_tokens="), ("contains(line, 'HTTP/1.1\" ')", 'HTTP/1.1" ')]
_PARSE_STRS = [
    ("contains(line, 'Received request ')", r"Received request (\S+): "),
    ("contains(line, 'Added request ')", r"Added request (\S+)\."),
    ("contains(line, 'Finish: ')", r"'id': '([^']+)'"),
    ("contains(line, 'HTTP/1.1\" ')", r'"(?:GET|POST) (\S+) HTTP'),
]


_JSON_NUMS = ("$.startTime", "$.endTime", "$.completionStartTime", "$.prompt_tokens", "$.completion_tokens",
              "$.response_cost", "$.model_parameters.max_tokens")
_JSON_STRS = ("$.id", "$.status", "$.model", "$.api_base", "$.model_group", "$.metadata.user_api_key_hash",
              "$.metadata.user_api_key_alias", "$.metadata.user_api_key_team_alias", "$.stream", "$.cache_hit")


def _parse_sql(paths: str) -> str:
    cols = []
    for name, (guard, expr) in _PARSE_FIELDS.items():
        cols.append(f"count(case when {guard} then {expr} end) as {name}")
    for i, (guard, key) in enumerate(_PARSE_NUMS):
        pat = re.escape(key).replace("'", "''") + _NUM
        cols.append(f"sum(case when {guard} then try_cast(regexp_extract(line, '{pat}', 1) as double) end) as n{i}")
    for i, (guard, pat) in enumerate(_PARSE_STRS):
        pat = pat.replace("'", "''")
        cols.append(f"sum(case when {guard} then length(regexp_extract(line, '{pat}', 1)) end) as s{i}")
    # gateway JSON lines (LiteLLM StandardLoggingPayload): the fields of the requests table, one JSON parse per
    # line for all paths (the list form of json_extract_string); times as epoch seconds, counts as numbers
    js = "starts_with(line, '{')"
    cols.append(f"count(case when {js} then v end) as json_lines")
    for i in range(len(_JSON_NUMS)):
        cols.append(f"sum(try_cast(v[{i + 1}] as double)) as j{i}")
    for i in range(len(_JSON_STRS)):
        cols.append(f"sum(length(v[{len(_JSON_NUMS) + i + 1}])) as js{i}")
    paths_list = "[" + ", ".join(f"'{p}'" for p in (*_JSON_NUMS, *_JSON_STRS)) + "]"
    return (f"select count(*) as lines, {', '.join(cols)} from (select line, case when {js} then "
            f"json_extract_string(line, {paths_list}) end as v from read_csv({paths}, columns={{'line': 'VARCHAR'}}, "
            "delim='\x01', quote='', escape='', header=false, auto_detect=false))")


def _perline(files: list[str]) -> dict:
    from bench.ingest.baseline import parse_files

    start_kb = status_kb("VmRSS")
    c0, t = cpu_s(), time.perf_counter()
    rows, lines = parse_files(files)
    seconds = time.perf_counter() - t
    cpu = cpu_s() - c0
    return {"seconds": seconds, "cpu_s": cpu, "rss_start_kb": start_kb, "lines": lines,
            "rows": {k: len(v) for k, v in rows.items()}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("method", choices=["ours", "duckdb", "duckdb_len", "duckdb_parse", "perline"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--store", help="store directory for `ours` (must not exist yet)")
    ap.add_argument("--profile", help="write a cProfile of `ours` here")
    a = ap.parse_args(argv)
    if a.method == "ours":
        if not a.store:
            ap.error("ours needs --store")
        out = _ours(a.files, a.store, a.profile)
    elif a.method == "perline":
        out = _perline(a.files)
    else:
        out = _duckdb(a.files, a.method == "duckdb_len", a.method == "duckdb_parse")
    out.update(method=a.method, vmhwm_kb=status_kb("VmHWM"), pid=os.getpid())
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
