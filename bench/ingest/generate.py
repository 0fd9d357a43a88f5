"""Synthetic vLLM and SGLang console logs for the ingest benchmark, in the formats of
../shared/formats/engine-logs.md: a vLLM 0.20 V1 log (V-1 stats, V-2 request lines, V-4 uvicorn lines) and two
SGLang logs (S-1 batch lines in the 0.5.9 plain form and the 0.5.12+ hybrid Mamba form, S-2 `--log-requests`
lines at level 0, S-4 access lines). Numbers come from numpy; lines are built per block of simulated time.
The manifest counts every line kind, so the benchmark can check that each parser found what was written.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

START = datetime(2026, 5, 19, 10, 0, 0, tzinfo=UTC)
BLOCK_S = 60.0  # simulated seconds generated at a time (bounds memory and the overshoot past a file's share)
# Share of the total bytes per file: vLLM half, SGLang plain and hybrid a quarter each.
FILES = {"vllm-qwen3-8b.log": ("vllm", 0.5), "sglang-qwen3-8b.log": ("sglang", 0.25),
         "sglang-qwen3-next.log": ("sglang_hybrid", 0.25)}
GATEWAYS = [f"10.0.{a}.{b}" for a, b in ((0, 7), (0, 12), (1, 33), (1, 41), (2, 5), (2, 18))]

_SAMPLING = (
    "SamplingParams(n=1, presence_penalty={pp}, frequency_penalty=0.0, repetition_penalty=1.0, "
    "temperature={t}, top_p={tp}, top_k={tk}, min_p=0.0, seed=None, stop=[], stop_token_ids={stops}, "
    "bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens={mt}, min_tokens=0, "
    "logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
    "truncate_prompt_tokens=None, structured_outputs=None, extra_args=None)"
)
# GenerateReqInput repr at --log-requests-level 0 (text, ids and sampling params skipped), 0.5.9 field order.
_OBJ = (
    "GenerateReqInput(video_data=None, rid='{rid}', return_logprob=False, logprob_start_len=-1, "
    "top_logprobs_num=0, token_ids_logprob=None, return_text_in_logprobs=False, stream={stream}, log_metrics=True, "
    "return_hidden_states=False, modalities=[], session_params=None, lora_id=None, custom_logit_processor=None, "
    "bootstrap_host=None, bootstrap_port=None, bootstrap_room=None, bootstrap_pair_key=None, "
    "data_parallel_rank=None, background=False, conversation_id=None, priority=None, extra_key=None, "
    "no_logs=False, custom_labels=None, return_bytes=False)"
)


class Clock:
    """Formatted timestamps per whole second (many lines share one second)."""

    def __init__(self, fmt: str):
        self.fmt, self.cache = fmt, {}

    def __call__(self, t: float) -> str:
        s = int(t)
        out = self.cache.get(s)
        if out is None:
            if len(self.cache) > 4096:
                self.cache.clear()
            out = self.cache[s] = (START + timedelta(seconds=s)).strftime(self.fmt)
        return out


def _hexes(rng: np.random.Generator, n: int, width: int) -> list[str]:
    h = rng.bytes(n * width // 2).hex()
    return [h[i * width:(i + 1) * width] for i in range(n)]


def _requests(rng: np.random.Generator, t0: float, rate: float) -> dict[str, np.ndarray]:
    """Poisson arrivals in one block with prompt/output lengths and latencies."""
    n = int(rng.poisson(rate * BLOCK_S))
    arrival = np.sort(rng.uniform(t0, t0 + BLOCK_S, n))
    prompt = np.clip(rng.lognormal(7.0, 1.0, n), 16, 30000).astype(np.int64)
    output = np.clip(rng.lognormal(5.3, 0.9, n), 1, 8000).astype(np.int64)
    cached = (prompt * rng.choice([0.0, 0.0, 0.3, 0.6, 0.9], n)).astype(np.int64) // 16 * 16
    ttft = rng.gamma(2.0, 0.12, n) + prompt / 20000
    e2e = ttft + output * rng.uniform(0.012, 0.035, n)
    return {"arrival": arrival, "prompt": prompt, "output": output, "cached": cached, "ttft": ttft, "e2e": e2e}


def _walk(rng: np.random.Generator, n: int, lo: int, hi: int, start: int) -> np.ndarray:
    return np.clip(start + np.cumsum(rng.integers(-3, 4, n)), lo, hi)


# -- vLLM 0.20 -----------------------------------------------------------------------------------------

def vllm_startup(clock: Clock) -> list[str]:
    a, e = "(APIServer pid=1)", "(EngineCore_DP0 pid=213)"
    return [
        f"{a} INFO {clock(0)} [api_server.py:1896] vLLM API server version 0.20.0",
        f"{a} INFO {clock(0)} [utils.py:326] non-default args: {{'model_tag': 'Qwen/Qwen3-8B', 'host': '0.0.0.0', "
        "'enable_log_requests': True, 'model': 'Qwen/Qwen3-8B', 'max_model_len': 32768, "
        "'served_model_name': ['qwen3-8b']}",
        f"{e} INFO {clock(40)} [gpu_model_runner.py:2581] Model loading took 15.27 GiB memory and 32.404656 seconds",
        f"{e} INFO {clock(52)} [gpu_worker.py:298] Available KV cache memory: 52.18 GiB",
        f"{e} INFO {clock(52)} [kv_cache_utils.py:864] GPU KV cache size: 379,952 tokens",
        f"{e} INFO {clock(52)} [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 11.60x",
        f"{e} INFO {clock(70)} [core.py:210] init engine (profile, create kv cache, warmup model) took 44.91 s",
        f"{a} INFO {clock(71)} [api_server.py:1638] Starting vLLM API server 0 on http://0.0.0.0:8000",
    ]


def vllm_block(rng: np.random.Generator, t0: float, clock: Clock, counts: dict[str, int]
               ) -> list[tuple[float, str]]:
    r = _requests(rng, t0, rate=18.0)
    n = len(r["arrival"])
    ids, sfx = _hexes(rng, n, 16), _hexes(rng, n, 8)
    temp = rng.choice(["0.0", "0.2", "0.6", "0.7", "1.0"], n).tolist()
    top_p = rng.choice(["1.0", "0.95", "0.8"], n).tolist()
    top_k = rng.choice(["0", "20", "-1"], n).tolist()
    explicit = rng.choice([256, 512, 1024, 2048, 4096, 8192], n)
    # The chat endpoint sets max_tokens to what is left of max_model_len when the client gives none.
    max_tok = np.where(rng.random(n) < 0.4, explicit, 32768 - r["prompt"]).tolist()
    stops = rng.choice(["[]", "[151643, 151645]"], n).tolist()
    aborted = (rng.random(n) < 0.01).tolist()
    ignored = (rng.random(n) < 0.005).tolist()
    ports = rng.integers(32768, 61000, n + 1000).tolist()
    gw = rng.choice(GATEWAYS, n).tolist()
    arr, fin = r["arrival"].tolist(), (r["arrival"] + r["e2e"]).tolist()
    a = "(APIServer pid=1)"
    ev: list[tuple[float, str]] = []
    for i in range(n):
        ts = clock(arr[i])
        params = _SAMPLING.format(pp="0.0", t=temp[i], tp=top_p[i], tk=top_k[i], stops=stops[i], mt=max_tok[i])
        if ignored[i]:
            ev.append((arr[i], f"{a} WARNING {ts} [protocol.py:83] The following fields were present in the "
                               "request but ignored: {'store'}"))
        ev.append((arr[i], f"{a} INFO {ts} [logger.py:49] Received request chatcmpl-{ids[i]}: params: {params}, "
                           "lora_request: None."))
        ev.append((arr[i] + 1e-4, f"{a} INFO {ts} [async_llm.py:382] Added request chatcmpl-{ids[i]}-{sfx[i]}."))
        if aborted[i]:
            ev.append((fin[i], f"{a} INFO {clock(fin[i])} [async_llm.py:532] Aborted request(s) "
                               f"chatcmpl-{ids[i]}-{sfx[i]}."))
        ev.append((fin[i] + 1e-4, f'{a} INFO:     {gw[i]}:{ports[i]} - "POST /v1/chat/completions HTTP/1.1" 200 OK'))
    # Rejected requests (validation errors) leave only an access line.
    bad = rng.uniform(t0, t0 + BLOCK_S, int(rng.poisson(0.002 * n))).tolist()
    for j, t in enumerate(bad):
        ev.append((t, f'{a} INFO:     {GATEWAYS[j % 6]}:{ports[n + j]} - "POST /v1/chat/completions HTTP/1.1" '
                      "400 Bad Request"))
    # Stats every 10 s; Prometheus scrapes every 15 s; two kubelet probes every 10 s.
    steps = np.arange(math.ceil(t0 / 10) * 10, t0 + BLOCK_S, 10.0)
    k = len(steps)
    run, wait = _walk(rng, k, 0, 256, 40), np.maximum(_walk(rng, k, -20, 60, 0), 0)
    kv, hit = np.clip(run / 256 + rng.normal(0, 0.05, k), 0, 1) * 100, rng.uniform(20, 70, k)
    ptput, gtput = rng.gamma(3, 4000, k), run * rng.uniform(25, 40, k)
    pre = rng.poisson(0.3, k)
    for j, t in enumerate(steps.tolist()):
        preempt = f"Preemptions: {pre[j]}, " if pre[j] else ""
        ev.append((t, f"{a} INFO {clock(t)} [loggers.py:271] Engine 000: Avg prompt throughput: {ptput[j]:.1f} "
                      f"tokens/s, Avg generation throughput: {gtput[j]:.1f} tokens/s, Running: {run[j]} reqs, "
                      f"Waiting: {wait[j]} reqs, {preempt}GPU KV cache usage: {kv[j]:.1f}%, "
                      f"Prefix cache hit rate: {hit[j]:.1f}%"))
        ev.append((t + 0.2, f'{a} INFO:     10.0.0.1:{ports[j]} - "GET /health HTTP/1.1" 200 OK'))
        ev.append((t + 0.3, f'{a} INFO:     10.0.0.1:{ports[j + 1]} - "GET /health HTTP/1.1" 200 OK'))
    scrapes = np.arange(math.ceil(t0 / 15) * 15, t0 + BLOCK_S, 15.0).tolist()
    for j, t in enumerate(scrapes):
        ev.append((t + 0.5, f'{a} INFO:     10.0.5.12:{ports[j + 2]} - "GET /metrics HTTP/1.1" 200 OK'))
    counts["stats"] += k
    counts["received"] += n
    counts["added"] += n
    counts["aborted"] += sum(aborted)
    counts["warning"] += sum(ignored)
    counts["access"] += n + len(bad) + 2 * k + len(scrapes)
    return ev


# -- SGLang 0.5.9 (plain pool, tp=1) and 0.5.12+ (hybrid Mamba pool, tp=2) -----------------------------

def sglang_startup(clock: Clock, hybrid: bool) -> list[str]:
    tp = " TP0" if hybrid else ""
    model, arch = ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM") if hybrid else \
        ("Qwen/Qwen3-8B", "Qwen3ForCausalLM")
    served = "qwen3-next" if hybrid else "qwen3-8b"
    lines = [
        f"[{clock(0)}] server_args=ServerArgs(model_path='{model}', tokenizer_path='{model}', host='0.0.0.0', "
        f"port=30000, mem_fraction_static=0.85, max_running_requests=None, chunked_prefill_size=8192, "
        f"tp_size={2 if hybrid else 1}, served_model_name='{served}', log_requests=True, log_requests_level=0, "
        f"enable_metrics={hybrid}, decode_log_interval=40)",
        f"[{clock(20)}{tp}] Load weight begin. avail mem=78.52 GB",
        f"[{clock(50)}{tp}] Load weight end. type={arch}, dtype=torch.bfloat16, avail mem=62.71 GB, "
        "mem usage=15.81 GB.",
    ]
    if hybrid:
        lines.append(f"[{clock(51)}{tp}] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: "
                     "0.10GB, ssm_state size: 4.38GB ")
    lines += [
        f"[{clock(51)}{tp}] KV Cache is allocated. #tokens: 473854, K size: 21.71 GB, V size: 21.71 GB",
        f"[{clock(51)}{tp}] Memory pool end. avail mem=9.43 GB",
        f"[{clock(60)}{tp}] max_total_num_tokens=473854, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=62, context_len=262144, available_gpu_mem=9.43 GB",
        f"[{clock(75)}] The server is fired up and ready to roll!",
    ]
    return lines


def sglang_block(rng: np.random.Generator, t0: float, clock: Clock, counts: dict[str, int], hybrid: bool
                 ) -> list[tuple[float, str]]:
    r = _requests(rng, t0, rate=14.0)
    n = len(r["arrival"])
    rids = _hexes(rng, n, 32)
    stream = rng.choice(["True", "False"], n, p=[0.8, 0.2]).tolist()
    length = (rng.random(n) < 0.15).tolist()
    prompt, output, cached = r["prompt"].tolist(), r["output"].tolist(), r["cached"].tolist()
    e2e, ttft = r["e2e"].tolist(), r["ttft"].tolist()
    arr, fin = r["arrival"].tolist(), (r["arrival"] + r["e2e"]).tolist()
    ports = rng.integers(32768, 61000, n + 1000).tolist()
    gw = rng.choice(GATEWAYS, n).tolist()
    tp = " TP0" if hybrid else ""
    ev: list[tuple[float, str]] = []
    for i in range(n):
        obj = _OBJ.format(rid=rids[i], stream=stream[i])
        ev.append((arr[i], f"[{clock(arr[i])}] Receive: obj={obj}"))
        reason = f"{{'type': 'length', 'length': {output[i]}}}" if length[i] else \
            "{'type': 'stop', 'matched': 151645}"
        meta = (f"'id': '{rids[i]}', 'finish_reason': {reason}, 'prompt_tokens': {prompt[i]}, "
                f"'weight_version': 'default', 'total_retractions': 0, 'completion_tokens': {output[i]}, "
                f"'cached_tokens': {cached[i]}, 'e2e_latency': {e2e[i]!r}")
        if hybrid:  # --enable-metrics adds the timing keys (0.5.9 names)
            q = ttft[i] * 0.3
            meta += (f", 'queue_time': {q!r}, 'prefill_launch_delay': 0.0011, 'prefill_launch_latency': "
                     f"{ttft[i] - q:.6f}, 'prefill_finished_ts': {1779184800 + arr[i] + ttft[i]:.6f}, "
                     f"'request_received_ts': {1779184800 + arr[i]:.6f}, 'request_sent_to_scheduler_ts': "
                     f"{1779184800 + arr[i] + 0.002:.6f}, 'response_sent_to_client_ts': {1779184800 + fin[i]:.6f}, "
                     f"'decode_finished_ts': {1779184800 + fin[i] - 0.001:.6f}, 'inference_time': "
                     f"{e2e[i] - q:.6f}, 'decode_throughput': {output[i] / max(e2e[i] - ttft[i], 1e-3):.3f}")
        ev.append((fin[i], f"[{clock(fin[i])}] Finish: obj={obj}, out={{'meta_info': {{{meta}}}}}"))
        ev.append((fin[i] + 1e-4, f'[{clock(fin[i])}] INFO:     {gw[i]}:{ports[i]} - "POST /v1/chat/completions '
                                  'HTTP/1.1" 200 OK'))
    # One prefill batch per 0.25 s window that saw arrivals; a decode line every 40 steps (~1 s).
    win = np.floor(r["arrival"] / 0.25).astype(np.int64)
    bins, first = np.unique(win, return_index=True)
    new_seq = np.diff(np.append(first, n))
    new_tok = np.add.reduceat(r["prompt"] - r["cached"], first) if n else np.array([], np.int64)
    hit_tok = np.add.reduceat(r["cached"], first) if n else np.array([], np.int64)
    m = len(bins)
    run, queue = _walk(rng, m, 0, 62, 20), np.maximum(_walk(rng, m, -30, 40, 0), 0)
    usage, mamba = rng.uniform(0.05, 0.9, m), rng.uniform(0.05, 0.6, m)
    in_tput = rng.gamma(3, 3000, m)
    for j, t in enumerate(((bins + 1) * 0.25).tolist()):
        if hybrid:
            body = (f"#new-seq: {new_seq[j]}, #new-token: {new_tok[j]}, #cached-token: {hit_tok[j]}, full token "
                    f"usage: {usage[j]:.2f}, mamba usage: {mamba[j]:.2f}, #running-req: {run[j]}, #queue-req: "
                    f"{queue[j]}, #pending-token: {queue[j] * 900}, cuda graph: False, input throughput (token/s): "
                    f"{in_tput[j]:.2f}")
        else:
            body = (f"#new-seq: {new_seq[j]}, #new-token: {new_tok[j]}, #cached-token: {hit_tok[j]}, token usage: "
                    f"{usage[j]:.2f}, #running-req: {run[j]}, #queue-req: {queue[j]}, input throughput "
                    f"(token/s): {in_tput[j]:.2f}, cuda graph: False")
        ev.append((t, f"[{clock(t)}{tp}] Prefill batch, {body}"))
    dec = np.arange(math.ceil(t0), t0 + BLOCK_S, 1.0)
    k = len(dec)
    drun = _walk(rng, k, 1, 62, 30)
    dusage, dmamba = rng.uniform(0.05, 0.9, k), rng.uniform(0.05, 0.6, k)
    gen = drun * rng.uniform(40, 70, k)
    for j, t in enumerate((dec + 0.5).tolist()):
        tokens = int(dusage[j] * 473854)
        if hybrid:
            body = (f"#running-req: {drun[j]}, #full token: {tokens}, full token usage: {dusage[j]:.2f}, mamba num: "
                    f"{drun[j] * 3}, mamba usage: {dmamba[j]:.2f}, cuda graph: True, gen throughput (token/s): "
                    f"{gen[j]:.2f}, #queue-req: 0")
        else:
            body = (f"#running-req: {drun[j]}, #token: {tokens}, token usage: {dusage[j]:.2f}, cuda graph: True, "
                    f"gen throughput (token/s): {gen[j]:.2f}, #queue-req: 0")
        ev.append((t, f"[{clock(t)}{tp}] Decode batch, {body}"))
    probes = np.arange(math.ceil(t0 / 10) * 10, t0 + BLOCK_S, 10.0).tolist()
    for j, t in enumerate(probes):
        ev.append((t + 0.2, f'[{clock(t)}] INFO:     127.0.0.1:{ports[n + j]} - "GET /health HTTP/1.1" 200 OK'))
    counts["prefill"] += m
    counts["decode"] += k
    counts["receive"] += n
    counts["finish"] += n
    counts["access"] += n + len(probes)
    return ev


# -- files ---------------------------------------------------------------------------------------------

def write_file(path: Path, kind: str, target_bytes: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    if kind == "vllm":
        clock = Clock("%m-%d %H:%M:%S")
        counts = dict.fromkeys(("startup", "stats", "received", "added", "aborted", "warning", "access"), 0)
        head = vllm_startup(clock)
    else:
        clock = Clock("%Y-%m-%d %H:%M:%S")
        counts = dict.fromkeys(("startup", "prefill", "decode", "receive", "finish", "access"), 0)
        head = sglang_startup(clock, kind == "sglang_hybrid")
    counts["startup"] = len(head)
    written, t0, n_lines = 0, 80.0, 0
    # Requests finish after their block ends: events past the block are held back and merged with the next
    # block's, so lines stay in time order.
    pending: list[tuple[float, str]] = []
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        block = head
        while True:
            text = "\n".join(block) + "\n"
            fh.write(text)
            written += len(text.encode())
            n_lines += len(block)
            if written >= target_bytes and not pending:
                break
            if written >= target_bytes:
                ev, pending, cut = pending, [], math.inf
            elif kind == "vllm":
                ev, cut = pending + vllm_block(rng, t0, clock, counts), t0 + BLOCK_S
            else:
                ev, cut = pending + sglang_block(rng, t0, clock, counts, kind == "sglang_hybrid"), t0 + BLOCK_S
            ev.sort(key=lambda e: e[0])
            pending = [e for e in ev if e[0] >= cut]
            block = [line for t, line in ev if t < cut]
            t0 += BLOCK_S
    counts["lines"] = n_lines
    counts["bytes"] = written
    return counts


def generate(out_dir: str | Path, total_mb: float, seed: int = 0) -> dict:
    """Write the three logs into `out_dir` (about `total_mb` MB in all; a file ends at the first block
    boundary past its share) and `manifest.json`; reuse them when a manifest with the same parameters exists."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mf = out / "manifest.json"
    params = {"total_mb": total_mb, "seed": seed, "version": 1}
    if mf.exists():
        manifest = json.loads(mf.read_text())
        if manifest.get("params") == params and all((out / f).exists() for f in manifest["files"]):
            return manifest
    files = {}
    for i, (name, (kind, share)) in enumerate(FILES.items()):
        files[name] = {"kind": kind, **write_file(out / name, kind, int(total_mb * 1e6 * share), seed * 10 + i)}
    manifest = {"params": params, "files": files}
    mf.write_text(json.dumps(manifest, indent=1))
    return manifest


if __name__ == "__main__":
    import argparse
    import time

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--mb", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t = time.perf_counter()
    print(json.dumps(generate(a.out_dir, a.mb, a.seed), indent=1))
    print(f"generated in {time.perf_counter() - t:.1f} s")
