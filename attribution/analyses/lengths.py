"""Length distributions per group: prompt, output and cached tokens, by request count and by token volume
(a few long prompts can be most of the prefill work), with log-spaced histogram bins for charts."""

from __future__ import annotations

from collections.abc import Iterable

from attribution.analyses.common import (
    PERCENTILE_METHOD,
    Analysis,
    Selection,
    base_params,
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
    sel.materialize("int_request_lengths")  # the window's lengths in long form, read by both queries
    stats = spread_percentiles(sel.run("length_stats_by_group", quantiles=[q / 100 for q in pcts]), pcts)
    hist = sel.run("length_histogram_by_group", bins_per_decade=bins_per_decade)
    res = Analysis(
        name="lengths",
        params={**base_params(sel), "bins_per_decade": bins_per_decade, "percentiles": pcts},
        tables={"stats": name_groups(stats, sel.by), "histogram": name_groups(hist, sel.by)},
        titles={"stats": f"token lengths by {sel.by.value}", "histogram": "log-spaced histogram"},
        definitions=DEFINITIONS,
    )
    from attribution.histograms.analysis import add_to_lengths  # imports this module's package: late

    return add_to_lengths(res, sel, pcts)
