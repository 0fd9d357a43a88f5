"""Running an ingest: discover the inputs, plan each file, parse the plans here or in worker processes, apply
their units to the store in batches, and compact."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from attribution import discovery, formats, reader, workers
from attribution.config import env_int
from attribution.ingest.batching import Account, Batch
from attribution.ingest.compaction import compact
from attribution.ingest.planning import plan_file, record_problem, relink
from attribution.ingest.summary import FileReport, IngestSummary, Progress
from attribution.ingest.units import Plan, parse_plan
from attribution.ingest.zones import resolve_tz
from attribution.store import Store

PARALLEL_MIN_BYTES = 32 << 20  # below this, starting worker processes costs more than it saves
STAGE_MIN_BYTES = 4 << 20  # a worker writes the rows of a chunk at least this large to Parquet itself


def ingest(
    paths: list[str], store: str | os.PathLike[str], *, fmt: str | None = None, deployment: str | None = None,
    label: str | None = None, year: int | None = None, tz: str | None = None,
    options: dict[str, Any] | None = None, chunk_bytes: int | None = None, max_line_bytes: int | None = None,
    progress: Progress | None = None, jobs: int | None = None, max_future: float | None = None,
    engine: str = "local", spark_master: str | None = None, spark_conf: dict[str, str] | None = None,
) -> IngestSummary:
    """Ingest files, directories and globs into the store at `store` (created if needed).

    With several files to read (at least PARALLEL_MIN_BYTES in all), they are parsed in `jobs` worker
    processes (default: `$ATTRIBUTION_JOBS`, else one per CPU, this process being one of them; 1 reads in this
    process alone); the rows, offsets and commits are the same as a sequential read's, only the order of files
    in the commits differs.
    A timestamp later than `max_future` seconds after now (default: the `max_future` setting, 1 day) is out
    of its domain (attribution.domains).

    `engine="spark"` parses the planned files on Spark executors instead (attribution.spark.ingest, on
    `spark_master` with `spark_conf`), and commits their rows in one commit: the same rows and file states."""
    t0 = time.time()
    options = dict(options or {})
    if max_future is None or "deployment_labels" not in options:
        from attribution.config import load_settings, span_seconds

        settings = load_settings()
        if max_future is None:
            max_future = span_seconds(settings.max_future)
        # (the Prometheus sources name a deployment by these labels)
        options.setdefault("deployment_labels", list(settings.deployment_labels))
    if fmt:
        formats.get(fmt)
    tz = resolve_tz(tz)
    chunk_bytes = chunk_bytes or env_int("ATTRIBUTION_CHUNK_BYTES") or reader.DEFAULT_CHUNK_BYTES
    max_line_bytes = max_line_bytes or reader.DEFAULT_MAX_LINE_BYTES
    spark = None
    if engine == "spark":
        from attribution.spark.session import require

        require()  # a usage error before the store is touched
        spark = dict(master=spark_master, conf=spark_conf)
    files, skipped = discovery.discover_inputs(paths)
    jobs = 1 if spark else jobs or workers.default_jobs()
    # Likely parallel: start the workers now, they import while the files are planned.
    early = jobs > 1 and len(files) > 1 and sum(_size(f) for f in files) >= PARALLEL_MIN_BYTES
    # (this process parses too: one worker fewer than the jobs)
    with workers.Pool(min(jobs, len(files)) - 1 if early else 0) as pool:
        return _ingest(files, skipped, store, pool, jobs, t0, fmt=fmt, deployment=deployment, label=label,
                       year=year, tz=tz, options=options, chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes,
                       progress=progress, max_ts=t0 + max_future, spark=spark)


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:  # gone since discovery: planning records it
        return 0


def _ingest(files: list[Path], skipped: list[discovery.Skipped], store: str | os.PathLike[str],
            pool: workers.Pool, jobs: int, t0: float, *,
            fmt: str | None, deployment: str | None, label: str | None, year: int | None, tz: str,
            options: dict[str, Any] | None, chunk_bytes: int, max_line_bytes: int, progress: Progress | None,
            max_ts: float | None = None, spark: dict[str, Any] | None = None) -> IngestSummary:
    st = Store.open(store, create=True)
    summary = IngestSummary(store=str(st.root))
    emit = progress or (lambda _e, _d: None)
    emit("start", {"files": len(files) + len(skipped), "bytes": sum(_size(f) for f in files)})
    with st.writer() as w:
        first = w.snapshot.version
        index = w.snapshot.path_index()
        by_fp: dict[int, dict[str, str]] = {}  # fingerprint length -> fingerprint -> file key
        for k, s in w.snapshot.files.items():
            if s.get("fp"):
                by_fp.setdefault(s["fp_len"], {})[s["fp"]] = k
        batch = Batch(w, chunk_bytes, summary)
        if spark:  # the executors' rows are all staged: the driver holds only their manifests, committed at once
            batch.limit = batch.max_files = float("inf")
        opts = dict(fmt=fmt, deployment=deployment, label=label, year=year, tz=tz, options=options or {},
                    chunk_bytes=chunk_bytes, max_line_bytes=max_line_bytes, max_ts=max_ts)
        plans: list[Plan] = []
        accounts: list[Account] = []
        for sk in skipped:
            summary.files.append(record_problem(sk.path, sk.status, sk.reason, batch, index, opts))
            emit("file_done", {"path": sk.path, "status": sk.status})
        for path in files:
            relink(path, batch, index, opts)
            planned = plan_file(path, w, batch, index, by_fp, opts, emit)
            if isinstance(planned, FileReport):
                summary.files.append(planned)
                emit("file_done", {"path": planned.path, "status": planned.status})
            else:
                plans.append(planned[0])
                accounts.append(planned[1])
                summary.files.append(planned[1].report)
        jobs = min(jobs, len(plans))
        if spark:
            from attribution.spark import ingest as spark_ingest

            spark_ingest.run(plans, str(st.root), lambda i, msg: accounts[i].handle(msg), **spark)
        elif jobs > 1 and sum(p.to_read for p in plans) >= PARALLEL_MIN_BYTES:
            for p in plans:
                p.stage_root, p.stage_min = str(st.root), min(STAGE_MIN_BYTES, chunk_bytes // 2)
            workers.run(plans, jobs, lambda i, msg: accounts[i].handle(msg), weight=lambda p: p.to_read,
                        pool=pool, work=parse_plan, here=True)
        else:
            for plan, account in zip(plans, accounts, strict=True):
                for msg in parse_plan(plan):
                    account.handle(msg)
        summary.errors = sum(f.errors for f in summary.files)
        summary.bytes = sum(f.bytes for f in summary.files)
        batch.flush()
        compact(w)
        landed = w.snapshot.version > first
    summary.seconds = time.time() - t0
    if landed:  # outside the writer's lock: the readers' prepared inputs for the new commit (not in `seconds`)
        from attribution import summaries

        emit("prepared", vars(summaries.after_commit(st.root)))
    return summary
