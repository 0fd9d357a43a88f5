"""compare's bootstrap in blocks of resamples, each from its own random stream: a block draws the same alone, with
others, in any order and in any task (what lets `compare --engine spark` draw them on executors and still give
DuckDB's numbers), and an estimator's answer to a question does not depend on what it was asked before."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from attribution.compare import stats
from attribution.compare.comparison import CompareRows, Estimator, latency_tables
from attribution.compare.resample import Ask, assemble, draw_blocks, items, local_draws


def _columns_and_asks(seed: int) -> tuple[dict, list[Ask]]:
    """Two sorted columns (one with many ties, one with a stratum large enough for the normal approximation)
    and asks over subsets of them, with resample counts that are not multiples of the block size."""
    rng = np.random.default_rng(seed)
    n = 6000
    cols = {}
    for name, values in (("ties", rng.integers(0, 30, n) / 4.0), ("smooth", rng.lognormal(0, 1, n))):
        codes = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 5, n))  # stratum 0: the big one
        order = np.argsort(values, kind="stable")
        cols[name] = (values[order], codes[order])
    asks = []
    for i, (col, resamples) in enumerate([("ties", 300), ("smooth", 125), ("smooth", 7), ("ties", 1)]):
        mask = rng.random(n) < (0.9 if i % 2 else 0.4)
        w = np.array([0.5, 0.2, 0.1, 0.2, 0.0])
        asks.append(Ask(col, np.packbits(mask).tobytes(), n, w, (0.5, 0.9, 0.99), resamples, (seed, i, 1)))
    return cols, asks


@pytest.mark.parametrize("seed", [0, 1])
def test_blocks_draw_the_same_alone_together_and_in_any_order(seed):
    cols, asks = _columns_and_asks(seed)
    want = local_draws(cols, asks)
    assert [d.shape for d in want] == [(3, 300), (3, 125), (3, 7), (3, 1)]
    todo = items(asks)
    assert len(todo) == 3 + 1 + 1 + 1
    rng = np.random.default_rng(seed)
    alone = [x for item in rng.permutation(len(todo)) for x in draw_blocks(cols, asks, [todo[item]])]
    chunks = np.split(np.arange(len(todo)), [2, 3])  # as Spark slices them: runs of items, one task each
    tasks = [x for part in reversed(chunks) for x in draw_blocks(cols, asks, [todo[j] for j in part])]
    for drawn in (alone, tasks):
        got = assemble(asks, drawn)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    # a different seed draws differently; the same key in another ask's place draws the same
    other = local_draws(cols, [Ask(a.column, a.mask, a.size, a.weights, a.ps, a.resamples, (seed + 7, 0, 1))
                               for a in asks[:1]])
    assert not np.array_equal(other[0], want[0])
    again = local_draws(cols, [asks[2], asks[0]])
    np.testing.assert_array_equal(again[1], want[0])


def test_the_resampler_draws_a_block_the_same_alone_or_beside_others():
    rng = np.random.default_rng(4)
    v, c = rng.lognormal(0, 1, 4000).round(3), rng.integers(0, 3, 4000)
    r = stats.Resampler(v, c, np.array([0.2, 0.3, 0.5]))
    blocks = [(125, stats.stream(9, b)) for b in range(3)]
    together = r.draw((0.5, 0.95), blocks)
    apart = np.concatenate([r.draw((0.5, 0.95), [(125, stats.stream(9, b))]) for b in range(3)], axis=1)
    np.testing.assert_array_equal(together, apart)
    # the draws are of the distinct values, around the point estimate
    assert set(np.unique(together)) <= set(v)
    point = stats.weighted_percentiles(v, c, np.array([0.2, 0.3, 0.5]), (0.5,), method="linear")[0]
    assert abs(np.median(together[0]) - point) < 0.1 * point


def _rows(seed: int, n: int = 4000) -> CompareRows:
    rng = np.random.default_rng(seed)
    after = rng.random(n) < 0.5
    frame = pl.DataFrame({
        "cohort": np.where(after, "after", "before"), "workload": rng.choice(["chat", "batch"], n),
        "bucket": rng.integers(0, 3, n), "arrival": rng.random(n).cumsum(),
        "queue_s": rng.exponential(0.1, n), "ttft_s": rng.lognormal(-2, 0.5, n) * np.where(after, 1.2, 1.0),
        "tpot_s": rng.lognormal(-4, 0.3, n), "e2e_s": rng.lognormal(1, 1, n),
    })  # fmt: skip
    return CompareRows(frame, (256, 1024))


def test_an_answer_does_not_depend_on_the_questions_asked_before_it():
    data = _rows(3)
    sub = data.codes % 2 == 0
    first = Estimator(data, ps=(0.5, 0.9), mix="pooled", resamples=250, seed=3)
    second = Estimator(data, ps=(0.5, 0.9), mix="pooled", resamples=250, seed=3)
    a = [first.ratio("ttft_s", sub), first.ratio("ttft_s"), first.ratio("e2e_s")]
    b = second.ratios([("e2e_s", None, None), ("ttft_s", None, None), ("ttft_s", sub, None)])[::-1]
    assert a == b
    # another seed: other intervals, the same point estimates
    c = Estimator(data, ps=(0.5, 0.9), mix="pooled", resamples=250, seed=4).ratio("ttft_s")
    assert [r["ratio"] for r in c] == [r["ratio"] for r in a[1]]
    assert [r["ratio_lo"] for r in c] != [r["ratio_lo"] for r in a[1]]


def test_latency_tables_draw_every_row_in_one_batch():
    data = _rows(5)
    calls: list[int] = []

    def counting(columns, asks):
        calls.append(len(asks))
        return local_draws(columns, asks)

    mine = latency_tables(data, resamples=130, draws=counting)
    ref = latency_tables(data, resamples=130)
    # 4 metrics x (all + 2 workloads + 3 buckets), two cohort sides each: one call
    assert calls == [4 * (1 + 2 + 3) * 2]
    for t in ("summary", "by_workload", "by_bucket"):
        assert mine[t].equals(ref[t])
    assert mine["summary"].filter(pl.col("metric") == "ttft_s")["ratio"].to_list()[0] > 1.1
