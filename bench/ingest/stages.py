"""Where the ingest spends its time, from a cProfile of one `ours` run: the pipeline stages (read, split into
lines, parse, conform, Parquet writing, fsyncs and commits) as cumulative seconds, the parser functions, and
the costliest calls by own time (Polars operations show up there by method name, since cProfile times each
call into Rust as a whole).
"""

from __future__ import annotations

import pstats
from typing import Any

# (label, file suffix, function name). Stages nest (flush contains write and commit); shares are of the total.
STAGES = [
    ("ingest (total)", "attribution/ingest/run.py", "ingest"),
    ("read: reader.chunks (disk -> chunks of lines)", "attribution/reader.py", "chunks"),
    ("split: lines_frame (bytes -> line DataFrame)", "attribution/ingest/framing.py", "lines_frame"),
    ("parse: vllm_log.parse", "attribution/sources/vllm_log.py", "parse"),
    ("parse: sglang_log.parse", "attribution/sources/sglang_log.py", "parse"),
    ("conform: _finish (provenance, schema)", "attribution/ingest/parsing.py", "_finish"),
    ("state: copy.deepcopy", "copy.py", "deepcopy"),
    ("batch flush (write + commit)", "attribution/ingest/batching.py", "flush"),
    ("  parquet: Writer.write (incl. its fsync)", "attribution/store.py", "write"),
    ("  fsync of data files", "attribution/store.py", "_fsync_file"),
    ("  commit: Writer.commit", "attribution/store.py", "commit"),
    ("  fsync of directories", "attribution/store.py", "_fsync_dir"),
    ("compaction: compact", "attribution/ingest/compaction.py", "compact"),
    ("sniff: choose source", "attribution/ingest/parsing.py", "choose_source"),
]


def _rows(stats: pstats.Stats) -> list[tuple[str, int, str, int, float, float]]:
    out = []
    for (fname, lineno, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        out.append((fname, lineno, func, ncalls, tottime, cumtime))
    return out


def analyse(prof_path: str, top: int = 25) -> dict[str, Any]:
    stats = pstats.Stats(prof_path)
    rows = _rows(stats)
    total = max((r[5] for r in rows if r[0].endswith("attribution/ingest/run.py") and r[2] == "ingest"), default=0.0)

    def cum(suffix: str, func: str) -> tuple[float, int]:
        hits = [r for r in rows if r[0].endswith(suffix) and r[2] == func]
        return sum(r[5] for r in hits), sum(r[3] for r in hits)

    stages = []
    for label, suffix, func in STAGES:
        secs, calls = cum(suffix, func)
        if calls:
            stages.append({"stage": label, "seconds": secs, "calls": calls, "share": secs / total if total else 0})
    parser = sorted(
        (r for r in rows if "/attribution/sources/" in r[0] and r[5] > 0.005),
        key=lambda r: -r[5],
    )[:top]
    own = sorted(rows, key=lambda r: -r[4])[:top]

    def name(r: tuple) -> str:
        short = r[0].split("site-packages/")[-1].split("/work/main/")[-1]
        return f"{short}:{r[1]}({r[2]})" if r[0] != "~" else r[2]

    return {
        "total_seconds": total,
        "stages": stages,
        "parser_functions": [{"function": name(r), "calls": r[3], "cumulative_s": r[5]} for r in parser],
        "by_own_time": [{"function": name(r), "calls": r[3], "own_s": r[4]} for r in own],
    }
