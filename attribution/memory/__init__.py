"""Memory model for hybrid (attention + recurrent-state) models: per-model profiles of KV bytes per token
and state bytes per request slot, bundled presets, and the pool arithmetic behind SGLang's static split
and vLLM's shared block pool. Reference: formats/memory-and-thresholds.md Part A.
"""

from attribution.memory.catalog import Preset, get_preset, list_presets, load_profile
from attribution.memory.errors import (
    ModelConfigError,
    UnknownArchitecture,
    UnknownPreset,
    UnsupportedOnEngine,
)
from attribution.memory.pools import (
    PoolNeed,
    PoolSplit,
    balanced_max_concurrency,
    balanced_ratio,
    kv_bytes_from_log,
    pools_needed,
    sglang_max_running_requests,
    sglang_spec_reserve_bytes,
    sglang_split,
    split_cache_bytes,
    state_bytes_from_log,
    state_slots_per_request,
)
from attribution.memory.profile import ModelProfile, fmt_bytes, from_hf_config
from attribution.memory.vllm import HybridBlocks, hybrid_blocks, max_concurrency

__all__ = [
    "HybridBlocks",
    "ModelConfigError",
    "ModelProfile",
    "PoolNeed",
    "PoolSplit",
    "Preset",
    "UnknownArchitecture",
    "UnknownPreset",
    "UnsupportedOnEngine",
    "balanced_max_concurrency",
    "balanced_ratio",
    "fmt_bytes",
    "from_hf_config",
    "get_preset",
    "hybrid_blocks",
    "kv_bytes_from_log",
    "list_presets",
    "load_profile",
    "max_concurrency",
    "pools_needed",
    "sglang_max_running_requests",
    "sglang_spec_reserve_bytes",
    "sglang_split",
    "split_cache_bytes",
    "state_bytes_from_log",
    "state_slots_per_request",
]
