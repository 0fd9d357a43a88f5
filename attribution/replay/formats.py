"""The trace formats a replay export writes, each in its reader's own field names and units, and the command
line that replays it. Sources read for each (../shared/formats/replay-arrivals-cache.md has the details):
- mooncake: kvcache-ai/Mooncake FAST25-release/README.md: JSONL `timestamp` (integer ms from the start),
  `input_length`, `output_length`, `hash_ids` (prefix-chained ids of 512-token blocks).
- aiperf: ai-dynamo/aiperf src/aiperf/dataset/loader/models.py `MooncakeTrace` (`--custom-dataset-type
  mooncake_trace`): the same keys, `timestamp` in ms, plus `session_id` grouping the turns of a conversation
  and `context_mode` (loader/mooncake_trace.py) saying each turn is a whole prompt.
- sglang: sgl-project/sglang python/sglang/benchmark/datasets/mooncake.py: reads `timestamp` (ms, sorted),
  `hash_ids` and `output_length`; it builds each prompt from the hash ids and ignores `input_length`.
- vllm: `vllm bench serve --dataset-name timed_trace` (docs.vllm.ai cli/bench/serve): JSON keys `timestamp`,
  `input_length`, `output_length`, `hash_ids`; timestamp x --timed-trace-sec-multiplier = seconds.
- burstgpt: HPMLL/BurstGPT README: `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`, `Total
  tokens`, `Log Type`, in that order (vLLM's burstgpt reader takes the token columns by position); AIPerf's
  burst_gpt_trace reader takes `Timestamp` as float seconds.
- csv: this tool's own columns, read back by `attribution simulate --replay`.
Times are always written already divided by --speed, so each command line replays the file at its own pace;
the generators' own time knobs are printed for an export made at --speed 1.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from attribution.choices import TraceFormat
from attribution.replay.selection import BLOCK_TOKENS, Replay

FORMATS = tuple(f.value for f in TraceFormat)
AIPERF_CONTEXT_MODE = "message_array_with_responses"
BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
CSV_COLUMNS = ("arrival_s", "workload", "deployment", "model", "session", "turn", "prompt_tokens",
               "output_tokens", "hash_ids")


def _hash_ids(rows: pl.DataFrame) -> pl.Expr:
    """The request's block ids; a request without any gets fresh ids of its own, ceil(input_length / 512) of
    them (no prefix reuse: a lower bound), numbered after the largest id in use, since the Mooncake readers
    build the prompt from the ids (SGLang) or need one id per block (GuideLLM rejects rows where they differ)."""
    top = rows["hash_ids"].list.max().max() if rows["hash_ids"].is_not_null().any() else None
    start = -1 if top is None else int(top)  # type: ignore[arg-type]
    n = ((pl.col("input_length") + BLOCK_TOKENS - 1) // BLOCK_TOKENS).clip(lower_bound=1)
    missing = pl.col("hash_ids").is_null()
    first = start + 1 + (n * missing.cast(pl.Int64)).cum_sum() - n  # a contiguous run per request
    fresh = pl.int_ranges(first, first + n)
    return pl.when(missing).then(fresh).otherwise(pl.col("hash_ids")).alias("hash_ids")


def frame(rep: Replay, fmt: TraceFormat | str) -> pl.DataFrame:
    """The rows to write, with the format's columns in its order."""
    fmt = TraceFormat(fmt)
    r = rep.rows
    # an unknown output length (a source that does not log it) replays as one token: the readers need a
    # positive number (AIPerf's single-turn model requires output_length > 0)
    out = pl.col("output_length").fill_null(1)
    if fmt == TraceFormat.burstgpt:
        return r.select(
            (pl.col("t_ms") / 1000).round(3).alias("Timestamp"),
            pl.col("model").fill_null(pl.col("workload")).alias("Model"),
            pl.col("input_length").alias("Request tokens"),
            out.alias("Response tokens"),
            (pl.col("input_length") + out).alias("Total tokens"),
            pl.when(pl.col("session").is_not_null()).then(pl.lit("Conversation log"))
            .otherwise(pl.lit("API log")).alias("Log Type"),
        )
    if fmt == TraceFormat.csv:
        return r.select(
            (pl.col("t_ms") / 1000).round(6).alias("arrival_s"), "workload", "deployment", "model", "session",
            "turn", pl.col("input_length").alias("prompt_tokens"), pl.col("output_length").alias("output_tokens"),
            pl.col("hash_ids").cast(pl.List(pl.Utf8)).list.join(" ").alias("hash_ids"),
        )
    cols = [
        pl.col("t_ms").round(0).cast(pl.Int64).alias("timestamp"),  # integer ms: GenAI-Perf casts to int
        "input_length",
        out.alias("output_length"),
        _hash_ids(r),
    ]
    if fmt == TraceFormat.aiperf and r["session"].is_not_null().any():
        # Each turn's input_length is its whole prompt (history included, as the engine counted it). AIPerf's
        # default for synthesised session rows treats a turn as a delta and accumulates the history; this mode
        # sends each turn as it is (ConversationContextMode in aiperf; needs a build whose MooncakeTrace
        # loader reads `context_mode` on every row of a session).
        cols += [pl.col("session").alias("session_id"), pl.lit(AIPERF_CONTEXT_MODE).alias("context_mode")]
    return r.select(cols)


def write(rep: Replay, fmt: TraceFormat | str, out: Path | None = None) -> str | None:
    """Write the export to `out`, or return it as text when `out` is None."""
    df = frame(rep, fmt)
    as_csv = TraceFormat(fmt) in (TraceFormat.burstgpt, TraceFormat.csv)
    if out is None:
        return df.write_csv() if as_csv else df.write_ndjson()
    if as_csv:
        df.write_csv(out)
    else:
        df.write_ndjson(out)
    return None


def commands(fmt: TraceFormat | str, path: str, rep: Replay) -> list[dict[str, str]]:
    """For each load generator that reads this format: the command that replays the file as written, and the
    knob that gives the same replay from an export at --speed 1 (where the generator scales time itself)."""
    fmt, n, s = TraceFormat(fmt), rep.rows.height, rep.speed
    aiperf = (f"aiperf profile --model MODEL --url http://127.0.0.1:8000 --endpoint-type chat --streaming "
              f"--input-file {path} --custom-dataset-type {{kind}} --fixed-schedule")
    rows: list[dict[str, str]] = []
    if fmt in (TraceFormat.mooncake, TraceFormat.aiperf):
        rows.append({"generator": "aiperf", "command": aiperf.format(kind="mooncake_trace"),
                     "time knob": "none: timestamps are pre-scaled (--fixed-schedule sends at them)"})
        rows.append({"generator": "genai-perf", "command": "genai-perf profile -m MODEL --endpoint-type chat "
                                                         f"--input-file payload:{path}",
                     "time knob": "none: timestamps are pre-scaled (--session-delay-ratio scales delays only)"})
    if fmt in (TraceFormat.mooncake, TraceFormat.sglang):
        rows.append({"generator": "sglang", "command": (
            "python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port 30000 --model MODEL "
            f"--dataset-name mooncake --dataset-path {path} --num-prompts {n} --use-trace-timestamps "
            "--mooncake-slowdown-factor 1 --mooncake-num-rounds 1"),
            "time knob": f"--mooncake-slowdown-factor {1 / s:.6g} on a --speed 1 export (it multiplies times); "
                         "SGLang builds prompts from hash_ids (128 'hi' per id) and ignores input_length"})
    if fmt in (TraceFormat.mooncake, TraceFormat.vllm):
        rows.append({"generator": "vllm", "command": (
            "vllm bench serve --backend openai --base-url http://127.0.0.1:8000 --endpoint /v1/completions "
            f"--model MODEL --dataset-name timed_trace --dataset-path {path} --num-prompts {n} "
            f"--timed-trace-sec-multiplier 0.001 --timed-trace-chunk-hash-size {BLOCK_TOKENS} --self-timed "
            "--ignore-eos"),
            "time knob": f"--timed-trace-sec-multiplier {0.001 / s:.6g} on a --speed 1 export (ms to s, then "
                         f"/{s:g}); the chunk size must be {BLOCK_TOKENS} (default 16)"})
    if fmt == TraceFormat.burstgpt:
        rows.append({"generator": "aiperf", "command": aiperf.format(kind="burst_gpt_trace"),
                     "time knob": "none: Timestamp (s) is pre-scaled"})
        rows.append({"generator": "vllm", "command": f"vllm bench serve --dataset-name burstgpt --dataset-path {path}",
                     "time knob": "none: vLLM's burstgpt reader ignores Timestamp, keeps only Model == GPT-4 rows "
                                  "and samples at random; use --format vllm to replay the arrivals"})
    if fmt == TraceFormat.csv:
        rows.append({"generator": "attribution", "command": f"attribution simulate --replay {path} "
                                                           "--scenario vllm-chat-small",
                     "time knob": "none: arrival_s is pre-scaled"})
    return rows
