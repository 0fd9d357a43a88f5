"""compare's bootstrap drawn on Spark executors (`compare --engine spark`): the metrics' sorted columns and the
asks (each cohort side's request mask, weights, percentiles, stream key) are broadcast once, the (ask, block)
pairs are dealt into tasks, and each task draws its blocks with attribution.compare.resample.draw_blocks, the
function the in-process path runs: only the draws (percentiles x resamples per ask) come back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attribution.compare.resample import Ask, Columns, Item, assemble, draw_blocks, items, local_draws

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TASKS_PER_CORE = 2  # tasks per executor core: even out asks of unequal size, few enough to schedule cheaply


class SparkDraws:
    """resample.Draws on a Spark session: one job per batch of asks."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(self, columns: Columns, asks: list[Ask]) -> list[np.ndarray]:
        todo = items(asks)
        if not todo:
            return assemble(asks, [])
        try:
            sc = self.spark.sparkContext
        except Exception:  # Spark Connect has no RDD API: the same blocks and streams, drawn on the driver
            return local_draws(columns, asks)
        shared = sc.broadcast((columns, asks))
        try:
            # contiguous slices: an ask's blocks mostly share a task, which prepares the ask once; the draws
            # do not depend on the slicing (each block has its own stream)
            tasks = min(len(todo), max(1, sc.defaultParallelism) * TASKS_PER_CORE)
            sc.setJobDescription(f"attribution compare: bootstrap, {len(asks)} asks in {len(todo)} blocks")
            drawn = sc.parallelize(todo, tasks).mapPartitions(_task(shared)).collect()
        finally:
            shared.unpersist()
        return assemble(asks, drawn)


def _task(shared: Any) -> Any:
    """The function of one task: its (ask, block) items drawn from the broadcast columns and asks."""

    def run(part: Any) -> Any:
        columns, asks = shared.value
        todo: list[Item] = list(part)
        return draw_blocks(columns, asks, todo)

    return run
