"""Parsing planned files on Spark executors (`attribution ingest --engine spark`): the driver plans and commits
exactly as the local ingest does (attribution.ingest.run); here the plans travel to executors, which run the
same `parse_plan` a local worker process runs, write every row into the store's staging area (`stage`) and
send back only the small messages (staged file names, row counts, offsets, parser state, census, errors).

Executors reach the store and the inputs by the same path as the driver: on a cluster both must be on a
filesystem every node mounts at that path (NFS, a shared volume); object-store URLs are not supported for
writing (staging and the commit rename files)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from attribution.errors import AttributionError
from attribution.ingest.units import Plan, parse_plan
from attribution.spark.session import get_session
from attribution.store import Staged, stage

Message = tuple[Any, ...]
TASKS_PER_CORE = 3  # tasks per executor core: enough to even out files of unequal size, few enough to schedule


def groups(plans: list[Plan], n: int) -> list[list[tuple[int, Plan]]]:
    """`plans` (with their index) dealt into `n` tasks of about equal bytes to read: the largest first, each to
    the task with the fewest bytes so far."""
    out: list[list[tuple[int, Plan]]] = [[] for _ in range(min(n, len(plans)))]
    load = [0] * len(out)
    for i in sorted(range(len(plans)), key=lambda i: -plans[i].to_read):
        k = load.index(min(load))
        out[k].append((i, plans[i]))
        load[k] += plans[i].to_read
    return [g for g in out if g]


def parse_staged(plan: Plan) -> Iterator[Message]:
    """`parse_plan` with every table's rows staged as Parquet (a chunk's, and also a whole file's or a
    truncation notice's, which a local worker hands back as frames); the census stays a frame (a few rows per
    chunk, counted by the driver)."""
    assert plan.stage_root is not None
    for msg in parse_plan(plan):
        if msg[0] == "unit":
            rows = {t: stage(plan.stage_root, t, df) if isinstance(df, pl.DataFrame) and t != "ingest_line_shapes"
                    else df for t, df in msg[4].items()}
            msg = (*msg[:4], rows)
        yield msg


def _task(items: Iterable[list[tuple[int, Plan]]]) -> Iterator[tuple[int, Message]]:
    """One Spark task: its files, one after the other, each message tagged with the file's index."""
    for group in items:
        for index, plan in group:
            for msg in parse_staged(plan):
                yield index, msg


def run(plans: list[Plan], root: str, handle: Callable[[int, Message], None], *, master: str | None,
        conf: dict[str, str] | None) -> None:
    """Parse `plans` on Spark, staging their rows under `root`, then call `handle(index, message)` for every
    message, in order per plan (the driver applies them all after the job: a job that fails commits nothing,
    and what its tasks staged is deleted by the next writer)."""
    if not plans:
        return
    for p in plans:
        p.stage_root, p.stage_min = root, 0
    sc = get_session(master, conf).sparkContext
    tasks = groups(plans, max(1, sc.defaultParallelism) * TASKS_PER_CORE)
    sc.setJobDescription(f"attribution ingest: {len(plans)} files")
    try:
        results = sc.parallelize(tasks, len(tasks)).mapPartitions(_task).collect()
    except Exception as exc:  # Py4JJavaError: the job failed after its retries; nothing was committed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AttributionError(f"the Spark ingest job failed, nothing was committed: {first}") from exc
    drop_retried(Path(root), results)
    for index, msg in results:  # (collect keeps each task's order: a file's messages stay in order)
        handle(index, msg)


def drop_retried(root: Path, results: list[tuple[int, Message]]) -> None:
    """Delete what failed or speculative attempts of a task staged: only the rows of the attempts whose
    results came back are adopted (the next writer would delete the rest, this frees the space now)."""
    kept = {df.name for _i, msg in results if msg[0] == "unit" for df in msg[4].values() if isinstance(df, Staged)}
    for p in (root / "_tmp").glob("*.parquet"):
        if p.name not in kept:
            p.unlink(missing_ok=True)
