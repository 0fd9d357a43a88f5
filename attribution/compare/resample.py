"""compare's bootstrap draws as independent blocks of resamples: what one cohort side asks for (`Ask`), the
blocks they split into, and the drawing of any set of blocks (`draw_blocks`), run in-process here and on Spark
executors by attribution.spark.bootstrap. Block b of an ask draws from its own stream (stats.stream), so the
draws are the same whoever draws which block, in whatever order: the Spark answer is the DuckDB one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from attribution.compare import stats

# metric -> its values and strata codes over all compare rows, in stable sorted order (Estimator._sorted)
Columns = dict[str, tuple[np.ndarray, np.ndarray]]
Item = tuple[int, int]  # (ask, block)


@dataclass(frozen=True)
class Ask:
    """One cohort side's bootstrap: the requests `mask` (np.packbits over the metric's sorted column, `size`
    bits) selects, re-weighted by `weights`, `resamples` draws of the percentiles `ps` from the streams of
    `key`."""

    column: str
    mask: bytes
    size: int
    weights: np.ndarray
    ps: tuple[float, ...]
    resamples: int
    key: tuple[int, ...]

    def blocks(self) -> list[int]:
        return stats.block_sizes(self.resamples)


Draws = Callable[[Columns, list[Ask]], list[np.ndarray]]


def items(asks: list[Ask]) -> list[Item]:
    """Every (ask, block) pair, an ask's blocks together (a task holding several prepares the ask once)."""
    return [(i, b) for i, ask in enumerate(asks) for b in range(len(ask.blocks()))]


def draw_blocks(columns: Columns, asks: list[Ask], todo: Iterable[Item]) -> Iterator[tuple[int, int, np.ndarray]]:
    """(ask, block, its (len(ps), block size) draws) for each item; consecutive items of one ask are drawn
    together (one preparation of its requests, one vectorised pass: stats.Resampler.draw)."""
    for i, run in groupby(todo, key=lambda item: item[0]):
        ask = asks[i]
        blocks = [b for _, b in run]
        values, codes = columns[ask.column]
        keep = np.unpackbits(np.frombuffer(ask.mask, np.uint8), count=ask.size).astype(bool)
        sizes = ask.blocks()
        drawn = stats.Resampler(values[keep], codes[keep], ask.weights, presorted=True).draw(
            ask.ps, [(sizes[b], stats.stream(ask.key, b)) for b in blocks])
        at = np.cumsum([0, *(sizes[b] for b in blocks)])
        for j, b in enumerate(blocks):
            yield i, b, drawn[:, at[j]:at[j + 1]]


def assemble(asks: list[Ask], drawn: Iterable[tuple[int, int, np.ndarray]]) -> list[np.ndarray]:
    """Each ask's (len(ps), resamples) draws from its blocks, in block order (whatever order they came in)."""
    parts: dict[Item, np.ndarray] = {(i, b): d for i, b, d in drawn}
    out = []
    for i, ask in enumerate(asks):
        blocks = [parts[(i, b)] for b in range(len(ask.blocks()))]
        out.append(np.concatenate(blocks, axis=1) if blocks else np.full((len(ask.ps), 0), np.nan))
    return out


def local_draws(columns: Columns, asks: list[Ask]) -> list[np.ndarray]:
    """The draws of every ask, drawn in this process (the DuckDB path, the calibration harness)."""
    return assemble(asks, draw_blocks(columns, asks, items(asks)))
