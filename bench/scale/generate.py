"""A week of real-format logs at fleet scale, written line by line in bulk (no engine simulation): vLLM 0.20
V1 pods, SGLang 0.5.9 pods and SGLang 0.5.12+ hybrid pods behind one LiteLLM gateway, with `manifest.json`.

Every request has its engine lines (vLLM `Received`/`Added`/access; SGLang `Receive`/`Finish`/access) and
one LiteLLM StandardLoggingPayload line whose `id` is the engine's response id (the simulator's LiteLLM
writer renders it, so the gateway format has one definition). Engine files rotate daily per pod
(`<pod>/<pod>.log-YYYYMMDD`), the gateway every 6 hours (`gateway/litellm.jsonl-YYYYMMDD-HH`). Lines are
built as Polars string columns per 6-hour block of every file, so the week is written at disk speed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl

from attribution.simulate.writers.litellm import write_litellm
from bench.ingest.generate import _OBJ, _SAMPLING, sglang_startup, vllm_startup

WEEK = datetime(2026, 5, 18, tzinfo=UTC)  # a Monday
DAY_S, BLOCK_S, MAX_E2E_S = 86400, 6 * 3600, 900.0  # a request's lines span less than a block
# pod -> (kind, share of requests)
PODS = {"vllm-a": ("vllm", 0.18), "vllm-b": ("vllm", 0.18), "vllm-c": ("vllm", 0.14),
        "sglang-a": ("sglang", 0.15), "sglang-b": ("sglang", 0.15), "sglang-next-a": ("sglang_hybrid", 0.2)}
MODEL = {"vllm": "qwen3-8b", "sglang": "qwen3-8b", "sglang_hybrid": "qwen3-next"}
# key alias -> (team, share, prompt lognormal mu, output lognormal mu, cached share)
WORKLOADS = {"chat-app": ("product", 0.55, 6.5, 5.5, 0.5), "rag-search": ("search", 0.3, 8.3, 4.8, 0.7),
             "batch-eval": ("research", 0.15, 7.2, 6.6, 0.1)}
POOL = 473854  # SGLang token pool of the startup block


def _diurnal(minutes: np.ndarray) -> np.ndarray:
    """Relative arrival rate per minute of the week: a daily peak at 15:00 UTC, quieter weekends."""
    h = (minutes % 1440) / 60
    day = minutes // 1440
    return (1.0 + 0.8 * np.cos((h - 15) / 24 * 2 * np.pi)) * np.where(day >= 5, 0.6, 1.0)


def requests(n: int, seed: int, days: int = 7) -> pl.DataFrame:
    """`n` requests over `days` from WEEK, sorted by arrival: pod, workload, lengths, latencies (seconds from WEEK)."""
    rng = np.random.default_rng(seed)
    w = _diurnal(np.arange(days * 1440))
    t = np.sort(rng.choice(days * 1440, n, p=w / w.sum()) * 60.0 + rng.uniform(0, 60, n))
    pods = np.array(list(PODS))
    pod = rng.choice(len(pods), n, p=[s for _, s in PODS.values()])
    wl = rng.choice(len(WORKLOADS), n, p=[v[1] for v in WORKLOADS.values()])
    spec = np.array([v[2:] for v in WORKLOADS.values()])[wl]
    prompt = np.clip(rng.lognormal(spec[:, 0], 0.8), 16, 30000).astype(np.int64)
    output = np.clip(rng.lognormal(spec[:, 1], 0.7), 1, 8000).astype(np.int64)
    cached = (prompt * spec[:, 2] * rng.random(n)).astype(np.int64) // 16 * 16
    ttft = rng.gamma(2.0, 0.08, n) + (prompt - cached) / 12000
    e2e = np.minimum(ttft + output * rng.uniform(0.012, 0.035, n), MAX_E2E_S - 1)
    ids = rng.integers(0, 2**63, (n, 2), dtype=np.int64)
    kinds = np.array([k for k, _ in PODS.values()])[pod]
    hexes = _hex32(ids)
    rid = pl.Series(np.where(kinds == "vllm", "chatcmpl-", "")) + pl.Series(
        np.where(kinds == "vllm", hexes.str.slice(0, 16).to_numpy(), hexes.to_numpy()))
    return pl.DataFrame({
        "request_id": rid, "ta": t, "tf": t + e2e, "ttft": ttft, "e2e": e2e, "deployment": pods[pod],
        "kind": kinds, "key_alias": np.array(list(WORKLOADS))[wl], "prompt_tokens": prompt,
        "output_tokens": output, "cached_tokens": cached, "max_tokens": np.where(rng.random(n) < 0.4, 4096,
                                                                                32768 - prompt),
        "stream": rng.random(n) < 0.8, "length": rng.random(n) < 0.15,
    })


def _hex32(ids: np.ndarray) -> pl.Series:
    """32 lowercase hex digits per row of two int64s, without a Python loop."""
    b = np.ascontiguousarray(ids.astype(">i8")).view(np.uint8).reshape(-1, 16)
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    chars = np.stack([digits[b >> 4], digits[b & 15]], axis=2).reshape(-1, 32)
    return pl.Series(np.ascontiguousarray(chars).view("S32").ravel()).cast(pl.Utf8)


def _stamp(t: pl.Expr, fmt: str) -> pl.Expr:
    us = int(WEEK.timestamp() * 1e6)
    return (pl.lit(us) + (t * 1e6).cast(pl.Int64)).cast(pl.Datetime("us", "UTC")).dt.strftime(fmt)


def _num(e: pl.Expr, d: int) -> pl.Expr:
    return e.round(d).cast(pl.Utf8)


def vllm_lines(req: pl.DataFrame, lo: float, hi: float, hi_end: float) -> pl.DataFrame:
    a = "(APIServer pid=1) INFO "
    head = pl.concat_str(pl.lit(a), _stamp(pl.col("ta"), "%m-%d %H:%M:%S"))
    params = pl.concat_str(pl.lit(_SAMPLING.split("temperature=")[0].format(pp="0.0") + "temperature=0.7, top_p="
                                  "0.95, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
                                  "include_stop_str_in_output=False, ignore_eos=False, max_tokens="),
                           pl.col("max_tokens").cast(pl.Utf8), pl.lit(_SAMPLING.split("{mt}")[1]))
    got = req.filter(pl.col("ta").is_between(lo, hi, closed="left"))
    end = req.filter(pl.col("tf") >= lo, pl.col("tf") < hi_end)
    port = (32768 + pl.col("request_id").hash(5) % 28000).cast(pl.Utf8)
    return pl.concat([
        got.select(pl.col("ta").alias("t"), pl.concat_str(
            head, pl.lit(" [logger.py:49] Received request "), "request_id", pl.lit(": params: "), params,
            pl.lit(", lora_request: None.")).alias("text")),
        got.select((pl.col("ta") + 1e-4).alias("t"), pl.concat_str(
            head, pl.lit(" [async_llm.py:382] Added request "), "request_id", pl.lit("-"),
            pl.col("request_id").str.slice(-8), pl.lit(".")).alias("text")),
        end.select("tf", pl.concat_str(pl.lit("(APIServer pid=1) INFO:     10.0.0.7:"), port,
                                       pl.lit(' - "POST /v1/chat/completions HTTP/1.1" 200 OK')).alias("text")
                   ).rename({"tf": "t"}),
    ])


def vllm_stats(req: pl.DataFrame, lo: float, hi: float) -> pl.DataFrame:
    """The 10 s stats line, its numbers from the requests themselves (arrivals x mean latency per bin)."""
    per = req.filter(pl.col("ta").is_between(lo, hi, closed="left")).group_by(
        ((pl.col("ta") // 10) * 10).alias("t")).agg(pl.len().alias("n"), pl.col("e2e").mean().alias("e2e"),
                                                      pl.col("prompt_tokens").sum().alias("p"),
                                                      pl.col("output_tokens").sum().alias("o"))
    s = per.sort("t").with_columns(  # logged only while there is throughput, as vLLM does
        (pl.col("n") * pl.col("e2e") / 10).round(0).cast(pl.Int64).alias("run"))
    return s.select("t", pl.concat_str(
        pl.lit("(APIServer pid=1) INFO "), _stamp(pl.col("t"), "%m-%d %H:%M:%S"),
        pl.lit(" [loggers.py:271] Engine 000: Avg prompt throughput: "), _num(pl.col("p") / 10, 1),
        pl.lit(" tokens/s, Avg generation throughput: "), _num(pl.col("o") / 10, 1),
        pl.lit(" tokens/s, Running: "), pl.col("run").cast(pl.Utf8), pl.lit(" reqs, Waiting: 0 reqs, GPU KV cache "
                                                                             "usage: "),
        _num((pl.col("run") / 2.56).clip(0, 100), 1), pl.lit("%, Prefix cache hit rate: 41.0%")).alias("text"))


def sglang_lines(req: pl.DataFrame, lo: float, hi: float, hi_end: float, hybrid: bool) -> pl.DataFrame:
    got = req.filter(pl.col("ta").is_between(lo, hi, closed="left"))
    end = req.filter(pl.col("tf") >= lo, pl.col("tf") < hi_end)
    pre, post = _OBJ.split("{rid}")
    post_a, post_b = post.split("{stream}")
    obj = pl.concat_str(pl.lit(pre), "request_id", pl.lit(post_a),
                        pl.when("stream").then(pl.lit("True")).otherwise(pl.lit("False")), pl.lit(post_b))
    reason = pl.when("length").then(pl.concat_str(pl.lit("{'type': 'length', 'length': "),
                                                  pl.col("output_tokens").cast(pl.Utf8), pl.lit("}"))
                                    ).otherwise(pl.lit("{'type': 'stop', 'matched': 151645}"))
    meta = pl.concat_str(
        pl.lit("'id': '"), "request_id", pl.lit("', 'finish_reason': "), reason, pl.lit(", 'prompt_tokens': "),
        pl.col("prompt_tokens").cast(pl.Utf8), pl.lit(", 'weight_version': 'default', 'total_retractions': 0, "
                                                      "'completion_tokens': "),
        pl.col("output_tokens").cast(pl.Utf8), pl.lit(", 'cached_tokens': "), pl.col("cached_tokens").cast(pl.Utf8),
        pl.lit(", 'e2e_latency': "), _num(pl.col("e2e"), 6),
        *([pl.lit(", 'queue_time': "), _num(pl.col("ttft") * 0.3, 6), pl.lit(", 'request_received_ts': "),
           _num(pl.col("ta") + WEEK.timestamp(), 6), pl.lit(", 'response_sent_to_client_ts': "),
           _num(pl.col("tf") + WEEK.timestamp(), 6)] if hybrid else []))
    stamp = "%Y-%m-%d %H:%M:%S"
    port = (32768 + pl.col("request_id").hash(5) % 28000).cast(pl.Utf8)
    return pl.concat([
        got.select(pl.col("ta").alias("t"), pl.concat_str(
            pl.lit("["), _stamp(pl.col("ta"), stamp), pl.lit("] Receive: obj="), obj).alias("text")),
        end.select(pl.col("tf").alias("t"), pl.concat_str(
            pl.lit("["), _stamp(pl.col("tf"), stamp), pl.lit("] Finish: obj="), obj,
            pl.lit(", out={'meta_info': {"), meta, pl.lit("}}")).alias("text")),
        end.select((pl.col("tf") + 1e-4).alias("t"), pl.concat_str(
            pl.lit("["), _stamp(pl.col("tf"), stamp), pl.lit("] INFO:     10.0.0.7:"), port,
            pl.lit(' - "POST /v1/chat/completions HTTP/1.1" 200 OK')).alias("text")),
    ])


def sglang_steps(req: pl.DataFrame, lo: float, hi: float, hybrid: bool) -> pl.DataFrame:
    """One `Prefill batch` line per 0.25 s window with arrivals; a `Decode batch` line per 2 s with arrivals."""
    tp = " TP0" if hybrid else ""
    stamp = "%Y-%m-%d %H:%M:%S"
    p = req.filter(pl.col("ta").is_between(lo, hi, closed="left")).group_by(
        ((pl.col("ta") // 0.25 + 1) * 0.25).alias("t")).agg(
        pl.len().alias("seq"), (pl.col("prompt_tokens") - pl.col("cached_tokens")).sum().alias("new"),
        pl.col("cached_tokens").sum().alias("hit"))
    usage = _num(((pl.col("new") + pl.col("hit")) / POOL * 20).clip(0, 0.95), 2)
    body = ([pl.lit(", full token usage: "), usage, pl.lit(", mamba usage: 0.12, #running-req: "),
             pl.col("seq").cast(pl.Utf8), pl.lit(", #queue-req: 0, #pending-token: 0, cuda graph: False, input "
                                                 "throughput (token/s): "), _num(pl.col("new") * 4.0, 2)]
            if hybrid else
            [pl.lit(", token usage: "), usage, pl.lit(", #running-req: "), pl.col("seq").cast(pl.Utf8),
             pl.lit(", #queue-req: 0, input throughput (token/s): "), _num(pl.col("new") * 4.0, 2),
             pl.lit(", cuda graph: False")])
    prefill = p.select("t", pl.concat_str(
        pl.lit("["), _stamp(pl.col("t"), stamp), pl.lit(tp + "] Prefill batch, #new-seq: "),
        pl.col("seq").cast(pl.Utf8), pl.lit(", #new-token: "), pl.col("new").cast(pl.Utf8),
        pl.lit(", #cached-token: "), pl.col("hit").cast(pl.Utf8), *body).alias("text"))
    d = p.select(((pl.col("t") // 2) * 2 + 0.5).unique().sort()).with_columns(  # while requests run
        ((pl.col("t") * 7919) % 61 + 1).cast(pl.Int64).alias("run"))
    tok = pl.col("run") * 3100
    dbody = ([pl.lit(", #full token: "), tok.cast(pl.Utf8), pl.lit(", full token usage: "), _num(tok / POOL, 2),
              pl.lit(", mamba num: "), (pl.col("run") * 3).cast(pl.Utf8), pl.lit(", mamba usage: 0.20, cuda graph: "
                                                                                  "True")]
             if hybrid else
             [pl.lit(", #token: "), tok.cast(pl.Utf8), pl.lit(", token usage: "), _num(tok / POOL, 2),
              pl.lit(", cuda graph: True")])
    decode = d.select("t", pl.concat_str(
        pl.lit("["), _stamp(pl.col("t"), stamp), pl.lit(tp + "] Decode batch, #running-req: "),
        pl.col("run").cast(pl.Utf8), *dbody, pl.lit(", gen throughput (token/s): "),
        _num(pl.col("run") * 52.5, 2), pl.lit(", #queue-req: 0")).alias("text"))
    return pl.concat([prefill, decode])


def _gateway(req: pl.DataFrame, path: Path) -> Path:
    """The block's gateway lines through the simulator's LiteLLM writer (datetimes, engine, team, cost)."""
    us = int(WEEK.timestamp() * 1e6)

    def ts(c: str) -> pl.Expr:
        return (pl.lit(us) + (pl.col(c) * 1e6).cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))
    team = {k: v[0] for k, v in WORKLOADS.items()}
    frame = req.with_columns(
        ts("ta").alias("arrival"), ts("tf").alias("finished"), (pl.col("ta") + pl.col("ttft")).alias("t1"),
        pl.when(pl.col("kind") == "vllm").then(pl.lit("vllm")).otherwise(pl.lit("sglang")).alias("engine"),
        pl.col("kind").replace_strict(MODEL).alias("model"), pl.col("key_alias").replace_strict(team).alias("team"),
        ((pl.col("prompt_tokens") - pl.col("cached_tokens")) * 1e-7 + pl.col("cached_tokens") * 2.5e-8
         + pl.col("output_tokens") * 4e-7).alias("response_cost"),
    ).with_columns(ts("t1").alias("first_token"))
    return write_litellm(SimpleNamespace(scenario=SimpleNamespace(start=WEEK), requests=frame), path)  # type: ignore[arg-type]


def _clock(fmt: str):
    return lambda s: (WEEK + timedelta(seconds=s - 80)).strftime(fmt)


def generate(out_dir: str | Path, n: int, seed: int = 0, days: int = 7) -> dict:
    """Write the week's logs for `n` requests into `out_dir/logs` and `out_dir/manifest.json`; reuse them when a manifest
    with the same parameters exists. The manifest counts each file's lines and bytes and what the ingest must
    find: engine and gateway request rows, engine step lines."""
    out = Path(out_dir)
    mf = out / "manifest.json"
    params = {"requests": n, "seed": seed, "days": days, "version": 1}
    if mf.exists():
        m = json.loads(mf.read_text())
        if m.get("params") == params and all((out / "logs" / f).exists() for f in m["files"]):
            return m
    out.mkdir(parents=True, exist_ok=True)
    req = requests(n, seed, days)
    files: dict[str, dict] = {}
    expect = {"engine_requests": n, "gateway_requests": n, "engine_steps": 0}
    week_end = days * DAY_S
    for lo in range(0, week_end, BLOCK_S):
        hi = lo + BLOCK_S
        hi_end = hi if hi < week_end else float("inf")  # the last block takes the week's late finishers
        window = req.filter(pl.col("ta") >= lo - MAX_E2E_S, pl.col("ta") < hi)
        day = (WEEK + timedelta(seconds=lo)).strftime("%Y%m%d")
        for pod, (kind, _) in PODS.items():
            mine = window.filter(pl.col("deployment") == pod)
            if kind == "vllm":
                steps = vllm_stats(mine, lo, hi)
                parts = [vllm_lines(mine, lo, hi, hi_end), steps]
                head = vllm_startup(_clock("%m-%d %H:%M:%S")) if lo == 0 else []
            else:
                hybrid = kind == "sglang_hybrid"
                steps = sglang_steps(mine, lo, hi, hybrid)
                parts = [sglang_lines(mine, lo, hi, hi_end, hybrid), steps]
                head = sglang_startup(_clock("%Y-%m-%d %H:%M:%S"), hybrid) if lo == 0 else []
            expect["engine_steps"] += steps.height
            lines = pl.concat(parts).sort("t", maintain_order=True)
            rel = f"{pod}/{pod}.log-{day}"
            path = out / "logs" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as fh:
                if head:
                    fh.write(("\n".join(head) + "\n").encode())
                lines.select("text").write_csv(fh, include_header=False, quote_style="never")
            f = files.setdefault(rel, {"kind": kind, "deployment": pod, "lines": 0, "requests": 0})
            f["lines"] += lines.height + len(head)
            f["requests"] += mine.filter(pl.col("ta") >= lo).height
        rel = f"gateway/litellm.jsonl-{day}-{lo % DAY_S // 3600:02d}"
        gw = req.filter(pl.col("tf") >= lo, pl.col("tf") < hi_end)
        _gateway(gw, out / "logs" / rel)
        files[rel] = {"kind": "litellm", "deployment": None, "lines": gw.height, "requests": gw.height}
    for rel, f in files.items():
        f["bytes"] = (out / "logs" / rel).stat().st_size
    total = sum(f["bytes"] for f in files.values())
    gw_bytes = sum(f["bytes"] for f in files.values() if f["kind"] == "litellm")
    manifest = {"params": params, "expect": expect, "bytes": total, "gateway_share": round(gw_bytes / total, 3),
                "files": files}
    mf.write_text(json.dumps(manifest, indent=1))
    return manifest


if __name__ == "__main__":
    import argparse
    import time

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--requests", type=int, default=6_000_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t = time.perf_counter()
    m = generate(a.out_dir, a.requests, a.seed)
    print(json.dumps({k: v for k, v in m.items() if k != "files"}, indent=1))
    print(f"{len(m['files'])} files, generated in {time.perf_counter() - t:.1f} s")
