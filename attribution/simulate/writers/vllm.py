"""Render a SimResult as vLLM V1 console logs (0.20-style), one file per pod and engine start.

Lines: the startup facts (version, `non-default args: {...}` (with `kv_cache_dtype: fp8` when the scenario's
KV bytes per token are the model's at one byte per element), `Available KV cache memory` when the scenario
gives pool bytes, `GPU KV cache size`, `Maximum concurrency`),
`Received request` / `Added request <id>-<8 hex>` per request (`--enable-log-requests`), uvicorn access lines
at completion, and the periodic stats line every 10 s in the V1 format (engine-logs.md V-1), logged only
while throughput is non-zero now or in the previous interval, as vLLM does at INFO.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from attribution.errors import AttributionError
from attribution.memory import load_profile
from attribution.simulate.result import SimResult
from attribution.simulate.writers.common import clock, fixed, of_pod, pods, seconds, suffix8, write_lines

API_PID, CORE_PID = 1, 213
SAMPLING = (
    "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, "
    "top_p=0.95, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
    "include_stop_str_in_output=False, ignore_eos=False, max_tokens="
)
SAMPLING_END = (
    ", min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
    "spaces_between_special_tokens=True, truncate_prompt_tokens=None, structured_outputs=None, extra_args=None)"
)


def _head(result: SimResult, t: pl.Expr, proc: str, pid: int, where: str) -> pl.Expr:
    stamp = clock(result, t).dt.strftime("%m-%d %H:%M:%S")
    return pl.concat_str(pl.lit(f"({proc} pid={pid}) INFO "), stamp, pl.lit(f" [{where}] "))


def _kv_cache_dtype(pod: dict) -> str | None:
    """'fp8' when the scenario's KV bytes per token are what the model's KV cache takes in fp8 (the flag an
    operator sets for it); None when they are not, or when the model is not a known preset."""
    if not pod["kv_bytes_per_token"]:
        return None
    try:
        fp8 = load_profile(pod["model"], kv_cache_dtype="fp8").kv_bytes_per_token
    except AttributionError:
        return None
    return "fp8" if fp8 == pod["kv_bytes_per_token"] else None


def _cache_memory(pod: dict) -> str | None:
    """`Available KV cache memory` as vLLM 0.15+ prints it (format_gib: str(round(GiB, 2))): the KV pool
    plus the state slots beside it, which is what the scenario's bytes after weights split into (within
    one KV token)."""
    b, s = pod["kv_bytes_per_token"], pod["state_bytes_per_slot"]
    if not b:
        return None
    total = pod["kv_pool_tokens"] * b + (pod["state_pool_slots"] or 0) * (s or 0)
    return f"Available KV cache memory: {round(total / (1 << 30), 2)} GiB"


def _startup(result: SimResult, pod: dict) -> pl.DataFrame:
    t0 = pod["start_s"] - 45.0
    cap, mml, kv = pod["max_running_requests"], pod["max_model_len"], pod["kv_pool_tokens"]
    dtype = _kv_cache_dtype(pod)
    args = {
        "model_tag": pod["model"], "model": pod["model"], "max_model_len": mml,
        **({"kv_cache_dtype": dtype} if dtype else {}),
        "max_num_batched_tokens": pod["max_num_batched_tokens"], "max_num_seqs": cap,
        "enable_prefix_caching": pod["prefix_cache"], "enable_log_requests": True,
    }  # fmt: skip
    available = _cache_memory(pod)
    rows = [
        (t0, "APIServer", API_PID, "api_server.py:1885", f"vLLM API server version {pod['version']}"),
        (t0, "APIServer", API_PID, "utils.py:253", f"non-default args: {args}"),
        *([(t0 + 25, "EngineCore_DP0", CORE_PID, "gpu_worker.py:298", available)] if available else []),
        (t0 + 25, "EngineCore_DP0", CORE_PID, "kv_cache_utils.py:1087", f"GPU KV cache size: {kv:,} tokens"),
        (t0 + 25, "EngineCore_DP0", CORE_PID, "kv_cache_utils.py:1091",
         f"Maximum concurrency for {mml:,} tokens per request: {kv / mml:.2f}x"),
        (t0 + 40, "EngineCore_DP0", CORE_PID, "core.py:263",
         "init engine (profile, create kv cache, warmup model) took 38.42 s"),
        (t0 + 44, "APIServer", API_PID, "api_server.py:1950", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
    ]  # fmt: skip
    df = pl.DataFrame(rows, schema=["t", "proc", "pid", "where", "msg"], orient="row")
    stamp = clock(result, pl.col("t")).dt.strftime("%m-%d %H:%M:%S")
    text = pl.format("({} pid={}) INFO {} [{}] {}", "proc", "pid", stamp, "where", "msg")
    return df.select("t", pl.int_range(pl.len()).alias("order"), text.alias("text"))


def _requests(result: SimResult, req: pl.DataFrame) -> pl.DataFrame:
    req = req.with_columns(
        seconds(result, "arrival").alias("ta"),
        seconds(result, "finished").alias("tf"),
        pl.Series("sfx", suffix8(req["request_id"])),
        (pl.col("session").hash(3) % 250).alias("host"),
        (32768 + pl.col("request_id").hash(5) % 28000).alias("port"),
    )
    received = pl.concat_str(
        _head(result, pl.col("ta"), "APIServer", API_PID, "logger.py:49"),
        pl.lit("Received request "), "request_id", pl.lit(": params: " + SAMPLING),
        pl.col("max_tokens").cast(pl.Utf8), pl.lit(SAMPLING_END + ", lora_request: None."),
    )  # fmt: skip
    added = pl.concat_str(
        _head(result, pl.col("ta"), "APIServer", API_PID, "async_llm.py:382"),
        pl.lit("Added request "), "request_id", pl.lit("-"), "sfx", pl.lit("."),
    )  # fmt: skip
    access = pl.concat_str(  # uvicorn lines carry no timestamp
        pl.lit(f"(APIServer pid={API_PID}) INFO:     10.0.0."), pl.col("host").cast(pl.Utf8), pl.lit(":"),
        pl.col("port").cast(pl.Utf8), pl.lit(' - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
    )  # fmt: skip
    return pl.concat([
        req.select(pl.col("ta").alias("t"), pl.lit(10).alias("order"), received.alias("text")),
        req.select(pl.col("ta").alias("t"), pl.lit(11).alias("order"), added.alias("text")),
        req.select(pl.col("tf").alias("t"), pl.lit(12).alias("order"), access.alias("text")),
    ])  # fmt: skip


def _stats(result: SimResult, st: pl.DataFrame) -> pl.DataFrame:
    active = (pl.col("prompt_tput") > 0) | (pl.col("gen_tput") > 0)
    st = st.sort("t_s").filter(active | active.shift(1).fill_null(False))
    pre = (
        pl.when(pl.col("preemptions") > 0)
        .then(pl.format(", Preemptions: {}", "preemptions"))
        .otherwise(pl.lit(""))
    )
    hit = fixed(pl.col("prefix_hit_rate").fill_null(0.0) * 100, 1)
    text = pl.concat_str(
        _head(result, pl.col("t_s"), "APIServer", API_PID, "loggers.py:257"),
        pl.lit("Engine 000: Avg prompt throughput: "), fixed(pl.col("prompt_tput"), 1),
        pl.lit(" tokens/s, Avg generation throughput: "), fixed(pl.col("gen_tput"), 1),
        pl.lit(" tokens/s, Running: "), pl.col("running").cast(pl.Utf8),
        pl.lit(" reqs, Waiting: "), pl.col("waiting").cast(pl.Utf8), pl.lit(" reqs"), pre,
        pl.lit(", GPU KV cache usage: "), fixed(pl.col("kv_usage") * 100, 1),
        pl.lit("%, Prefix cache hit rate: "), hit, pl.lit("%"),
    )  # fmt: skip
    return st.select(pl.col("t_s").alias("t"), pl.lit(5).alias("order"), text.alias("text"))


def write_vllm_logs(result: SimResult, out_dir: str | Path, *, gz: bool = False) -> list[Path]:
    """Write `<out_dir>/<deployment>-<label>.log[.gz]` for every pod and phase; returns the paths."""
    out = []
    for pod in pods(result):
        parts = [_startup(result, pod), _requests(result, of_pod(result.requests, pod)),
                 _stats(result, of_pod(result.stats, pod))]  # fmt: skip
        lines = pl.concat([p.with_columns(pl.col("order").cast(pl.Int64)) for p in parts])
        name = f"{pod['deployment']}-{pod['label']}.log" + (".gz" if gz else "")
        out.append(write_lines(lines, Path(out_dir) / name))
    return out
