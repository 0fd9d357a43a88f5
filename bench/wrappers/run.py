"""Peak memory and speed of the document wrappers on large exports (issue 14, Build item 1, part 2).

Generates a Loki query_range document and a `gcloud logging read --format=json` array (default ~120 MB
each, newest first, as those exports come) from synthetic vLLM / SGLang lines, then decodes each in its
own interpreter: our streaming wrapper (ijson events/items -> spill to Parquet -> DuckDB ORDER BY), and
for comparison `json.load` of the same file (what a naive reader would hold). Reports wall time, MB/s and
peak RSS (VmHWM) next to the interpreter's RSS after imports.

    PYTHONPATH=$PWD python bench/wrappers/run.py [--mb 30 120 240] [--formats loki_api gcloud_json] [--dir /tmp/attribution-bench-wrappers]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def engine_lines(n: int, seed: int = 14) -> list[str]:
    """Lines in the shapes of engine-logs.md (numbers varied), about 180 bytes on average."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.random()
        if k < 0.4:
            out.append(
                f"(APIServer pid=1) INFO:     10.0.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}:{rnd.randint(1024, 65535)}"
                f' - "POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
        elif k < 0.7:
            out.append(
                f"[2026-05-12 08:{i // 60000 % 60:02d}:{i // 1000 % 60:02d} TP0] Decode batch. #running-req: "
                f"{rnd.randint(1, 64)}, #token: {rnd.randint(100, 90000)}, token usage: {rnd.random():.2f}, cuda graph:"
                f" True, gen throughput (token/s): {rnd.uniform(10, 3000):.2f}, #queue-req: {rnd.randint(0, 9)}, "
            )
        else:
            out.append(
                f"(APIServer pid=1) INFO 05-12 08:{i // 60000 % 60:02d}:{i // 1000 % 60:02d} [loggers.py:271] Engine "
                f"000: Avg prompt throughput: {rnd.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
                f"{rnd.uniform(0, 3000):.1f} tokens/s, Running: {rnd.randint(0, 64)} reqs, Waiting: "
                f"{rnd.randint(0, 9)} reqs, GPU KV cache usage: {rnd.uniform(0, 100):.1f}%, Prefix cache hit rate:"
                f" {rnd.uniform(0, 100):.1f}%"
            )
    return out


def generate(name: str, mb: float, path: Path) -> int:
    """Writes the export; returns its record count. Sized from a small sample's bytes per line."""
    sys.path.insert(0, str(REPO))
    from tests.wrapping_platforms import WRAP

    start = datetime(2026, 5, 12, 8, 0, tzinfo=UTC)
    per_line = len(WRAP[name](engine_lines(2000), start)) / 2000
    n = int(mb * 1e6 / per_line)
    path.write_bytes(WRAP[name](engine_lines(n), start))
    return n


def child(method: str, name: str, path: str) -> None:
    """Runs in its own interpreter: decode, then print one JSON line of results."""
    sys.path.insert(0, str(REPO))
    import polars as pl  # noqa: F401  (imports before the baseline RSS)

    from attribution.wrappers import registry

    def rss(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
        return 0

    base = rss("VmRSS:")
    t0 = time.perf_counter()
    if method == "ours":
        w = registry()[name]

        def pieces():
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    yield chunk

        n = 0
        ordered = True
        last = None
        for df in w.records(pieces(), {"year": None, "tz": "UTC", "file_mtime": 0.0}):
            n += df.height
            first, end = df["rec_ts"][0], df["rec_ts"][-1]
            ordered &= (last is None or first >= last) and df["rec_ts"].is_sorted()
            last = end
    else:
        with open(path, "rb") as f:
            doc = json.load(f)
        n = len(doc) if isinstance(doc, list) else sum(len(r["values"]) for r in doc["data"]["result"])
        ordered = None
    dt = time.perf_counter() - t0
    print(
        json.dumps(
            {"records": n, "seconds": dt, "base_rss": base, "peak_rss": rss("VmHWM:"), "ordered": ordered}
        )
    )


def lines_bench(n: int) -> None:
    """Throughput of the line-per-record layouts: `decode` over 50,000-line chunks (as the layer calls it),
    or `records` for the layouts read whole and sorted (logcli, shipper dumps, CloudWatch S3, gcloud sink)."""
    sys.path.insert(0, str(REPO))
    from attribution.wrappers import registry
    from attribution.wrappers._platforms import iter_line_chunks
    from tests.wrapping_platforms import WRAP

    start = datetime(2026, 5, 12, 8, 0, tzinfo=UTC)
    lines = engine_lines(n)
    print(f"\nline layouts, {n} records each")
    for name, wrap in WRAP.items():
        w = registry()[name]
        data = wrap(lines, start)
        if data.lstrip()[:1] in (b"[", b"{") and data.count(b"\n") < n / 2:
            continue  # a pretty-printed document: measured above
        state = {"year": 2026, "tz": "UTC", "file_mtime": 0.0}
        pieces = [data[i : i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
        t0 = time.perf_counter()
        if w.mode == "document":
            got = sum(df.height for df in w.records(pieces, state))
        else:
            got = sum(w.decode(c, state).height for c in iter_line_chunks(pieces))
        dt = time.perf_counter() - t0
        print(
            f"  {name:18s} {len(data) / 1e6:6.1f} MB  {dt:5.2f} s  {len(data) / 1e6 / dt:6.1f} MB/s  {got} records"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, nargs="+", default=[120], help="document sizes; several show scaling")
    ap.add_argument("--formats", nargs="*", default=["loki_api", "gcloud_json"])
    ap.add_argument("--dir", default="/tmp/attribution-bench-wrappers")
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--lines", type=int, default=0, help="also time the line layouts on this many records")
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    for name, mb in [(n, m) for n in a.formats for m in a.mb]:
        path = d / f"{name}-{mb:g}MB.json"
        t0 = time.perf_counter()
        n = generate(name, mb, path)
        size = path.stat().st_size
        print(f"\n{name}: {size / 1e6:.1f} MB, {n} records (generated in {time.perf_counter() - t0:.0f} s)")
        env = {k: v for k, v in os.environ.items()}
        for method in ("ours", "json.load"):
            r = subprocess.run(
                [sys.executable, __file__, "--child", method, name, str(path)],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            res = json.loads(r.stdout.strip().splitlines()[-1])
            assert res["records"] >= n, res
            print(
                f"  {method:10s} {res['seconds']:6.1f} s  {size / 1e6 / res['seconds']:6.1f} MB/s  "
                f"peak RSS {res['peak_rss'] / 1e6:7.1f} MB (after imports {res['base_rss'] / 1e6:.1f} MB; "
                f"peak/file {res['peak_rss'] / size:.2f})  records {res['records']}  in time order: {res['ordered']}"
            )
    if a.lines:
        lines_bench(a.lines)
    print(f"\nuptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
