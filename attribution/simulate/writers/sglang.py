"""Render a SimResult as SGLang 0.5.9 console logs (tp=1: no rank prefix), one file per pod and engine start.

Lines: `server_args=ServerArgs(...)`, the Mamba and KV pool allocation lines and the scheduler summary
(engine-logs.md S-3), a `Prefill batch` line for every prefill step and a `Decode batch` line every 40th
decode step (`--decode-log-interval`) with the hybrid `full token usage` / `mamba usage` parts (S-1), and
`Receive:` / `Finish:` lines per request (`--log-requests`, level 1) whose meta_info carries the counts.
Throughputs on batch lines are the step's own (tokens / step time), not SGLang's since-last-line figure.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from attribution.simulate.result import SimResult, expand_steps
from attribution.simulate.writers.common import clock, fixed, of_pod, pods, seconds, write_lines

GIB = 1 << 30
DECODE_LOG_INTERVAL = 40
CUDA_GRAPH_MAX_BS = 256  # SGLang's default on an H100 with tp < 4
# Defaults when the scenario gives pool sizes but not bytes: Qwen3.5-35B-A3B (A3.1): 20 KiB per KV token,
# 64.39 MB per state slot, of which the conv state is 2.29% (49,152 of 2,146,304 bytes per GDN layer).
KV_BYTES, STATE_BYTES, CONV_SHARE = 20480, 64_389_120, 49_152 / 2_146_304
GPU_GIB = 79.19
MEM_FRACTION_STATIC = 0.88


def _stamp(result: SimResult, t: pl.Expr) -> pl.Expr:
    return pl.concat_str(pl.lit("["), clock(result, t).dt.strftime("%Y-%m-%d %H:%M:%S"), pl.lit("] "))


def _startup(result: SimResult, pod: dict) -> pl.DataFrame:
    b = pod["kv_bytes_per_token"] or KV_BYTES
    s = pod["state_bytes_per_slot"] or STATE_BYTES
    slots, tokens = pod["state_pool_slots"], pod["kv_pool_tokens"]
    state_gb = ((slots or 0) + 1) * s / GIB  # the pool holds one padding slot
    kv_gb = tokens * b / GIB
    # The pools fill what mem_fraction_static leaves after the weights (A1.2: rest = avail after weights -
    # total x (1 - mem_fraction_static)), so the weights are what the scenario's pools leave of it: 34.6 GB
    # beside a 33.8 GiB cache (FP8 weights), 66 GB beside 2.4 GiB (bf16 weights).
    reserved = GPU_GIB * (1 - MEM_FRACTION_STATIC)
    weights_gb = max(GPU_GIB - 1.2 - reserved - state_gb - kv_gb, 1.0)
    avail_after = GPU_GIB - weights_gb - 1.2
    end_avail = avail_after - state_gb - kv_gb
    args = (
        f"model_path='{pod['model']}', tokenizer_path='{pod['model']}', tokenizer_mode='auto', "
        f"trust_remote_code=False, context_length={pod['max_model_len']}, host='0.0.0.0', port=30000, "
        f"mem_fraction_static={MEM_FRACTION_STATIC}, max_running_requests=None, max_total_tokens=None, "
        f"chunked_prefill_size={pod['max_num_batched_tokens']}, max_prefill_tokens=16384, "
        f"schedule_policy='fcfs', page_size=1, tp_size=1, log_requests=True, log_requests_level=1, "
        f"enable_metrics=True, disable_radix_cache={not pod['prefix_cache']}, mamba_full_memory_ratio=0.9, "
        f"max_mamba_cache_size=None, cuda_graph_max_bs={CUDA_GRAPH_MAX_BS}, "
        f"decode_log_interval={DECODE_LOG_INTERVAL}"
    )
    msgs = [
        f"server_args=ServerArgs({args})",
        f"Load weight begin. avail mem={GPU_GIB - 1.2:.2f} GB",
        f"Load weight end. type=Qwen3_5MoeForCausalLM, dtype=torch.bfloat16, avail mem={avail_after:.2f} GB, "
        f"mem usage={weights_gb:.2f} GB.",
    ]
    if slots:
        msgs.append(
            f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, conv_state size: "
            f"{state_gb * CONV_SHARE:.2f}GB, ssm_state size: {state_gb * (1 - CONV_SHARE):.2f}GB "
        )
    msgs += [
        f"KV Cache is allocated. #tokens: {tokens}, K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB",
        f"Memory pool end. avail mem={end_avail:.2f} GB",
        f"max_total_num_tokens={tokens}, chunked_prefill_size={pod['max_num_batched_tokens']}, "
        f"max_prefill_tokens=16384, max_running_requests={pod['max_running_requests']}, "
        f"context_len={pod['max_model_len']}, available_gpu_mem={end_avail - 2.1:.2f} GB",
        "The server is fired up and ready to roll!",
    ]
    t0 = pod["start_s"] - 60.0
    df = pl.DataFrame({"t": [t0 + i for i in range(len(msgs))], "msg": msgs})
    return df.select(
        "t", pl.lit(0).alias("order"), pl.concat_str(_stamp(result, pl.col("t")), "msg").alias("text")
    )


def _usage(slots: int | None) -> pl.Expr:
    return fixed(pl.col("state_usage").fill_null(0.0), 2) if slots else pl.lit("0.00")


def _prefill(result: SimResult, rows: pl.DataFrame, slots: int | None) -> pl.DataFrame:
    p = rows.filter(pl.col("prefill_tokens") > 0)
    text = pl.concat_str(
        _stamp(result, pl.col("t_s")),
        pl.lit("Prefill batch, #new-seq: "), pl.col("prefill_reqs").cast(pl.Utf8),
        pl.lit(", #new-token: "), pl.col("prefill_tokens").cast(pl.Utf8),
        pl.lit(", #cached-token: "), pl.col("cached_tokens").cast(pl.Utf8),
        pl.lit(", full token usage: "), fixed(pl.col("kv_usage"), 2),
        pl.lit(", mamba usage: "), _usage(slots),
        pl.lit(", #running-req: "), (pl.col("running") - pl.col("prefill_reqs")).cast(pl.Utf8),
        pl.lit(", #queue-req: "), pl.col("waiting").cast(pl.Utf8),
        pl.lit(", input throughput (token/s): "), fixed(pl.col("prefill_tokens") / pl.col("step_s"), 2),
        pl.lit(", cuda graph: False"),
    )  # fmt: skip
    return p.select(pl.col("t_s").alias("t"), pl.lit(2).alias("order"), text.alias("text"))


def _decode(result: SimResult, runs: pl.DataFrame, slots: int | None, k: int) -> pl.DataFrame:
    # Decode steps are numbered across the pod's life; every 40th gets a line. Expand only those steps.
    d = runs.filter(pl.col("decode_reqs") > 0, pl.col("prefill_tokens") == 0)
    d = d.with_columns((pl.col("n_steps").cum_sum() - pl.col("n_steps")).alias("c0"))
    first = (DECODE_LOG_INTERVAL - pl.col("c0") % DECODE_LOG_INTERVAL) % DECODE_LOG_INTERVAL
    d = d.with_columns(pl.int_ranges(first, pl.col("n_steps"), DECODE_LOG_INTERVAL).alias("j")).explode("j")
    d = d.drop_nulls("j")
    j = pl.col("j")
    d = d.with_columns(
        (pl.col("t_s") + j * pl.col("step_s") + pl.col("step_growth_s") * j * (j - 1) / 2).alias("t_s"),
        (pl.col("step_s") + pl.col("step_growth_s") * j).alias("step_s"),
        (pl.col("kv_tokens") + j * pl.col("decode_reqs")).alias("kv_tokens"),
    )
    pool = result.scenario.memory.kv_pool_tokens
    text = pl.concat_str(
        _stamp(result, pl.col("t_s")),
        pl.lit("Decode batch, #running-req: "), pl.col("decode_reqs").cast(pl.Utf8),
        pl.lit(", #full token: "), pl.col("kv_tokens").cast(pl.Utf8),
        pl.lit(", full token usage: "), fixed(pl.col("kv_tokens") / pool, 2),
        pl.lit(", mamba num: "), (pl.col("running") * k).cast(pl.Utf8),
        pl.lit(", mamba usage: "), _usage(slots),
        pl.lit(", cuda graph: "), pl.when(pl.col("decode_reqs") <= CUDA_GRAPH_MAX_BS).then(pl.lit("True"))
        .otherwise(pl.lit("False")),
        pl.lit(", gen throughput (token/s): "), fixed(pl.col("decode_reqs") / pl.col("step_s"), 2),
        pl.lit(", #queue-req: "), pl.col("waiting").cast(pl.Utf8),
    )  # fmt: skip
    return d.select(pl.col("t_s").alias("t"), pl.lit(3).alias("order"), text.alias("text"))


def _requests(result: SimResult, req: pl.DataFrame) -> pl.DataFrame:
    epoch = result.scenario.start.timestamp()
    req = req.with_columns(seconds(result, "arrival").alias("ta"), seconds(result, "finished").alias("tf"))
    # Durations from the microsecond timestamps, not the simulator's float seconds: a request admitted when
    # another finishes then has arrival + queue_time equal to that one's arrival + e2e_latency to the
    # microsecond (a hand-over at the running cap is a tie, not a 1 us overlap).
    req = req.with_columns(
        ((pl.col(c) - pl.col("arrival")).dt.total_microseconds() / 1e6).alias(f"_{c}")
        for c in ("admitted", "finished")
    )
    obj = pl.concat_str(
        pl.lit("GenerateReqInput(rid='"), "request_id",
        pl.lit("', sampling_params={'temperature': 0.7, 'max_new_tokens': "), pl.col("max_tokens").cast(pl.Utf8),
        pl.lit("}, return_logprob=False, stream=True, log_metrics=True)"),
    )  # fmt: skip
    reason = (
        pl.when(pl.col("finish_reason") == "length")
        .then(
            pl.concat_str(
                pl.lit("{'type': 'length', 'length': "), pl.col("output_tokens").cast(pl.Utf8), pl.lit("}")
            )
        )
        .otherwise(pl.lit("{'type': 'stop', 'matched': 151645}"))
    )
    meta = pl.concat_str(
        pl.lit("{'meta_info': {'id': '"), "request_id", pl.lit("', 'finish_reason': "), reason,
        pl.lit(", 'prompt_tokens': "), pl.col("prompt_tokens").cast(pl.Utf8),
        pl.lit(", 'weight_version': 'default', 'completion_tokens': "), pl.col("output_tokens").cast(pl.Utf8),
        pl.lit(", 'cached_tokens': "), pl.col("cached_tokens").cast(pl.Utf8),
        pl.lit(", 'e2e_latency': "), pl.col("_finished").cast(pl.Utf8),
        pl.lit(", 'queue_time': "), pl.col("_admitted").cast(pl.Utf8),
        pl.lit(", 'request_received_ts': "), (pl.col("ta") + epoch).cast(pl.Utf8),
        pl.lit(", 'prefill_finished_ts': "), (pl.col("ta") + pl.col("ttft_s") + epoch).cast(pl.Utf8),
        pl.lit(", 'decode_finished_ts': "), (pl.col("tf") + epoch).cast(pl.Utf8), pl.lit("}}"),
    )  # fmt: skip
    receive = pl.concat_str(_stamp(result, pl.col("ta")), pl.lit("Receive: obj="), obj)
    finish = pl.concat_str(_stamp(result, pl.col("tf")), pl.lit("Finish: obj="), obj, pl.lit(", out="), meta)
    return pl.concat([
        req.select(pl.col("ta").alias("t"), pl.lit(1).alias("order"), receive.alias("text")),
        req.select(pl.col("tf").alias("t"), pl.lit(4).alias("order"), finish.alias("text")),
    ])  # fmt: skip


def write_sglang_logs(result: SimResult, out_dir: str | Path, *, gz: bool = False) -> list[Path]:
    """Write `<out_dir>/<deployment>-<label>.log[.gz]` for every pod and phase; needs the step rows."""
    if result.steps is None:
        raise ValueError("the SGLang writer needs step rows: simulate(..., steps=True)")
    m = result.scenario.memory
    out = []
    for pod in pods(result):
        runs = of_pod(result.steps, pod).sort("t_s")
        prefill_steps = expand_steps(runs.filter(pl.col("prefill_tokens") > 0), m.kv_pool_tokens)
        parts = [
            _startup(result, pod),
            _prefill(result, prefill_steps, m.state_slots),
            _decode(result, runs, m.state_slots, m.slots_per_request),
            _requests(result, of_pod(result.requests, pod)),
        ]
        lines = pl.concat([p.with_columns(pl.col("order").cast(pl.Int64)) for p in parts])
        name = f"{pod['deployment']}-{pod['label']}.log" + (".gz" if gz else "")
        out.append(write_lines(lines, Path(out_dir) / name))
    return out
