"""Shared pieces of the log writers: fixed-point number formatting as Polars expressions, timestamps,
derived ids, and writing a frame of (t, order, text) lines sorted by time to a plain or gzip file."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import polars as pl

from attribution.simulate.result import SimResult, hex16, mix64


def fixed(expr: pl.Expr, decimals: int) -> pl.Expr:
    """printf("%.Nf") for non-negative floats: Polars prints floats in shortest form (0.5, not 0.50)."""
    scale = 10**decimals
    scaled = (expr * scale).round(0).cast(pl.Int64)
    whole = (scaled // scale).cast(pl.Utf8)
    if decimals == 0:
        return whole
    return pl.concat_str(whole, pl.lit("."), (scaled % scale).cast(pl.Utf8).str.zfill(decimals))


def clock(result: SimResult, seconds: pl.Expr) -> pl.Expr:
    """Seconds since the scenario start as a UTC datetime."""
    start_us = int(result.scenario.start.timestamp() * 1_000_000)
    return (pl.lit(start_us) + (seconds * 1e6).round(0).cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))


def seconds(result: SimResult, col: str) -> pl.Expr:
    """A datetime column as seconds since the scenario start."""
    return (pl.col(col) - pl.lit(result.scenario.start)).dt.total_microseconds() / 1e6


def suffix8(ids: pl.Series) -> pl.Series:
    """vLLM V1's random 8-hex suffix of engine request ids, derived from the id so output is reproducible."""
    h = ids.hash(seed=7).to_numpy().astype(np.uint64)
    return hex16(mix64(h)).str.slice(0, 8)


def fake_key(alias: str) -> str:
    """A stand-in raw API key for an alias. Only its sha256 (what LiteLLM stores) is ever written."""
    return "sk-sim-" + hashlib.sha256(alias.encode()).hexdigest()[:32]


def write_lines(lines: pl.DataFrame, path: Path) -> Path:
    """Write `text` ordered by (t, order); `.gz` paths are gzip-compressed (level 6, as gzip's CLI).

    Times are compared in whole microseconds, as the request timestamps are stored: a step starting at a
    request's arrival must sort after that request's own line whatever the float rounding. The gzip header
    holds no time and no name, so the same lines give the same bytes."""
    t_us = (pl.col("t") * 1e6).round(0).cast(pl.Int64)
    lines = lines.with_columns(pl.col("order").cast(pl.Int64)).sort(t_us, "order", maintain_order=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A one-column CSV without quoting or header is the lines themselves, written by Polars in bulk.
    with open(path, "wb") as raw:
        if path.suffix == ".gz":
            with gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0) as f:
                # (a GzipFile is a binary file object; Polars' stubs name typing.IO only)
                lines.select("text").write_csv(f, include_header=False, quote_style="never")  # type: ignore[call-overload]
        else:
            lines.select("text").write_csv(raw, include_header=False, quote_style="never")
    return path


def pods(result: SimResult, engine: str | None = None) -> list[dict]:
    """Pod-phase configurations (one engine start each), optionally only those of one engine."""
    rows = result.pods.to_dicts()
    return [r for r in rows if engine is None or r["engine"] == engine]


def of_pod(df: pl.DataFrame, pod: dict) -> pl.DataFrame:
    return df.filter(pl.col("deployment") == pod["deployment"], pl.col("label") == pod["label"])
