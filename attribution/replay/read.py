"""Read a trace to replay through the simulator: a Mooncake-style JSONL (Mooncake's own traces and this tool's
mooncake / aiperf / sglang / vllm exports: `timestamp` ms, `input_length`, `output_length`, `hash_ids`), this
tool's CSV export, or any file the ingest reads (Azure and BurstGPT traces, engine and gateway logs), parsed
through the ingest's own path without a store. Returns simulator arrivals (attribution.simulate `arrivals`).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from attribution import reader
from attribution.errors import InputError
from attribution.schema import PolarsType
from attribution.sources.traces import known_workload

ARRIVAL_COLUMNS = ("arrival", "prompt_tokens", "output_tokens", "workload", "block_hashes")


def _first_line(path: Path) -> str:
    head = reader.read_head(path).decode("utf-8", "replace").lstrip("\ufeff")
    return head.lstrip().split("\n", 1)[0].strip()


def _mooncake_jsonl(path: Path) -> pl.DataFrame:
    schema: dict[str, PolarsType] = {"timestamp": pl.Float64, "input_length": pl.Int64, "output_length": pl.Int64,
              "hash_ids": pl.List(pl.Int64)}
    try:
        df = pl.read_ndjson(path, schema=schema, ignore_errors=True)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a Mooncake-style JSONL trace ({exc})") from None
    bad = df.filter(pl.col("timestamp").is_null() | pl.col("input_length").is_null())
    if bad.height:
        raise InputError(f"{path}: {bad.height} rows without `timestamp` (ms) or `input_length`; this reader "
                         "replays timestamped rows (AIPerf `delay`-only turns are not arrivals)")
    return df.select(
        (pl.col("timestamp") / 1000).alias("arrival"),  # seconds after the trace start
        pl.col("input_length").alias("prompt_tokens"),
        pl.col("output_length").alias("output_tokens"),
        # the service a released trace is named for (conversation_trace.jsonl -> conversation), else "replay"
        pl.lit(known_workload(str(path)) or "replay").alias("workload"),
        pl.col("hash_ids").alias("block_hashes"),
    )


def _own_csv(path: Path) -> pl.DataFrame:
    df = pl.read_csv(path, schema_overrides={"hash_ids": pl.Utf8, "session": pl.Utf8, "workload": pl.Utf8})
    return df.select(
        pl.col("arrival_s").alias("arrival"),
        "prompt_tokens",
        "output_tokens",
        pl.col("workload").fill_null("replay"),
        pl.col("hash_ids").str.split(" ").list.eval(pl.element().cast(pl.Int64, strict=False)).alias("block_hashes"),
    )


def read_trace(path: str | Path) -> tuple[pl.DataFrame, list[str]]:
    """Arrivals of the trace at `path` (arrival: seconds after its start or a UTC time; prompt and output tokens;
    workload; block hashes where the file has them), and notes on what was read."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"replay file {path} does not exist")
    first = _first_line(p)
    notes: list[str] = []
    if first.startswith("{"):
        try:
            keys = set(json.loads(first))
        except ValueError:
            keys = set()
        if {"timestamp", "input_length"} <= keys:
            df = _mooncake_jsonl(p)
            notes.append(f"{p.name}: Mooncake-style JSONL, {df.height:,} requests (timestamp in ms)")
            return df, notes
    if first.split(",")[0] == "arrival_s":
        df = _own_csv(p)
        notes.append(f"{p.name}: attribution replay CSV, {df.height:,} requests")
        return df, notes
    from attribution.ingest import parse_path

    parsed = parse_path(p)
    req = parsed.tables["requests"].filter(pl.col("arrival").is_not_null() & pl.col("prompt_tokens").is_not_null())
    if req.is_empty():
        raise InputError(f"{p}: read as {parsed.source}, but it has no request with an arrival and a prompt length")
    errors = parsed.tables["ingest_errors"].height
    notes.append(f"{p.name}: read as {parsed.source}, {req.height:,} requests"
                 + (f" ({errors:,} lines could not be parsed)" if errors else ""))
    return req.sort("arrival", maintain_order=True).select(
        "arrival", "prompt_tokens", "output_tokens", pl.col("workload").fill_null("replay"), "block_hashes"), notes
