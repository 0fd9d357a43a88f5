"""Pool arithmetic for hybrid models, as pure functions of byte counts: state slots reserved per running
request, SGLang's static split of cache memory R into a state pool and a KV pool (and its inverse), the
default `max_running_requests`, and sizes backed out of startup log lines.
Section numbers refer to formats/memory-and-thresholds.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from attribution.errors import UsageError


def _version(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in v.split(".")[:3])
    except ValueError:
        raise UsageError(f"engine version {v!r} is not of the form 0.5.9") from None


def state_slots_per_request(
    engine: str,
    radix_cache: bool = True,
    spec_decode: bool = False,
    extra_buffer: bool = False,
    *,
    sglang_version: str = "0.5.9",
    overlap: bool | None = None,
    lazy: bool = False,
    skip_decode_lock: bool = False,
    num_speculative_blocks: int = 0,
    prefill_checkpoint_blocks: int = 0,
) -> int:
    """State slots (SGLang) or mamba blocks per mamba group (vLLM) one running request holds: `k`.

    SGLang (A1.2 `ratio`, A1.3): 1 with `--disable-radix-cache`; 3 with radix + no_buffer; extra_buffer
    adds 2 with the overlap scheduler, 1 without it. 0.5.9 turns overlap off under spec decoding, so
    `overlap=None` means "not spec_decode"; 0.5.23 also adds 1 in `lazy` mode
    (extra_buffer_lazy) and, under env SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK, starts from 2 (+1 for no_buffer).
    vLLM (A2 `MambaSpec.max_memory_usage_bytes`): `radix_cache` means --enable-prefix-caching ("align"
    mode): 2 + spec blocks + prefill checkpoints; without it 1 + spec blocks (`num_speculative_blocks`).
    """
    if engine == "vllm":
        if extra_buffer:
            raise UsageError("extra_buffer is an SGLang mamba radix-cache mode; vLLM has no such mode")
        if spec_decode and num_speculative_blocks < 1:
            raise UsageError(
                "vLLM spec decoding needs num_speculative_blocks >= 1 (= num_speculative_tokens)"
            )
        if radix_cache:
            return 2 + num_speculative_blocks + prefill_checkpoint_blocks
        return 1 + num_speculative_blocks
    if engine != "sglang":
        raise UsageError(f"unknown engine {engine!r}; expected sglang or vllm")
    if not radix_cache:
        return 1
    if overlap is None:
        overlap = not spec_decode
    if _version(sglang_version) < (0, 5, 23):
        return 3 + ((2 if overlap else 1) if extra_buffer else 0)
    if not extra_buffer:
        return 3  # with skip_decode_lock: 2, plus 1 added back for no_buffer
    base = 2 if skip_decode_lock else 3
    return base + (1 if lazy or not overlap else 2)


def split_cache_bytes(cache_bytes: float, ratio: float) -> tuple[float, float]:
    """`--mamba-full-memory-ratio` r as state:KV bytes: (state = R*r/(1+r), KV = R/(1+r)) (A0, A1.2)."""
    if ratio < 0:
        raise UsageError(f"mamba_full_memory_ratio must be >= 0, got {ratio}")
    return cache_bytes * ratio / (1 + ratio), cache_bytes / (1 + ratio)


@dataclass(frozen=True)
class PoolSplit:
    """SGLang's startup carve-up of cache memory (A1.2 `handle_max_mamba_cache`, `profile_max_num_token`)."""

    state_slots: int  # max_mamba_cache_size
    state_bytes: int
    kv_tokens: int  # max_total_num_tokens
    kv_bytes: int
    slots_per_request: int
    spec_reserve_bytes: int = 0

    @property
    def max_requests_by_state(self) -> int:
        """C_max = slots // k: the cap the state pool puts on `max_running_requests` (A0)."""
        return self.state_slots // self.slots_per_request


def sglang_split(
    cache_bytes: int,
    ratio: float = 0.9,
    *,
    state_per_slot: int,
    kv_per_token: int,
    slots_per_request: int = 3,
    max_mamba_cache_size: int | None = None,
    spec_reserve_bytes: int = 0,
    padding_slot: bool = False,
) -> PoolSplit:
    """State slots and KV tokens SGLang carves out of `cache_bytes` (R, bytes left after weights).

    0.5.9 (A1.2): the spec scratch is taken first; then slots = int(R*r/(1+r) // S), unless
    `max_mamba_cache_size` is given (also the case `--disable-radix-cache --max-running-requests N`: N slots);
    the KV pool gets the rest: tokens = (R - slots*S) // B. `padding_slot=True` approximates 0.5.23, which
    allocates and charges one extra slot ((slots+1)*S).
    """
    if state_per_slot <= 0 or kv_per_token <= 0:
        raise UsageError("state_per_slot and kv_per_token must be positive byte counts")
    rest = cache_bytes - spec_reserve_bytes
    if max_mamba_cache_size is not None:
        slots = max_mamba_cache_size
    else:
        slots = int(rest * ratio / (1 + ratio) // state_per_slot) - (1 if padding_slot else 0)
    charged = (slots + (1 if padding_slot else 0)) * state_per_slot
    kv_bytes = rest - charged
    if slots < 0 or kv_bytes < 0:
        raise UsageError(
            f"{cache_bytes:,} B of cache memory cannot hold {slots:,} state slots of "
            f"{state_per_slot:,} B plus a KV pool"
        )
    return PoolSplit(
        slots, charged, kv_bytes // kv_per_token, kv_bytes, slots_per_request, spec_reserve_bytes
    )


@dataclass(frozen=True)
class PoolNeed:
    """Pools a measured peak needs: state k*S*C*, KV B*T* (A0 "Recommended ratio")."""

    state_slots: int  # k*C*: the value for --max-mamba-cache-size
    state_bytes: int
    kv_tokens: int
    kv_bytes: int
    spec_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.kv_bytes + self.spec_bytes

    @property
    def ratio(self) -> float:
        """r* = M_s / M_kv: the balanced `--mamba-full-memory-ratio`."""
        return self.state_bytes / self.kv_bytes if self.kv_bytes else float("inf")

    def feasible(self, cache_bytes: int) -> bool:
        """Feasible iff M_s + M_kv (+ spec scratch) <= R."""
        return self.total_bytes <= cache_bytes


def pools_needed(
    concurrency: int,
    live_tokens: int,
    *,
    state_per_slot: int,
    kv_per_token: int,
    slots_per_request: int = 3,
    spec_bytes: int = 0,
) -> PoolNeed:
    """Bytes (and ratio) for `concurrency` running requests holding `live_tokens` KV tokens in all (A0)."""
    slots = slots_per_request * concurrency
    return PoolNeed(slots, slots * state_per_slot, live_tokens, live_tokens * kv_per_token, spec_bytes)


def balanced_ratio(
    *, state_per_slot: int, kv_per_token: int, slots_per_request: int, mean_live_tokens: float
) -> float:
    """r* = k*S / (B*L), L = mean live tokens per running request (A0)."""
    return slots_per_request * state_per_slot / (kv_per_token * mean_live_tokens)


def balanced_max_concurrency(
    cache_bytes: float,
    *,
    state_per_slot: int,
    kv_per_token: int,
    slots_per_request: int,
    mean_live_tokens: float,
) -> float:
    """Requests R holds when both pools run out together: R / (k*S + B*L) (A1.5 "Balanced")."""
    return cache_bytes / (slots_per_request * state_per_slot + kv_per_token * mean_live_tokens)


def sglang_spec_reserve_bytes(state_per_slot: int, max_running_requests: int, draft_tokens: int) -> int:
    """0.5.9 `handle_max_mamba_cache` with spec decoding: S * max_running_requests * draft tokens (A1.2)."""
    return state_per_slot * max_running_requests * draft_tokens


def sglang_max_running_requests(
    max_total_tokens: int,
    context_len: int,
    *,
    state_slots: int | None = None,
    slots_per_request: int = 3,
    requested: int | None = None,
) -> int:
    """`max_running_requests` SGLang (0.5.5+) settles on at startup.

    Unset: clamp(int(tokens/context_len*512), 2048, 4096), at most tokens // 2 (A1.2 `init_memory_pool`,
    B table row 5b); set: the requested value. Hybrids then cap it at state_slots // k.
    """
    if requested is None:
        n = min(max(int(max_total_tokens / context_len * 512), 2048), 4096)
        n = min(n, max_total_tokens // 2)
    else:
        n = requested
    if state_slots is not None:
        n = min(n, state_slots // slots_per_request)
    return n


def state_bytes_from_log(conv_gb: float, ssm_gb: float, max_mamba_cache_size: int) -> float:
    """S from `Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: X GB, ssm_state size: Y GB`

    SGLang's GB is 2^30 and the tensors hold N+1 slots (one padding slot): S = (X+Y)*2^30/(N+1) (A4).
    """
    return (conv_gb + ssm_gb) * (1 << 30) / (max_mamba_cache_size + 1)


def kv_bytes_from_log(kv_gb: float, tokens: int) -> float:
    """B from `KV Cache is allocated. #tokens: T, K size: k GB, V size: v GB`, kv_gb = k+v: kv*2^30/T (A4)."""
    return kv_gb * (1 << 30) / tokens
