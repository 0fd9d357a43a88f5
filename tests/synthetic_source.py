"""A tiny line format used only to exercise the store's mechanics (offsets, tails, rotation, crashes)
independently of the real parsers. Lines: `SYNTH` header, then `ts=<ISO> n=<int>`; `bad ...` is an error."""

from __future__ import annotations

import polars as pl

from attribution import sources
from attribution.sources.base import ParseResult, Source


class Synthetic(Source):
    name = "synthetic"
    kind = "engine"

    def sniff(self, head: str, path: str) -> float:
        return 1.0 if head.startswith("SYNTH") else 0.0

    def parse(self, lines: pl.DataFrame, ctx) -> ParseResult:
        rows = lines.filter(pl.col("text").str.starts_with("ts=")).select(
            "line",
            # (not strict: a damaged stream's garbage lines give nulls, not a failed file)
            pl.col("text").str.extract(r"ts=(\S+)").str.to_datetime(time_zone="UTC", strict=False).alias("ts"),
            pl.col("text").str.extract(r"n=(\d+)").cast(pl.Int64, strict=False).alias("running"),
        )
        # Parser state carried across chunks: a running count, so resumed reads must restore it exactly.
        seen = ctx.state.get("seen", 0)
        rows = rows.with_columns((pl.int_range(1, rows.height + 1) + seen).alias("waiting"))
        ctx.state["seen"] = seen + rows.height
        out = ParseResult()
        out.add("engine_steps", rows)
        bad = lines.filter(pl.col("text").str.starts_with("bad"))
        out.add_errors(bad.select("line", pl.lit("bad line").alias("reason"), pl.col("text").alias("sample")))
        return out


def register() -> None:
    sources.registry()["synthetic"] = Synthetic()


def write_log(path, start: int, count: int, header: bool = True, final_newline: bool = True) -> None:
    body = "".join(f"ts=2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d} n={i}\n" for i in range(start, start + count))
    if not final_newline:
        body = body[:-1]
    with open(path, "a") as fh:
        fh.write(("SYNTH v1\n" if header else "") + body)


def pid_messages(plan):
    """A work function for attribution.workers.run (module level: it travels by name): which process
    handled `plan`, then done."""
    import os

    yield "pid", os.getpid(), plan
    yield ("done",)
