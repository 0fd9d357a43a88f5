"""CPU of what an ingest prepares after its last commit (attribution.summaries.after_commit: the engine x
gateway join cache), apart from the parse: on a copy of an existing store (made without it,
`ATTRIBUTION_SUMMARIES=0`), the cache removed and built again, `--repeat` times; with `--append FILE`, the
CPU of ingesting FILE into a fresh copy of the store each time, the join included or not (`ATTRIBUTION_SUMMARIES`),
which shows what a small append pays for rebuilding the whole store's join. Prints one JSON object.

    python -m bench.ingest.prepare STORE [--append FILE] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from bench.ingest.measure import cpu_s


def _copy(store: str, into: Path) -> str:
    dst = into / "store"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(store, dst, ignore=shutil.ignore_patterns("_cache"))
    return str(dst)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--append", help="a log file to ingest into each copy of the store")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from attribution import sources, summaries
    from attribution.ingest import ingest

    sources.registry()  # imports (and DuckDB's, pyarrow's through a first fetch) are not measured
    runs: list[float] = []
    out: dict[str, object] = {"store": args.store, "append": args.append, "cpu_s": runs}
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        root = _copy(args.store, Path(tmp))
        summaries.after_commit(root)  # warm: the first build in a process pays its imports
        for _ in range(args.repeat):
            root = _copy(args.store, Path(tmp))
            c0 = cpu_s()
            if args.append:
                ingest([args.append], root, tz="UTC", year=2026)
            else:
                built = summaries.after_commit(root)
                out["skipped"] = built.skipped
            runs.append(round(cpu_s() - c0, 3))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
