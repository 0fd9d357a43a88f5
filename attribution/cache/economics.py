"""What cached prompt tokens are worth: prefill GPU time not spent (self-hosted) and dollars, at the GPU-hour
cost or at a per-token input price with the provider's cached-input discount (presets in prices.toml).
Formulas: ../shared/formats/replay-arrivals-cache.md §3.4; both are upper bounds (a cached prefill still costs a
little, and freed GPU time is money only when capacity is released).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl

from attribution.errors import UsageError


@cache
def presets() -> dict[str, dict]:
    return tomllib.loads((resources.files("attribution.cache") / "prices.toml").read_text())


@dataclass(frozen=True)
class Pricing:
    """Cache read and write prices as multiples of the base input price, and where the figures come from."""

    name: str
    read: float
    write: float
    source: str


def pricing(spec: str | None) -> Pricing | None:
    """A preset name (anthropic-5m, openai, ...) or a read ratio (`0.1`: cached tokens cost 10% of input)."""
    if spec is None:
        return None
    if spec in presets():
        p = presets()[spec]
        return Pricing(spec, float(p["read"]), float(p["write"]), p["source"])
    try:
        ratio = float(spec)
    except ValueError:
        raise UsageError(f"cache_pricing {spec!r}: a preset ({', '.join(presets())}) or a read price ratio "
                         "such as 0.1") from None
    if not 0 <= ratio <= 1:
        raise UsageError(f"cache_pricing {spec!r}: a read price ratio between 0 and 1")
    return Pricing(f"ratio {ratio:g}", ratio, 1.0, "set by the user")


def savings(df: pl.DataFrame, *, prefill_tokens_per_s: float | None, throughput: dict[str, float],
            gpu_hour_cost: float | None, gpus: int, input_price: float | None, price: Pricing | None
            ) -> pl.DataFrame:
    """`df` (deployment, cached_tokens, ...) with prefill_tokens_per_s (the setting, else the deployment's
    measured rate), gpu_hours_saved, usd_saved_gpu (at gpu_hour_cost x gpus) and usd_saved_api (cached tokens
    x input price per million x (1 - read ratio); cache writes are not in the logs, so their premium is not
    subtracted)."""
    rate = (pl.lit(prefill_tokens_per_s, pl.Float64) if prefill_tokens_per_s is not None
            else pl.col("deployment").replace_strict(throughput, default=None, return_dtype=pl.Float64))
    out = df.with_columns(rate.alias("prefill_tokens_per_s"))
    out = out.with_columns(
        (pl.col("cached_tokens") / pl.col("prefill_tokens_per_s") / 3600).alias("gpu_hours_saved"))
    gpu = pl.col("gpu_hours_saved") * (gpu_hour_cost * gpus) if gpu_hour_cost is not None else pl.lit(None)
    api = (pl.col("cached_tokens") / 1e6 * input_price * (1 - price.read)
           if input_price is not None and price is not None else pl.lit(None))
    return out.with_columns(gpu.cast(pl.Float64).alias("usd_saved_gpu"), api.cast(pl.Float64).alias("usd_saved_api"))


def break_even_hits(price: Pricing) -> float | None:
    """Cache hits that repay one write: (write - 1) / (1 - read) (0.28 for Anthropic's 5-minute tier)."""
    return (price.write - 1) / (1 - price.read) if price.read < 1 else None
