"""Which requests a replay export sends and when: the window's requests (attribution.dashboard's filters for
workload, deployment, label and engine version) in arrival order, times relative to the first arrival and
divided by the speed-up, prefix block ids renumbered densely, and sessions where a column identifies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl

from attribution import queries
from attribution.analyses.common import Window, resolve_window
from attribution.choices import Sessions
from attribution.errors import UsageError

BLOCK_TOKENS = 512  # Mooncake's block: the only source of block_hashes in the store (sources/mooncake.py)


@dataclass
class Replay:
    """The requests to send, one row each in send order: `t_ms` (float milliseconds after the first arrival,
    already divided by `speed`), `input_length`, `output_length`, `hash_ids` (dense ids in first-seen order, null
    without blocks), `session` / `turn` (null without sessions), `workload`, `deployment`, `model`."""

    rows: pl.DataFrame
    window: Window
    speed: float
    sessions: Sessions
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival as logged (before the speed-up)."""
        if not self.rows.height:
            return 0.0
        last = self.rows.select(pl.col("t_ms").cast(pl.Float64).max()).item()
        return float(last or 0.0) * self.speed / 1000

    def summary(self) -> dict[str, Any]:
        r = self.rows
        hashed = int(r["hash_ids"].is_not_null().sum()) if r.height else 0
        blocks_ok = r.filter(pl.col("hash_ids").is_not_null()).select(
            (pl.col("hash_ids").list.len() == (pl.col("input_length") + BLOCK_TOKENS - 1) // BLOCK_TOKENS).sum()
        ).item() if hashed else 0
        return {
            "requests": r.height,
            "first_arrival": r["arrival"].min() if r.height else None,
            "span_s": self.span_s,
            "speed": self.speed,
            "replay_span_s": self.span_s / self.speed,
            "with_hash_ids": hashed,
            "hash_ids_whole_blocks": int(blocks_ok or 0),
            "sessions": int(r["session"].n_unique()) if self.sessions != Sessions.none and r.height else None,
            "input_tokens": int(r["input_length"].sum() or 0),
            "output_tokens": int(r["output_length"].fill_null(0).sum() or 0),
            "left_out": self.left_out,
        }

    def per_workload(self) -> pl.DataFrame:
        return (self.rows.group_by("workload").agg(pl.len().alias("requests"),
                                                   pl.col("input_length").sum().alias("input_tokens"),
                                                   pl.col("output_length").sum().alias("output_tokens"))
                .sort(["requests", "workload"], descending=[True, False]))


def _dense_ids(rows: pl.DataFrame) -> pl.Series:
    """block_hashes as small integers numbered in first-seen order over the export (equal ids stay equal, so
    prefix reuse is kept; a slice of a trace starts again at 0, as Mooncake's own files do)."""
    flat = rows.select(pl.int_range(pl.len()).alias("i"), "block_hashes").explode("block_hashes")
    first = (flat.filter(pl.col("block_hashes").is_not_null()).with_row_index("pos")
             .group_by("block_hashes").agg(pl.col("pos").min()).sort("pos").with_row_index("dense"))
    flat = flat.join(first.select("block_hashes", pl.col("dense").cast(pl.Int64)), on="block_hashes", how="left",
                     maintain_order="left")
    per = flat.group_by("i", maintain_order=True).agg(pl.col("dense").drop_nulls())
    out = per.sort("i")["dense"]
    has = rows["block_hashes"].is_not_null() & (rows["block_hashes"].list.len() > 0)
    return pl.select(pl.when(has).then(out)).to_series().alias("hash_ids")


def replay_requests(con: duckdb.DuckDBPyConnection, *, since: Any = None, until: Any = None, speed: float = 1.0,
                    sessions: Sessions | str = Sessions.none) -> Replay:
    """The window's requests of `con` (narrowed by attribution.dashboard.narrow for the other filters) as a
    Replay at `speed` times the logged pace."""
    if not speed > 0 or speed != speed or speed == float("inf"):
        raise UsageError(f"--speed must be a positive number (got {speed})")
    sessions = Sessions(sessions)
    window = resolve_window(con, since, until)
    params = {"since": window.since, "until": window.until}
    df = queries.run(con, "replay_requests", **params)
    gone = queries.run(con, "replay_left_out", **params).to_dicts()[0]
    left = {k: int(v or 0) for k, v in gone.items() if v}
    t0 = df["t_us"].min() if df.height else 0
    rows = df.select(
        "arrival",
        ((pl.col("t_us") - t0) / 1000 / speed).alias("t_ms"),
        pl.col("prompt_tokens").alias("input_length"),
        pl.col("output_tokens").alias("output_length"),
        "workload", "deployment", "model", "user", "block_hashes",
    )
    rows = rows.with_columns(_dense_ids(rows) if rows.height else pl.lit(None, pl.List(pl.Int64)).alias("hash_ids"))
    if sessions == Sessions.user:
        # requests without a user id are each a session of their own
        key = pl.when(pl.col("user").is_not_null()).then(pl.lit("u:") + pl.col("user")) \
            .otherwise(pl.lit("r:") + pl.int_range(pl.len()).cast(pl.Utf8))
        rows = rows.with_columns(key.alias("_k"))
        rows = rows.with_columns(
            (pl.lit("s") + pl.col("_k").rank("dense").cast(pl.Utf8)).alias("session"),
            pl.int_range(pl.len()).over("_k").alias("turn"),
        ).drop("_k")
        # numbered in first-seen order, not by the (private) user id
        order = rows.select("session").unique(maintain_order=True).with_row_index("n")
        rows = rows.join(order, on="session", how="left", maintain_order="left").with_columns(
            pl.format("s{}", pl.col("n")).alias("session")).drop("n")
    else:
        rows = rows.with_columns(pl.lit(None, pl.Utf8).alias("session"), pl.lit(None, pl.Int64).alias("turn"))
    return Replay(rows.drop("user", "block_hashes"), window, float(speed), sessions, left)
