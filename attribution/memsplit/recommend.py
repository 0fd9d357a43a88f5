"""The split a start's own traffic asks for: pools sized for a high percentile of the requests that wanted to
run at once (C*) and of their live KV tokens (T*), with headroom; the engine flags that enact it; and a
feasibility check against the cache memory R (formats/memory-and-thresholds.md A0, A1.2, A2).

SGLang's split is static: `--max-mamba-cache-size` (or the equivalent `--mamba-full-memory-ratio`) and
`--max-running-requests`. vLLM shares one block pool, so there is no split to set: the numbers say what
`--max-num-seqs` the pool can hold and what the raised attention block size costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from attribution.db import as_float
from attribution.errors import AttributionError
from attribution.memory import pools_needed, sglang_split
from attribution.memory.profile import GiB
from attribution.memsplit.current import CurrentSplit
from attribution.memsplit.diagnosis import Settings

STATUS = {
    "fits": "the current split already holds the demand: no change needed",
    "resize": "a different split of the same memory holds the demand",
    "short": "no split of this memory holds the demand: the best split of it is given, and the shortfall",
    "unknown": "no step lines with running counts and KV usage: the demand is unknown",
}


@dataclass(frozen=True)
class Flag:
    flag: str
    value: str
    meaning: str


@dataclass
class Recommendation:
    start_id: int
    deployment: str
    engine: str
    status: str
    concurrency: int | None = None  # C*
    live_tokens: int | None = None  # T*
    mean_live_tokens: float | None = None  # per running request, block rounding included for vLLM
    need_state_bytes: int | None = None
    need_kv_bytes: int | None = None
    cache_bytes: int | None = None
    state_slots: int | None = None
    state_bytes: int | None = None
    kv_tokens: int | None = None
    kv_bytes: int | None = None
    max_running: int | None = None
    ratio: float | None = None  # state:KV bytes of the recommended split
    balanced_ratio: float | None = None  # M_s / M_kv of the demand
    flags: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def need_bytes(self) -> int | None:
        if self.need_state_bytes is None or self.need_kv_bytes is None:
            return None
        return self.need_state_bytes + self.need_kv_bytes

    @property
    def shortfall_bytes(self) -> int:
        return max(0, (self.need_bytes or 0) - (self.cache_bytes or 0))

    def row(self) -> dict[str, Any]:
        return {
            "start_id": self.start_id, "deployment": self.deployment, "engine": self.engine,
            "status": self.status,
            "concurrency": self.concurrency, "live_tokens": self.live_tokens,
            "mean_live_tokens": self.mean_live_tokens, "need_state_bytes": self.need_state_bytes,
            "need_kv_bytes": self.need_kv_bytes, "need_bytes": self.need_bytes,
            "cache_bytes": self.cache_bytes,
            "feasible": None if self.need_bytes is None else self.shortfall_bytes == 0,
            "shortfall_bytes": self.shortfall_bytes, "state_slots": self.state_slots,
            "state_bytes": self.state_bytes, "kv_tokens": self.kv_tokens, "kv_bytes": self.kv_bytes,
            "max_running": self.max_running, "ratio": self.ratio, "balanced_ratio": self.balanced_ratio,
        }  # fmt: skip


def demand_concurrency(d: dict[str, Any], s: Settings) -> float | None:
    """The percentile of requests wanting to run (running + waiting), from the step lines; else the exact
    sweep's in-system p99 when that is the percentile asked for."""
    if d.get("demand_q") is not None:
        return as_float(d["demand_q"])
    if s.percentile == 0.99 and d.get("in_system_p99_exact") is not None:
        return as_float(d["in_system_p99_exact"])
    return None


def recommend(c: CurrentSplit, d: dict[str, Any], s: Settings) -> Recommendation:
    """Size the pools for `d` (a memsplit_demand row, with in_system_p99_exact) on the memory of `c`."""
    rec = Recommendation(c.start_id, c.deployment, c.engine, "unknown", cache_bytes=c.cache_bytes)
    dem = demand_concurrency(d, s)
    live = d.get("mean_live_tokens")
    if dem is None or not live:
        rec.notes.append(f"{c.deployment}: {STATUS['unknown']}")
        return rec
    k, S, B, R, pad = (
        c.slots_per_request,
        c.state_bytes_per_slot,
        c.kv_bytes_per_token,
        c.cache_bytes,
        c.padding_slots,
    )
    # vLLM allocates attention KV in whole (raised) blocks: on average half a block more per request.
    L = live + (c.block_size / 2 if c.engine == "vllm" and c.block_size else 0)
    grow = 1 + s.headroom
    C = max(1, math.ceil(dem * grow - 1e-9))
    floor_tokens = (d.get("longest_request") or 0) + 1
    if c.engine == "vllm" and c.max_model_len:
        floor_tokens = max(
            floor_tokens, c.max_model_len
        )  # vLLM refuses to start if one such request does not fit
    T = max(math.ceil(C * L), math.ceil((d.get("demand_tokens_q") or 0) * grow), floor_tokens)
    need = pools_needed(C, T, state_per_slot=S, kv_per_token=B, slots_per_request=k)
    rec.concurrency, rec.live_tokens, rec.mean_live_tokens = C, T, L
    rec.need_state_bytes, rec.need_kv_bytes = need.state_bytes + pad * S, need.kv_bytes
    rec.balanced_ratio = need.ratio
    if (
        c.cap is not None
        and c.cap >= C
        and (
            # vLLM reserves nothing per slot: the shared pool must hold the demand; SGLang's pools each must
            need.total_bytes <= R if c.engine == "vllm" else c.state_cap >= C and c.kv_pool_tokens >= T
        )
    ):
        rec.status = "fits"
        _set_split(rec, c, c.state_slots, c.cap)
    elif need.total_bytes + pad * S <= R:
        rec.status = "resize"
        _set_split(rec, c, k * C, C)
    else:
        rec.status = "short"
        fit = min(
            math.floor((R - pad * S) / (k * S + B * L)),
            math.floor((R - pad * S - floor_tokens * B) / (k * S)),
        )
        if fit < 1:
            rec.notes.append(
                f"{c.deployment}: {R / GiB:.2f} GiB cannot hold one request of {floor_tokens:,} tokens "
                "beside its state"
            )
            return rec
        _set_split(rec, c, k * fit, fit)
    rec.flags = sglang_flags(c, rec) if c.engine == "sglang" else vllm_flags(c, rec, d)
    return rec


def _set_split(rec: Recommendation, c: CurrentSplit, slots: int, running: int) -> None:
    rec.state_slots, rec.max_running = slots, running
    rec.state_bytes = (slots + c.padding_slots) * c.state_bytes_per_slot
    if rec.status == "fits":
        rec.state_bytes, rec.kv_tokens, rec.kv_bytes = c.state_pool_bytes, c.kv_pool_tokens, c.kv_pool_bytes
    else:
        rec.kv_tokens = (c.cache_bytes - rec.state_bytes) // c.kv_bytes_per_token
        rec.kv_bytes = rec.kv_tokens * c.kv_bytes_per_token
    rec.ratio = rec.state_bytes / rec.kv_bytes if rec.kv_bytes else math.inf


def ratio_flag(c: CurrentSplit, slots: int) -> tuple[float, int]:
    """The smallest --mamba-full-memory-ratio (2 decimals) with which SGLang 0.5.9 carves at least `slots`
    state slots out of R, and the slots it then carves (A1.2 `handle_max_mamba_cache`)."""
    S = c.state_bytes_per_slot
    r = math.ceil(slots * S / max(1, c.cache_bytes - slots * S) * 100) / 100
    while True:
        got = sglang_split(
            c.cache_bytes,
            r,
            state_per_slot=S,
            kv_per_token=c.kv_bytes_per_token,
            slots_per_request=c.slots_per_request,
        ).state_slots
        if got >= slots:
            return r, got
        r = round(r + 0.01, 2)


@dataclass(frozen=True)
class Sized:
    """The pool sizes `recommend` set (`_set_split`) before it asks for the flags that enact them."""

    state_slots: int
    max_running: int
    mean_live_tokens: float
    kv_tokens: int


def sized(rec: Recommendation) -> Sized:
    slots, running, live, kv = rec.state_slots, rec.max_running, rec.mean_live_tokens, rec.kv_tokens
    if slots is None or running is None or live is None or kv is None:
        raise AttributionError(f"{rec.deployment}: the flags need a sized split, this one is {rec.status!r}")
    return Sized(slots, running, live, kv)


def sglang_flags(c: CurrentSplit, rec: Recommendation) -> list[Flag]:
    k = c.slots_per_request
    z = sized(rec)
    if rec.status == "fits":
        return [
            Flag(
                "--max-mamba-cache-size",
                str(c.state_slots),
                f"unchanged: room for {c.state_cap} running "
                f"requests ({k} slots each); demand {rec.concurrency}",
            )
        ]
    r, got = ratio_flag(c, z.state_slots)
    out = [
        Flag(
            "--max-mamba-cache-size",
            str(z.state_slots),
            f"{z.state_slots} state slots = {z.max_running} running requests x {k}; the KV pool gets the "
            f"rest: "
            f"{z.kv_tokens:,} tokens",
        ),
        Flag(
            "--mamba-full-memory-ratio",
            f"{r:.2f}",
            f"the same split as a ratio (state:KV bytes; gives {got} slots); set this or "
            f"--max-mamba-cache-size",
        ),
        Flag(
            "--max-running-requests",
            str(z.max_running),
            f"admit at most {z.max_running} requests (now {c.cap})",
        ),
    ]
    if rec.status == "short":
        out += _shortfall_flags(c, rec)
    return out


def vllm_flags(c: CurrentSplit, rec: Recommendation, d: dict[str, Any]) -> list[Flag]:
    z = sized(rec)
    k, S, B, L = c.slots_per_request, c.state_bytes_per_slot, c.kv_bytes_per_token, z.mean_live_tokens
    per_req = k * S + B * L
    out = [
        Flag(
            "--max-num-seqs",
            str(z.max_running),
            f"vLLM shares one block pool: a running request holds {k} block(s) per state group "
            f"({k * S / 1e6:,.1f} MB) "
            f"plus ~{L:,.0f} tokens of attention blocks ({B * L / 1e6:,.1f} MB); {z.max_running} of them "
            f"take "
            f"{z.max_running * per_req / GiB:.2f} GiB of {c.cache_bytes / GiB:.2f} GiB (now {c.cap})",
        )
    ]
    if c.block_size:
        out.append(
            Flag(
                "--block-size",
                "unchanged",
                f"vLLM raises the attention block to {c.block_size:,} tokens so a page holds one state "
                f"layer's slot: "
                f"KV is allocated in {c.block_size:,}-token blocks (~{c.block_size // 2:,} tokens per "
                f"request wasted, "
                f"counted above) and prefix-cache hits count only whole blocks; --block-size only sets the "
                f"alignment",
            )
        )
    hit = d.get("prefix_hit_rate_mean")
    if c.prefix_caching and k > 1 and hit is not None and hit < 0.01:
        more = math.floor(c.cache_bytes / (S + B * L))  # one block per state group
        out.append(
            Flag(
                "--no-enable-prefix-caching",
                "",
                f"prefix caching hit {hit:.1%} of prompt tokens yet keeps {k} state blocks per request per "
                f"group; "
                f"without it 1 block: the same memory would hold ~{more} requests",
            )
        )
    if rec.status == "short":
        out += _shortfall_flags(c, rec)
    return out


def _shortfall_flags(c: CurrentSplit, rec: Recommendation) -> list[Flag]:
    gib = rec.shortfall_bytes / GiB
    knob = "--mem-fraction-static" if c.engine == "sglang" else "--gpu-memory-utilization"
    out = [
        Flag(
            knob,
            "raise",
            f"the demand needs {gib:.2f} GiB more cache memory per GPU than the "
            f"{c.cache_bytes / GiB:.2f} GiB the engine had; else add pods",
        )
    ]
    p = c.profile
    if p.ssm_dtype == "float32" and p.ssm_bytes_per_slot:
        opt = "--mamba-ssm-dtype" if c.engine == "sglang" else "--mamba-ssm-cache-dtype"
        out.append(
            Flag(
                opt,
                "bfloat16",
                f"halves the SSM state ({p.ssm_bytes_per_slot / 1e6:,.1f} MB of "
                f"{p.state_bytes_per_slot / 1e6:,.1f} MB per slot); check accuracy first",
            )
        )
    return out
