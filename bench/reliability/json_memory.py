"""Peak memory of ingesting a large LiteLLM JSON-array file (the `litellm_json` source; `--spendlogs`: a
`LiteLLM_SpendLogs` CSV export), as a ratio to the file's size: a file of N MB (default 120) made of records
derived from tests/cases/litellm, ingested into a
fresh store in a child process (jobs=1) whose peak RSS (VmHWM) is reported next to a Python interpreter's
baseline with the same imports (the child imports `attribution` from $PYTHONPATH: point it at another checkout
to measure that one). `--whole` measures the read-whole path (the document in memory, then
`parse_whole`) for comparison with the streamed one.

    python -m bench.reliability.json_memory [--mb 120] [--whole] [--spendlogs]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "tests" / "cases" / "litellm" / "slp_epoch_floats.jsonl"

_CHILD = """
import json, sys, time
from pathlib import Path
import attribution.ingest as ingest_mod
from attribution.sources import litellm

def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

base = hwm()
t0 = time.time()
if sys.argv[3] == "whole":  # the path before streaming: the whole document in memory, one parse
    src = litellm.LiteLLMSpendLogs() if sys.argv[1].endswith(".csv") else litellm.LiteLLMPayloadJSON()
    ctx = ingest_mod.ParseContext(sys.argv[1], "d", None, None, "UTC", 0.0)
    out = src.parse_whole(Path(sys.argv[1]).read_bytes(), ctx)
    rows = out.tables["requests"].height
else:
    s = ingest_mod.ingest([sys.argv[1]], sys.argv[2], jobs=1)
    rows = s.rows.get("requests", 0)
print(json.dumps({"baseline_kb": base, "peak_kb": hwm(), "rows": rows, "seconds": round(time.time() - t0, 1)}))
"""


def generate(path: Path, mb: int) -> int:
    """A JSON array of payloads (with a prompt-sized `messages` field, as real payloads carry) of about `mb` MB."""
    base = json.loads(CASE.read_text().splitlines()[0])
    base["messages"] = [{"role": "user", "content": "x" * 1500}]
    n, size = 0, 0
    with open(path, "w") as fh:
        fh.write("[\n")
        while size < mb * 1_000_000:
            rec = dict(base, id=f"chatcmpl-{n:032x}", startTime=base["startTime"] + n,
                       endTime=base["endTime"] + n, completionStartTime=base["completionStartTime"] + n)
            text = ("," if n else "") + json.dumps(rec, indent=2) + "\n"
            fh.write(text)
            size += len(text)
            n += 1
        fh.write("]\n")
    return n


def generate_spendlogs(path: Path, mb: int) -> int:
    """The SpendLogs case's records again and again (fresh request ids) to about `mb` MB."""
    with open(REPO / "tests" / "cases" / "litellm" / "spendlogs.csv", newline="") as fh:
        head, *recs = list(csv.reader(fh))
    n = 0
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        while fh.tell() < mb * 1_000_000:
            for r in recs:
                w.writerow([f"chatcmpl-{n:032x}", *r[1:]])
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=120)
    ap.add_argument("--whole", action="store_true")
    ap.add_argument("--spendlogs", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="attribution-jsonmem-") as tmp:
        path = Path(tmp) / ("spendlogs.csv" if args.spendlogs else "litellm-array.json")
        t0 = time.time()
        n = (generate_spendlogs if args.spendlogs else generate)(path, args.mb)
        size = path.stat().st_size
        print(f"generated {size / 1e6:,.1f} MB, {n:,} records in {time.time() - t0:.1f} s", file=sys.stderr)
        r = subprocess.run([sys.executable, "-P", "-c", _CHILD, str(path), str(Path(tmp) / "store"),
                            "whole" if args.whole else "stream"], capture_output=True, text=True, cwd=REPO)
        if r.returncode:
            sys.exit(r.stderr)
        res = json.loads(r.stdout)
        grown = (res["peak_kb"] - res["baseline_kb"]) * 1024
        res.update(file_mb=round(size / 1e6, 1), records=n, peak_mb=round(res["peak_kb"] / 1024, 1),
                   peak_over_file=round(res["peak_kb"] * 1024 / size, 2), growth_over_file=round(grown / size, 2),
                   path="whole" if args.whole else "streamed")
        print(json.dumps(res))


if __name__ == "__main__":
    main()
