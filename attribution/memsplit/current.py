"""The memory split each engine start is running with: cache memory R, the KV pool (tokens, bytes) and the
state pool (slots, bytes), the running cap, and the per-token / per-slot sizes of the model on that engine
(attribution.memory), read from `engine_config` (queries/int_memsplit_starts.sql).

SGLang prints both pools (`KV Cache is allocated`, `Mamba Cache is allocated`). vLLM V1 shares one block pool:
its `KV cache size` nets out the state blocks of `Maximum concurrency` requests of max_model_len tokens, so
the state pool here is what R leaves beside that KV pool (`state_source = implied`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from attribution.errors import UsageError
from attribution.memory import ModelProfile, hybrid_blocks, load_profile, state_slots_per_request
from attribution.memory.profile import GiB

# engine_config flag names of the cache dtypes, per engine: (KV, SSM state, conv state, model dtype)
DTYPE_FLAGS = {
    "sglang": ("kv_cache_dtype", "mamba_ssm_dtype", None, "dtype"),
    "vllm": ("kv_cache_dtype", "mamba_ssm_cache_dtype", "mamba_cache_dtype", "dtype"),
}
NONE_VALUES = {"", "none", "null"}


@dataclass(frozen=True)
class Overrides:
    """What the user says instead of the logs (--cache-gib, --kv-cache-dtype, ...); None = from the log."""

    cache_bytes: int | None = None
    tp: int | None = None
    kv_cache_dtype: str | None = None
    mamba_ssm_dtype: str | None = None
    slots_per_request: int | None = None


@dataclass
class CurrentSplit:
    """One engine start's pools. Byte counts are per GPU (per TP rank), as the engines print them."""

    start_id: int
    deployment: str
    engine: str
    version: str | None
    model: str | None
    started: datetime
    period_since: datetime
    period_until: datetime | None
    profile: ModelProfile
    tp: int
    kv_bytes_per_token: int  # B (vLLM: attention bytes per token of its padded block layout)
    state_bytes_per_slot: int  # S (vLLM: one block per state group, page padding included)
    slots_per_request: int  # k
    slots_source: str  # given | flags
    cache_bytes: int  # R
    cache_source: str  # given | log | estimate
    kv_pool_tokens: int
    kv_pool_bytes: int
    state_slots: int
    state_pool_bytes: int
    state_source: str  # log | implied | estimate
    kv_pool_source: str  # logged (the KV pool's tokens as the engine printed them) | reconstructed
    state_pool_source: str  # logged (the state pool's slots as printed) | reconstructed (from bytes or R)
    cap: int | None  # running requests admitted at most
    cap_source: str | None  # configured | observed
    max_model_len: int | None
    block_size: int | None  # vLLM attention block (tokens)
    max_batched_tokens: int | None
    prefix_caching: bool
    step_lines: int
    flags: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def state_cap(self) -> int:
        """Running requests the state pool admits: slots // k."""
        return self.state_slots // self.slots_per_request

    @property
    def ratio(self) -> float:
        """State bytes : KV bytes (SGLang's --mamba-full-memory-ratio)."""
        return self.state_pool_bytes / self.kv_pool_bytes if self.kv_pool_bytes else math.inf

    @property
    def padding_slots(self) -> int:
        """SGLang allocates one padding slot beside the state slots (A4); vLLM has none."""
        return 1 if self.engine == "sglang" else 0

    @property
    def pool_sizes(self) -> str:
        """Whether the pool sizes are the ones the log printed: `logged`, `reconstructed`, or which of the two."""
        if self.kv_pool_source == self.state_pool_source:
            return self.kv_pool_source
        return f"KV {self.kv_pool_source}, state {self.state_pool_source}"

    def kv_cap(self, mean_live_tokens: float | None) -> float | None:
        """Running requests the KV pool holds at `mean_live_tokens` each."""
        return self.kv_pool_tokens / mean_live_tokens if mean_live_tokens else None

    def row(self) -> dict[str, Any]:
        return {
            "start_id": self.start_id, "deployment": self.deployment, "engine": self.engine,
            "version": self.version, "model": self.model, "started": self.started, "until": self.period_until,
            "profile": self.profile.name, "tp": self.tp, "cache_bytes": self.cache_bytes,
            "cache_gib": self.cache_bytes / GiB, "cache_source": self.cache_source,
            "kv_bytes_per_token": self.kv_bytes_per_token, "state_bytes_per_slot": self.state_bytes_per_slot,
            "slots_per_request": self.slots_per_request, "kv_pool_tokens": self.kv_pool_tokens,
            "kv_pool_bytes": self.kv_pool_bytes, "state_slots": self.state_slots,
            "state_pool_bytes": self.state_pool_bytes, "state_source": self.state_source,
            "kv_pool_source": self.kv_pool_source, "state_pool_source": self.state_pool_source,
            "pool_sizes": self.pool_sizes, "ratio": self.ratio,
            "cap": self.cap, "cap_source": self.cap_source, "state_cap": self.state_cap,
            "max_model_len": self.max_model_len, "block_size": self.block_size,
            "prefix_caching": self.prefix_caching,
        }  # fmt: skip


def flag_map(flags: Any) -> dict[str, str]:
    """engine_config.flags (a DuckDB MAP, which arrives as a list of key/value structs) as a dict."""
    if not flags:
        return {}
    if isinstance(flags, dict):
        return {str(k): str(v) for k, v in flags.items() if v is not None}
    return {str(e["key"]): str(e["value"]) for e in flags if e.get("value") is not None}


def _flag(flags: dict[str, str], name: str | None) -> str | None:
    v = flags.get(name) if name else None
    return None if v is None or v.strip().strip("'\"").lower() in NONE_VALUES else v.strip().strip("'\"")


def _bool(flags: dict[str, str], name: str) -> bool | None:
    v = _flag(flags, name)
    return None if v is None else v.lower() in ("true", "1", "yes")


def _slots(
    engine: str, profile: ModelProfile, flags: dict[str, str], version: str | None, notes: list[str]
) -> tuple[int, bool]:
    """k from the flags (A1.3; vLLM A2) and whether prefix caching (radix cache) keeps states."""
    if engine == "vllm":
        caching = _bool(flags, "enable_prefix_caching")
        if caching is None:
            caching = True
            notes.append(
                "enable_prefix_caching not in the logged flags: assumed on (vLLM V1's default), "
                "so 2 state blocks per request per state group"
            )
        if _flag(flags, "speculative_config"):
            notes.append(
                "speculative decoding adds state blocks per request that k does not count: "
                "pass --slots-per-request"
            )
        return state_slots_per_request("vllm", caching), caching
    radix = not _bool(flags, "disable_radix_cache") and profile.sglang_radix not in ("disabled", "n/a")
    strategy = _flag(flags, "mamba_scheduler_strategy") or _flag(flags, "mamba_radix_cache_strategy") or ""
    spec = _flag(flags, "speculative_algorithm") is not None
    k = state_slots_per_request(
        "sglang",
        radix,
        spec,
        strategy.startswith("extra_buffer"),
        sglang_version=version or "0.5.9",
        lazy=strategy == "extra_buffer_lazy",
    )
    return k, radix


def _sizes(profile: ModelProfile, engine: str, block_flag: int | None) -> tuple[int, int, int | None]:
    """(B, S, attention block): vLLM's padded page layout (A2, aligned to --block-size, default 16), SGLang's
    plain sums (A3)."""
    if not profile.state_kind or not profile.n_full_attention:
        raise UsageError(
            f"{profile.name} is not an attention + recurrent-state hybrid: there is no split to make"
        )
    if engine != "vllm":
        return profile.kv_bytes_per_token, profile.state_bytes_per_slot, None
    blocks = hybrid_blocks(profile, block_size=block_flag or 16)
    per_token = blocks.page_bytes // blocks.attn_block_size * blocks.group_size * blocks.attention_groups
    return per_token, blocks.state_bytes_per_request, blocks.attn_block_size


def build_profile(model: str, engine: str, tp: int, flags: dict[str, str], ov: Overrides) -> ModelProfile:
    """The model's profile on `engine` with the cache dtypes the start ran with (flags), CLI values first."""
    kv_f, ssm_f, conv_f, dtype_f = DTYPE_FLAGS[engine]
    kw = {
        "kv_cache_dtype": ov.kv_cache_dtype or _flag(flags, kv_f),
        "mamba_ssm_dtype": ov.mamba_ssm_dtype or _flag(flags, ssm_f),
        "mamba_conv_dtype": _flag(flags, conv_f),
        "dtype": _flag(flags, dtype_f),
    }
    return load_profile(model, engine=engine, tp=tp, **{k: v for k, v in kw.items() if v is not None})


def current_split(row: dict[str, Any], model: str, ov: Overrides) -> CurrentSplit:
    """A `CurrentSplit` from one int_memsplit_starts row, the model (preset or config.json path) and overrides."""
    engine = row["engine"]
    if engine not in DTYPE_FLAGS:
        raise UsageError(f"{row['deployment']}: engine {engine!r} is not sglang or vllm")
    flags = flag_map(row.get("flags"))
    notes: list[str] = []
    tp = ov.tp or row.get("tp_size") or int(_flag(flags, "tensor_parallel_size") or 1)
    profile = build_profile(model, engine, tp, flags, ov)
    B, S, block = _sizes(profile, engine, _int(_flag(flags, "block_size")))
    if (
        engine == "vllm"
        and row.get("block_size")
        and row["block_size"] not in (block, _int(_flag(flags, "block_size")))
    ):
        notes.append(
            f"the log sets the attention block to {row['block_size']} tokens, the profile gives {block}: "
            "check --kv-cache-dtype and --mamba-ssm-dtype"
        )
    k, caching = _slots(engine, profile, flags, row.get("version"), notes)
    slots_source = "flags"
    if ov.slots_per_request:
        k, slots_source = ov.slots_per_request, "given"
    # The logged pool sizes come first (SGLang's `KV Cache is allocated` / `Mamba Cache is allocated` and
    # summary lines, vLLM's `GPU KV cache size`); other numbers rebuild a size only where the log has none.
    T = row.get("kv_pool_tokens")
    kv_pool_source = "logged" if T is not None else "reconstructed"
    state_pool_source = "logged" if row.get("state_pool_slots") is not None else "reconstructed"
    cap = row.get("cap")
    pad = 1 if engine == "sglang" else 0
    kv_bytes = row.get("kv_pool_bytes") or (T * B if T else None)
    state_bytes, state_slots = row.get("state_pool_bytes"), row.get("state_pool_slots")
    if ov.cache_bytes:
        R, cache_source = ov.cache_bytes, "given"
    elif engine == "sglang" and kv_bytes and state_bytes:
        R, cache_source = kv_bytes + state_bytes, "log"
    elif engine == "vllm" and row.get("available_kv_bytes"):
        R, cache_source = row["available_kv_bytes"], "log"
    elif engine == "sglang" and T and (state_slots or cap):
        slots = state_slots if state_slots is not None else (cap or 0) * k  # cap is set when no slots are logged
        R, cache_source = T * B + (slots + pad) * S, "estimate"
        notes.append("cache memory estimated from the KV pool and state slots (no allocation lines logged)")
    elif engine == "vllm" and T and row.get("max_concurrency"):
        R, cache_source = int(T * B + row["max_concurrency"] * k * S), "estimate"
        notes.append(
            "vLLM did not log `Available KV cache memory`: cache memory estimated as KV cache size x B "
            "+ maximum concurrency x k x S; pass --cache-gib for the real figure"
        )
    else:
        raise UsageError(
            f"{row['deployment']} ({row['started']}): the log gives no pool sizes; pass --cache-gib "
            "and make sure the engine's startup lines were ingested"
        )
    if T is None:  # vLLM without a KV cache size line: the pool the cap leaves
        T = max(0, (R - (cap or 0) * k * S) // B)
        kv_bytes = T * B
        notes.append(
            "no KV pool size logged: the KV pool is what the cache memory leaves beside the cap's state"
        )
    elif kv_bytes is None:  # a logged pool of 0 tokens
        kv_bytes = 0
    if engine == "sglang" and state_slots is not None:
        if state_bytes:
            state_source = "log"
        else:
            state_bytes, state_source = (state_slots + pad) * S, "estimate"
    else:
        state_bytes = max(0, R - kv_bytes)
        state_slots, state_source = int(state_bytes // S), "implied"
    _check(notes, engine, profile, R, T, B, S, row, cache_source)
    return CurrentSplit(
        start_id=row["start_id"], deployment=row["deployment"], engine=engine, version=row.get("version"),
        model=row.get("model"), started=row["started"], period_since=row["period_since"],
        period_until=row.get("period_until"), profile=profile, tp=tp, kv_bytes_per_token=B,
        state_bytes_per_slot=S, slots_per_request=k, slots_source=slots_source, cache_bytes=int(R),
        cache_source=cache_source, kv_pool_tokens=int(T), kv_pool_bytes=int(kv_bytes),
        state_slots=int(state_slots), state_pool_bytes=int(state_bytes), state_source=state_source,
        kv_pool_source=kv_pool_source, state_pool_source=state_pool_source, cap=cap,
        cap_source=row.get("cap_source"),
        max_model_len=row.get("max_model_len"), block_size=block,
        max_batched_tokens=row.get("chunked_prefill_size") or _int(_flag(flags, "max_num_batched_tokens")),
        prefix_caching=caching, step_lines=row.get("step_lines") or 0, flags=flags, notes=notes,
    )  # fmt: skip


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _check(
    notes: list[str],
    engine: str,
    profile: ModelProfile,
    R: float,
    T: int,
    B: int,
    S: int,
    row: dict[str, Any],
    cache_source: str,
) -> None:
    """Say where the log disagrees with the model profile (a wrong dtype or TP size shows up here)."""
    if engine == "sglang" and row.get("kv_pool_bytes") and T:
        logged = row["kv_pool_bytes"] / T
        if abs(logged / B - 1) > 0.03:
            notes.append(
                f"the log's KV pool is {logged:,.0f} B/token but the profile says {B:,} B "
                f"({profile.kv_dtype}): check --kv-cache-dtype and --tp"
            )
    if engine == "sglang" and row.get("state_pool_bytes") and row.get("state_pool_slots") is not None:
        logged = row["state_pool_bytes"] / (row["state_pool_slots"] + 1)
        if abs(logged / S - 1) > 0.03:
            notes.append(
                f"the log's state pool is {logged / 1e6:,.1f} MB/slot but the profile says {S / 1e6:,.1f} "
                f"MB ({profile.conv_dtype} conv, {profile.ssm_dtype} SSM): check --mamba-ssm-dtype"
            )
    if engine == "vllm" and cache_source != "estimate" and T * B > R:
        notes.append(
            f"the logged KV cache size ({T:,} tokens x {B:,} B = {T * B / GiB:.2f} GiB) exceeds the cache "
            f"memory ({R / GiB:.2f} GiB): the KV cache is probably smaller per token than "
            f"{profile.kv_dtype} (an fp8 KV cache? pass --kv-cache-dtype fp8)"
        )


def when(t: Any) -> str:
    """A start's time for a note; a start whose time did not read has none."""
    return f"{t:%Y-%m-%d %H:%M}" if t is not None else "time unknown"
