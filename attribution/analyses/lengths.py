"""Length distributions per group: prompt, output and cached tokens, by request count and by token volume
(a few long prompts can be most of the prefill work), with log-spaced histogram bins for charts."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import polars as pl

from attribution import queries
from attribution.analyses.common import (
    PERCENTILE_METHOD,
    Analysis,
    Selection,
    base_params,
    empty_note,
    name_groups,
    percentile_list,
    spread_percentiles,
)
from attribution.errors import UsageError

DEFINITIONS = {
    "percentiles": PERCENTILE_METHOD,
    "requests": "requests whose source gave that count (cached_tokens is often unknown); arrival in the window",
    "tok_p50/tok_p90/tok_p95/tok_p99": "token-weighted percentiles: the smallest length L such that requests no "
    "longer than L hold at least 50/90/95/99% of the group's tokens",
    "top1_token_share": "share of the group's tokens in its longest 1% of requests (ceil(requests / 100) of them)",
    "histogram": "bins per power of ten: bin i holds lengths L with i <= bins_per_decade * log10(L) < i + 1, "
    "i.e. the integers lo <= L < hi; lengths of 0 are bin -1 [0, 1); request_share counts requests, "
    "token_share weighs them by length",
}


def lengths(sel: Selection, *, bins_per_decade: int = 10, percentiles: Iterable[float] | None = None) -> Analysis:
    """Prompt, output and cached tokens per group: stats (count, mean, the `percentiles` besides p50, p90 and
    p99 (default: p95 and p99.9 too), max, token-weighted percentiles, top-1% token share) and a log-binned
    histogram with count- and token-weighted shares."""
    if bins_per_decade < 1:
        raise UsageError("bins per decade must be at least 1")
    pcts = percentile_list(percentiles)
    # the window's requests counted per (grp, metric, length): the rows the per-day counts give a whole-day
    # window (summaries.days), under the name both queries read
    sel.materialize("int_request_length_counts")
    with queries.alias(sel.con, "int_length_counts", "int_request_length_counts"):
        res = from_counts(sel, pcts, bins_per_decade)
    res.notes.extend(empty_note(sel, res.tables["stats"], "a known prompt, output or cached token count: their logs "
                                "give no lengths (e.g. vLLM's `Received request` with `prompt_token_ids: None` and "
                                "no `Finished` line or gateway usage)"))
    return res


def from_counts(sel: Selection, pcts: list[float], bins_per_decade: int) -> Analysis:
    """The lengths analysis of the requests counted per (grp, metric, length) in `int_length_counts` on the
    selection's connection (the window's, or the per-day counts' of summaries.days)."""
    raw = queries.run(sel.con, "length_stats_from_counts", quantiles=[q / 100 for q in pcts])
    hist = queries.run(sel.con, "length_histogram_from_counts", bins_per_decade=bins_per_decade)
    q = [[quantile_cont(lo, hi, rn) for lo, hi, rn in zip(los, his, rns, strict=True)]
         for los, his, rns in raw.select("q_lo", "q_hi", "q_rn").iter_rows()]
    at = raw.columns.index("q_lo")
    stats = raw.drop("q_lo", "q_hi", "q_rn").insert_column(at, pl.Series("q", q, dtype=pl.List(pl.Float64)))
    res = Analysis(
        name="lengths",
        params={**base_params(sel), "bins_per_decade": bins_per_decade, "percentiles": pcts},
        tables={"stats": name_groups(spread_percentiles(stats, pcts), sel.by),
                "histogram": name_groups(hist, sel.by)},
        titles={"stats": f"token lengths by {sel.by.value}", "histogram": "log-spaced histogram"},
        definitions=DEFINITIONS,
    )
    from attribution.histograms.analysis import add_to_lengths  # imports this module's package: late

    return add_to_lengths(res, sel, pcts)


def quantile_cont(lo: int, hi: int, rn: float) -> float:
    """DuckDB's quantile_cont between order statistics lo <= hi at position rn: lo * (1 - d) + hi * d with the
    product lo * (1 - d) fused into the sum (one rounding), as its build computes it."""
    d = rn - float(int(rn))
    if d == 0.0:
        return float(lo)
    return float(Fraction(float(lo)) * Fraction(1.0 - d) + Fraction(float(hi) * d))
