"""vLLM's shared block pool for hybrid models (formats/memory-and-thresholds.md A2): the attention block size
it raises so an attention page is at least a mamba page, the padded page, the layer groups that share block
ids, and the concurrency a pool of a given size admits at a given request length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attribution.errors import UsageError
from attribution.memory.pools import state_slots_per_request
from attribution.memory.profile import ModelProfile


@dataclass(frozen=True)
class HybridBlocks:
    attn_block_size: int  # tokens per attention block ("Setting attention block size to N tokens")
    mamba_page_bytes: int  # one state layer's slot, unpadded
    page_bytes: int  # common page: attn_block_size * attention bytes per token per layer
    group_size: int  # layers per KV-cache group
    attention_groups: int
    state_groups: int

    @property
    def padding_fraction(self) -> float:
        """ "Padding mamba page size by X%" as a fraction."""
        return self.page_bytes / self.mamba_page_bytes - 1

    @property
    def state_bytes_per_request(self) -> int:
        """One request's state in padded pages, over every layer of every state group (padding included)."""
        return self.page_bytes * self.group_size * self.state_groups


def hybrid_blocks(profile: ModelProfile, *, block_size: int = 16) -> HybridBlocks:
    """`Platform._align_hybrid_block_size` and `_get_kv_cache_groups_uniform_page_size` (A2).

    attn_block = align * cdiv(mamba_page, align * attn_page_per_token), align = block_size (at least 128
    for MLA); page = attn_block * attn_page_per_token. Group size = the smallest layer count among kinds,
    or the largest when max < 1.5 * min; each kind needs cdiv(count, group_size) groups.
    """
    if profile.engine != "vllm":
        raise UsageError(f"{profile.name}: block alignment is vLLM's; this profile is for {profile.engine}")
    if not profile.state_kind or not profile.n_full_attention:
        raise UsageError(
            f"{profile.name}: not an attention + state hybrid, so vLLM does not align block sizes"
        )
    align = max(block_size, 128) if profile.mla else block_size
    per_token = profile.kv_bytes_per_token_per_layer
    mamba_page = profile.state_bytes_per_layer
    attn_block = align * math.ceil(mamba_page / (align * per_token))
    counts = (profile.n_full_attention, profile.n_state_layers)
    group = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    return HybridBlocks(
        attn_block,
        mamba_page,
        attn_block * per_token,
        group,
        math.ceil(counts[0] / group),
        math.ceil(counts[1] / group),
    )


def max_concurrency(
    blocks: HybridBlocks,
    *,
    available_bytes: int,
    max_model_len: int,
    prefix_caching: bool = False,
    num_speculative_blocks: int = 0,
    prefill_checkpoint_blocks: int = 0,
) -> float:
    """`get_max_concurrency_for_kv_cache_config`: num_blocks / blocks per request of `max_model_len` tokens.

    num_blocks = available // (page * group_size); a request takes cdiv(len, attn_block) blocks per
    attention group and `state_slots_per_request("vllm", ...)` blocks per state group (A2).
    """
    num_blocks = available_bytes // (blocks.page_bytes * blocks.group_size)
    per_state_group = state_slots_per_request(
        "vllm",
        prefix_caching,
        num_speculative_blocks > 0,
        num_speculative_blocks=num_speculative_blocks,
        prefill_checkpoint_blocks=prefill_checkpoint_blocks,
    )
    per_request = (
        blocks.attention_groups * math.ceil(max_model_len / blocks.attn_block_size)
        + blocks.state_groups * per_state_group
    )
    return num_blocks / per_request
