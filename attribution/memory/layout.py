"""What a config says about one model's cache, per GPU and before dtypes (`Layout`), and the shared pieces
the per-family readers use: a field reader that names every missing field, and tensor-parallel sharding
as the engines do it (formats/memory-and-thresholds.md A3).
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attribution.errors import UsageError
from attribution.memory.errors import ModelConfigError

_MISSING = object()


@dataclass
class Layout:
    """What one architecture's config says, per GPU, before dtypes are applied."""

    family: str
    state_kind: str | None  # gdn | mamba2 | mamba1 | short_conv | kda | lightning | None
    n_layers: int
    n_full: int
    n_state: int = 0
    n_sliding: int = 0
    sliding_window: int | None = None
    kv_heads: int = 0  # per GPU, after replication (A3: max(1, kv_heads / tp))
    head_dim: int = 0
    mla_dim: int = 0  # kv_lora_rank + qk_rope_head_dim when the full layers are MLA
    conv_elems: int = 0  # per state layer, per GPU
    ssm_elems: int = 0  # per state layer, per GPU
    vllm_ssm_dtype: str | None = None  # the family's answer to vLLM's `auto` SSM dtype; None = conv dtype
    sglang_radix: str = "no_buffer"  # extra_buffer | no_buffer | disabled | unsupported | n/a (A1.1)
    notes: list[str] = field(default_factory=list)


class Fields:
    """Reads config fields, collecting every missing one so the error names them all at once."""

    def __init__(self, cfg: Mapping[str, Any], where: str = "config", prefix: str = "") -> None:
        self.cfg, self.where, self.prefix = cfg, where, prefix
        self.missing: list[str] = []

    def raw(self, *names: str, default: Any = _MISSING) -> Any:
        for name in names:
            if self.cfg.get(name) is not None:
                return self.cfg[name]
        if default is _MISSING:
            self.missing.append(" or ".join(self.prefix + n for n in names))
            return None
        return default

    def int(self, *names: str, default: Any = _MISSING) -> int:
        value = self.raw(*names, default=default)
        if value is None:
            return 0
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.missing.append(f"{self.prefix}{names[0]} (an integer; the config has {value!r})")
            return 0
        return value

    def head_dim(self, *names: str) -> builtins.int:  # (`int` is the method above in this class)
        for name in names or ("head_dim",):
            if self.cfg.get(name) is not None:
                return self.int(name)
        hidden, heads = self.cfg.get("hidden_size"), self.cfg.get("num_attention_heads")
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
            return hidden // heads
        self.missing.append(f"{' or '.join(names or ('head_dim',))} (or hidden_size and num_attention_heads)")
        return 0

    def need(self, what: str) -> None:
        self.missing.append(what)

    def check(self, other: Fields | None = None) -> None:
        missing = self.missing + (other.missing if other else [])
        if missing:
            raise ModelConfigError(
                f"{self.where} (model_type {self.cfg.get('model_type')!r}) lacks {', '.join(missing)}; "
                "these fields are needed to size its KV cache and recurrent state"
            )


def shard(n: int, tp: int, what: str) -> int:
    """Heads and channels are divided by tp; engines assert divisibility, so do we."""
    if n % tp:
        raise UsageError(f"{what} = {n} is not divisible by tensor-parallel size {tp}")
    return n // tp


def kv_heads_per_gpu(kv_heads: int, tp: int) -> int:
    """A3: kvh_gpu = max(1, kv_heads / tp); fewer KV heads than ranks are replicated."""
    if kv_heads >= tp:
        return shard(kv_heads, tp, "num_key_value_heads")
    if tp % kv_heads:
        raise UsageError(
            f"num_key_value_heads = {kv_heads} cannot be replicated over tensor-parallel size {tp}"
        )
    return 1


def mamba2_elems(
    tp: int,
    *,
    intermediate: int,
    n_groups: int,
    num_heads: int,
    head_dim: int,
    state_size: int,
    conv_kernel: int,
) -> tuple[int, int]:
    """(conv, ssm) elements per layer per GPU: SGLang `Mamba2StateShape.create`, vLLM `mamba2_state_shape`.

    Groups that do not divide tp are replicated up to tp (`extra_groups_for_head_shards`), so
    conv = (intermediate + 2*groups'*state) / tp * (kernel-1) and ssm = heads/tp * head_dim * state.
    """
    if n_groups % tp:
        if n_groups > tp:
            raise UsageError(f"n_groups = {n_groups} does not divide over tensor-parallel size {tp}")
        n_groups = tp
    conv = shard(intermediate + 2 * n_groups * state_size, tp, "conv channels") * (conv_kernel - 1)
    return conv, shard(num_heads, tp, "state heads") * head_dim * state_size


def count_kinds(kinds: list[Any], allowed: Mapping[Any, str], f: Fields, field_name: str) -> Counter:
    bad = sorted({str(k) for k in kinds if k not in allowed})
    if bad:
        f.need(f"{field_name} with only {sorted(map(str, allowed))} entries (found {bad})")
    return Counter(allowed[k] for k in kinds if k in allowed)


def check_len(f: Fields, n_layers: int, kinds: list[Any], field_name: str) -> None:
    if n_layers and len(kinds) != n_layers:
        f.need(f"{field_name} of length num_hidden_layers = {n_layers} (it has {len(kinds)})")
