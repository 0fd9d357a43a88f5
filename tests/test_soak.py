"""The soak in bench/reliability (kill -9 of an ingest with workers at random points, rerun, compare every table
with a clean run's) in a short version: two kills in a chain on two real vLLM logs. The figures of the full
run (20 kills on sample_logs) are in its closing note; test_parallel_ingest kills a parallel ingest cheaply."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLE


@pytest.mark.slow
def test_short_soak_kills_leave_the_store_equal_to_a_clean_run(tmp_path):
    # the first 10,000 lines (of 90,000) of each log, gzip'd as shipped: 15 chunks of 64 KiB per file, so a kill
    # at a random moment lands mid-run, between commits or inside one
    corpus = tmp_path / "corpus"
    for pod in ("qwen35-vllm-0", "qwen35-vllm-1"):
        with gzip.open(SAMPLE / "vllm" / "before" / pod / "vllm.log.gz", "rb") as fh:
            head = b"".join(itertools.islice(fh, 10_000))
        (corpus / pod).mkdir(parents=True)
        (corpus / pod / "vllm.log.gz").write_bytes(gzip.compress(head))
    r = subprocess.run([sys.executable, "-m", "bench.reliability.soak", "--corpus", str(corpus), "--kills", "2",
                        "--chain", "--year", "2026", "--chunk-bytes", str(64 << 10), "--work", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["kills"] == 2 and res["identical"] == 1 and res["idempotent"] == 1
    assert res["workers_left"] == 0 and res["differences"] == []
