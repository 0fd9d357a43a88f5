"""The `cache` analysis: measured cached-token shares per source, the LRU prefix-reuse curve where block hashes
exist (global against per-deployment caches under the observed routing), and the economics of both. Returns an
Analysis (attribution.analyses) that the CLI, report section and dashboard page render as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import polars as pl

from attribution import queries
from attribution.analyses.common import Analysis, Window
from attribution.cache import economics
from attribution.cache.lru import DEFINITIONS, Trace, profile

RATIOS = tuple(DEFINITIONS)
MEASURES = {
    "requests.cached_tokens": "per-request cached tokens / prompt tokens (SGLang meta_info, gateway usage "
                              "prompt_tokens_details.cached_tokens); token-weighted",
    "engine_steps.cached_tokens": "SGLang prefill lines: #cached-token / (#new-token + #cached-token); token-weighted",
    "engine_steps.prefix_hit_rate": "vLLM stats lines: the sliding-window hit rate (last 1,000 requests) weighted "
                                    "by the line's prompt throughput: an approximation",
    "metric_counters": "increase of vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total (or "
                       "sglang:cached_tokens_total / sglang:prompt_tokens_total), resets handled",
}


@dataclass(frozen=True)
class Economics:
    prefill_tokens_per_s: float | None = None  # else each deployment's measured rate
    gpu_hour_cost: float | None = None
    gpus: int = 1
    input_price: float | None = None  # USD per million input tokens
    pricing: str | None = None  # a prices.toml preset or a read ratio

    @classmethod
    def from_settings(cls, st: Any) -> Economics:
        """The settings' economics (attribution.config.Settings); an input price without a pricing: openai."""
        return cls(st.prefill_tokens_per_s, st.gpu_hour_cost, st.gpus_per_pod or 1, st.input_price,
                   st.cache_pricing or ("openai" if st.input_price is not None else None))


def curve_capacities(unique_blocks: int) -> list[float]:
    """1, 2, 5, 10, ... blocks up to the first capacity that holds every distinct block, then unbounded."""
    caps: list[float] = []
    x = 1
    while True:
        for m in (1, 2, 5):
            caps.append(float(x * m))
            if x * m >= unique_blocks:
                return [*caps, float("inf")]
        x *= 10


def _ratio_rows(p, caps: list[float], block: int, **keys: Any) -> list[dict]:
    r = p.ratios(caps)
    return [{**keys, "capacity_blocks": None if np.isinf(c) else int(c),
             "capacity_tokens": None if np.isinf(c) else int(c) * block,
             **{d: float(r[d][i]) for d in RATIOS}} for i, c in enumerate(caps)]


def reuse(blocks: pl.DataFrame, capacity_blocks: int | None, block: int) -> dict[str, pl.DataFrame]:
    """The prefix-reuse tables of requests with block hashes (cache_block_requests rows, arrival order)."""
    ids = blocks["block_hashes"].explode().to_numpy().astype(np.int64)
    counts = blocks["block_hashes"].list.len().to_numpy().astype(np.int64)
    lengths = blocks["prompt_tokens"].to_numpy().astype(np.int64)
    deps = blocks["deployment"].to_numpy()
    dep_codes = np.unique(deps, return_inverse=True)[1].ravel()
    n_dep = int(dep_codes.max()) + 1 if len(dep_codes) else 0
    unique = len(np.unique(ids))
    caps = [float(capacity_blocks), float("inf")] if capacity_blocks else curve_capacities(unique)
    glob = profile(Trace(ids, counts, lengths, None, block))
    curve = _ratio_rows(glob, caps, block, scope="global")
    if n_dep > 1:  # one cache per deployment, requests where the logs say they went
        curve += _ratio_rows(profile(Trace(ids, counts, lengths, dep_codes, block)), caps, block,
                             scope="per_deployment")
    rows = []
    point = [float(capacity_blocks)] if capacity_blocks else []
    for wl, part in [("(all)", blocks), *sorted(blocks.group_by("workload"), key=lambda g: str(g[0][0]))]:
        name = wl if isinstance(wl, str) else wl[0]
        if name == "(all)" or blocks["workload"].n_unique() > 1:
            p = glob if name == "(all)" else profile(Trace.from_lists(
                part["block_hashes"].to_list(), part["prompt_tokens"].to_list(), block=block))
            base = {"workload": name, "requests": part.height, "prompt_tokens": int(part["prompt_tokens"].sum()),
                    "blocks": int(part["block_hashes"].list.len().sum()),
                    "unique_blocks": int(part["block_hashes"].explode().n_unique())}
            rows += _ratio_rows(p, [*point, float("inf")], block, **base)
    return {"potential": pl.DataFrame(rows), "curve": pl.DataFrame(curve)}


def measured_tables(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    share = (pl.col("cached_tokens") / pl.col("queried_tokens")).alias("cached_share")
    total = (df.group_by("measure", "source", "workload", "deployment")
             .agg(pl.col("queried_tokens", "cached_tokens", "samples").sum(), pl.col("day").min().alias("first_day"),
                  pl.col("day").max().alias("last_day"))
             .with_columns(share).sort("measure", "source", "workload", "deployment"))
    return {"measured": total, "measured_by_day": df.with_columns(share)}


def cache(con: duckdb.DuckDBPyConnection, window: Window, *, workload: str | None = None,
          deployment: str | None = None, capacity_blocks: int | None = None, block: int = 512,
          econ: Economics = Economics(), potential: bool = True) -> Analysis:
    """The cache analysis of `window` (`potential=False`: the measured shares only, no LRU simulation)."""
    params = {"since": window.since, "until": window.until, "workload": workload, "deployment": deployment}
    measured = measured_tables(queries.run(con, "cache_measured_by_source", **params))
    blocks = queries.run(con, "cache_block_requests", **params) if potential else pl.DataFrame()
    tput = queries.run(con, "cache_prefill_throughput", since=window.since, until=window.until)
    tables: dict[str, pl.DataFrame] = dict(measured)
    notes: list[str] = []
    if blocks.height:
        tables.update(reuse(blocks, capacity_blocks, block))
    elif potential:
        notes.append("no request in the window carries block hashes (Mooncake traces, replay exports): "
                     "no prefix-reuse curve")
    if measured["measured"].height == 0:
        notes.append("no source in the window reports cached tokens, prefix hit rates or prefix-cache counters")
    price = economics.pricing(econ.pricing)
    sav = _savings_input(tables, capacity_blocks)
    if sav.height:
        tables["savings"] = economics.savings(
            sav, prefill_tokens_per_s=econ.prefill_tokens_per_s,
            throughput=dict(zip(tput["deployment"], tput["prefill_tokens_per_s"], strict=True)),
            gpu_hour_cost=econ.gpu_hour_cost, gpus=econ.gpus, input_price=econ.input_price, price=price)
    if price is not None:
        be = economics.break_even_hits(price)
        notes.append(f"pricing {price.name}: cache reads at {price.read:g}x and writes at {price.write:g}x the input "
                     f"price ({price.source})" + (f"; a write pays for itself after {be:.2f} hits" if be else ""))
    if "curve" in tables and (per := tables["curve"].filter(pl.col("scope") == "per_deployment")).height:
        g = tables["curve"].filter(pl.col("scope") == "global")
        gain = g["token_weighted"] / per["token_weighted"]
        ok = [(c, x) for c, x in zip(g["capacity_blocks"], gain, strict=True) if c is not None and x == x]
        if ok:
            c, x = ok[len(ok) // 2]
            notes.append(f"one global cache against one cache per deployment at {c} blocks each: x{x:.2f} "
                         "token-weighted hits (FAST'25 Figure 10 reports x1.38-x2.36 on its traces)")
    definitions = {**MEASURES, **DEFINITIONS,
                   "cached_share": "cached_tokens / queried_tokens (token-weighted over the rows)",
                   "scope": "global: one LRU cache for every request; per_deployment: one per deployment, requests "
                            "routed as the logs record",
                   "capacity_blocks": f"LRU capacity in blocks of {block} tokens (empty: unbounded)",
                   "prefill_tokens_per_s": "the setting, else the p90 of the deployment's logged prompt throughput",
                   "usd_saved_api": "cached tokens x input price x (1 - cache read ratio); write premiums unknown"}
    return Analysis("cache", {**window.to_dict(), "workload": workload, "deployment": deployment,
                              "capacity_blocks": capacity_blocks, "block_tokens": block,
                              "pricing": None if price is None else price.name},
                    tables, titles=TITLES, definitions=definitions, notes=notes)


TITLES = {
    "measured": "Measured cached-token share, per source",
    "measured_by_day": "Measured cached-token share per day",
    "potential": "Potential prefix reuse (LRU over block hashes), per workload",
    "curve": "Prefix-reuse curve: hit ratio against LRU capacity",
    "savings": "Prefill saved by the prompt cache",
}


def _savings_input(tables: dict[str, pl.DataFrame], capacity_blocks: int | None) -> pl.DataFrame:
    """Cached tokens per workload and deployment: measured (the per-request measure where a source has it, else
    the engine's), and the LRU potential of the block-hash requests at the chosen (else unbounded) capacity."""
    rows = []
    m = tables["measured"]
    if m.height:
        rank = {k: i for i, k in enumerate(MEASURES)}
        best = (m.with_columns(pl.col("measure").replace_strict(rank, default=9).alias("_r"))
                .filter(pl.col("_r") == pl.col("_r").min().over("deployment"))
                .group_by("measure", "workload", "deployment")
                .agg(pl.col("queried_tokens", "cached_tokens").sum()))
        rows.append(best.select("measure", "workload", "deployment", "queried_tokens", "cached_tokens"))
    if "potential" in tables:
        p = tables["potential"].filter(pl.col("workload") == "(all)")
        p = p.filter(pl.col("capacity_blocks").is_null() if capacity_blocks is None
                     else pl.col("capacity_blocks") == capacity_blocks)
        rows.append(p.select(pl.format("potential (LRU, {} blocks)", pl.col("capacity_blocks").fill_null(
            pl.lit("unbounded"))).alias("measure"), "workload", pl.lit("(all)").alias("deployment"),
            pl.col("prompt_tokens").cast(pl.Float64).alias("queried_tokens"),
            (pl.col("token_weighted") * pl.col("prompt_tokens")).alias("cached_tokens")))
    return pl.concat(rows, how="vertical_relaxed").sort("measure", "workload", "deployment") if rows \
        else pl.DataFrame()
