"""Per-architecture readers of a Hugging Face config.json: which layers hold full-attention KV, which hold
recurrent state, and each state layer's conv and SSM element counts after tensor-parallel sharding.

Formulas and layer-selection rules are those of formats/memory-and-thresholds.md A3 (the engines'
`Mamba2StateShape.create`, `KimiLinearStateShape.create`, vLLM `*_state_shape` calculators).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from attribution.memory.errors import UnknownArchitecture
from attribution.memory.layout import (
    Fields,
    Layout,
    check_len,
    count_kinds,
    kv_heads_per_gpu,
    mamba2_elems,
    shard,
)


def gdn(f: Fields, tp: int) -> Layout:
    """Qwen3-Next / Qwen3.5: full iff layer_types says so, else (i+1) % full_attention_interval == 0."""
    n_layers = f.int("num_hidden_layers", default=0)
    types = f.cfg.get("layer_types")
    if types is not None:
        check_len(f, n_layers, types, "layer_types")
        c = count_kinds(types, {"full_attention": "full", "linear_attention": "linear"}, f, "layer_types")
        n_layers = len(types)
    elif f.cfg.get("full_attention_interval") and n_layers:
        every = f.int("full_attention_interval")
        c = Counter("full" if (i + 1) % every == 0 else "linear" for i in range(n_layers))
    else:
        f.need("layer_types (or num_hidden_layers and full_attention_interval)")
        c = Counter()
    kvh, hd = f.int("num_key_value_heads"), f.head_dim()
    k_heads, k_dim = f.int("linear_num_key_heads"), f.int("linear_key_head_dim")
    v_heads, v_dim = f.int("linear_num_value_heads"), f.int("linear_value_head_dim")
    kernel = f.int("linear_conv_kernel_dim")
    f.check()
    conv, ssm = mamba2_elems(
        tp,
        intermediate=v_heads * v_dim,
        n_groups=k_heads,
        num_heads=v_heads,
        head_dim=v_dim,
        state_size=k_dim,
        conv_kernel=kernel,
    )
    qwen35 = str(f.cfg.get("model_type", "")).startswith("qwen3_5")
    return Layout(
        "Qwen3-Next / Qwen3.5 (Gated DeltaNet)",
        "gdn",
        n_layers,
        c["full"],
        c["linear"],
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=conv,
        ssm_elems=ssm,
        vllm_ssm_dtype=f.cfg.get("mamba_ssm_dtype") if qwen35 else None,
        sglang_radix="extra_buffer",
    )


def nemotron_h(f: Fields, tp: int) -> Layout:
    """Nemotron-H: hybrid_override_pattern (M mamba, * attention, - MLP, E MoE) or layers_block_type."""
    pattern, blocks = f.cfg.get("hybrid_override_pattern"), f.cfg.get("layers_block_type")
    if pattern is not None:
        c = count_kinds(
            list(pattern),
            {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"},
            f,
            "hybrid_override_pattern",
        )
        n_layers = len(pattern)
    elif blocks is not None:
        c = count_kinds(blocks, {k: k for k in ("mamba", "attention", "mlp", "moe")}, f, "layers_block_type")
        n_layers = len(blocks)
    else:
        f.need("hybrid_override_pattern (or layers_block_type)")
        c, n_layers = Counter(), 0
    kvh, hd = f.int("num_key_value_heads"), f.head_dim("head_dim", "attention_head_dim")
    heads, head_dim = f.int("mamba_num_heads"), f.int("mamba_head_dim")
    state, groups = f.int("ssm_state_size"), f.int("n_groups", "mamba_n_groups")
    kernel = f.int("conv_kernel", "mamba_d_conv")
    f.check()
    conv, ssm = mamba2_elems(
        tp,
        intermediate=heads * head_dim,
        n_groups=groups,
        num_heads=heads,
        head_dim=head_dim,
        state_size=state,
        conv_kernel=kernel,
    )
    return Layout(
        "Nemotron-H (Mamba2 hybrid)",
        "mamba2",
        n_layers,
        c["attention"],
        c["mamba"],
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=conv,
        ssm_elems=ssm,
        vllm_ssm_dtype=f.cfg.get("mamba_ssm_cache_dtype") or "float32",
    )


def _mamba2_hybrid(f: Fields, tp: int, intermediate: int) -> tuple[int, int]:
    """Granite-4.0-H and Falcon-H1 share the mamba_* field names; mamba_d_head 'auto' = intermediate/heads."""
    heads = f.int("mamba_n_heads")
    head_dim = f.raw("mamba_d_head")
    if head_dim == "auto":
        head_dim = intermediate // heads if heads else 0
    elif head_dim is not None:
        head_dim = f.int("mamba_d_head")
    groups, state, kernel = f.int("mamba_n_groups"), f.int("mamba_d_state"), f.int("mamba_d_conv")
    f.check()
    return mamba2_elems(
        tp,
        intermediate=intermediate,
        n_groups=groups,
        num_heads=heads,
        head_dim=head_dim or 0,
        state_size=state,
        conv_kernel=kernel,
    )


def granite(f: Fields, tp: int) -> Layout:
    """Granite-4.0-H: layer_types 'mamba' / 'attention'; intermediate = mamba_expand * hidden_size."""
    types = f.raw("layer_types") or []
    n_layers = f.int("num_hidden_layers", default=len(types))
    check_len(f, n_layers, types, "layer_types")
    c = count_kinds(types, {"mamba": "mamba", "attention": "attention"}, f, "layer_types")
    kvh, hd = f.int("num_key_value_heads"), f.head_dim()
    intermediate = f.int("mamba_expand") * f.int("hidden_size")
    conv, ssm = _mamba2_hybrid(f, tp, intermediate)
    return Layout(
        "Granite-4.0-H (Mamba2 hybrid)",
        "mamba2",
        len(types),
        c["attention"],
        c["mamba"],
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=conv,
        ssm_elems=ssm,
    )


def falcon_h1(f: Fields, tp: int) -> Layout:
    """Falcon-H1: every layer has attention and mamba side by side (SGLang: full ids = linear ids)."""
    n_layers, kvh, hd = f.int("num_hidden_layers"), f.int("num_key_value_heads"), f.head_dim()
    d_ssm = f.cfg.get("mamba_d_ssm")
    intermediate = f.int("mamba_d_ssm") if d_ssm is not None else f.int("mamba_expand") * f.int("hidden_size")
    conv, ssm = _mamba2_hybrid(f, tp, intermediate)
    layout = Layout(
        "Falcon-H1 (parallel attention + Mamba2)",
        "mamba2",
        n_layers,
        n_layers,
        n_layers,
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=conv,
        ssm_elems=ssm,
    )
    layout.notes.append("every layer holds both KV and mamba state")
    return layout


def jamba(f: Fields, tp: int) -> Layout:
    """Jamba (Mamba-1): attention iff i % attn_layer_period == attn_layer_offset; vLLM only."""
    n_layers = f.int("num_hidden_layers")
    period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset")
    kvh, hd = f.int("num_key_value_heads"), f.head_dim()
    inner = f.int("mamba_expand") * f.int("hidden_size")
    state, kernel = f.int("mamba_d_state"), f.int("mamba_d_conv")
    f.check()
    n_full = sum(1 for i in range(n_layers) if i % period == offset)
    inner = shard(inner, tp, "mamba_expand * hidden_size")
    return Layout(
        "Jamba (Mamba-1 hybrid)",
        "mamba1",
        n_layers,
        n_full,
        n_layers - n_full,
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=inner * (kernel - 1),
        ssm_elems=inner * state,
        sglang_radix="unsupported",
    )


def lfm2(f: Fields, tp: int) -> Layout:
    """LFM2: layer_types 'conv' / 'full_attention' (older configs: full_attn_idxs); conv state only."""
    types = f.cfg.get("layer_types")
    if types is not None:
        c = count_kinds(types, {"conv": "conv", "full_attention": "full"}, f, "layer_types")
        n_layers = len(types)
    elif f.cfg.get("full_attn_idxs") is not None:
        n_layers = f.int("num_hidden_layers")
        full = set(f.raw("full_attn_idxs"))
        c = Counter({"full": len(full), "conv": n_layers - len(full)})
    else:
        f.need("layer_types (or full_attn_idxs)")
        c, n_layers = Counter(), 0
    kvh, hd = f.int("num_key_value_heads"), f.head_dim()
    conv_dim = f.int("conv_dim", "hidden_size")
    cache = f.int("conv_L_cache", "conv_l_cache")
    f.check()
    conv = shard(conv_dim, tp, "conv_dim") * (cache - 1)
    return Layout(
        "LFM2 (short convolution)",
        "short_conv",
        n_layers,
        c["full"],
        c["conv"],
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        conv_elems=conv,
    )


def kimi_linear(f: Fields, tp: int) -> Layout:
    """Kimi-Linear: KDA layers + MLA full layers, listed 1-based in linear_attn_config."""
    n_layers = f.int("num_hidden_layers")
    mla = f.int("kv_lora_rank") + f.int("qk_rope_head_dim")
    lac = f.raw("linear_attn_config") or {}
    g = Fields(lac, f.where, prefix="linear_attn_config.")
    full = g.raw("full_attn_layers") or []
    kda = lac.get("kda_layers") or [i for i in range(1, n_layers + 1) if i not in set(full)]
    heads, head_dim = g.int("num_heads"), g.int("head_dim")
    k_heads, k_dim = g.int("num_k_heads", default=heads), g.int("head_k_dim", default=head_dim)
    kernel = g.int("short_conv_kernel_size")
    f.check(g)
    conv = (
        shard(heads * head_dim, tp, "KDA value channels") + 2 * shard(k_heads * k_dim, tp, "KDA key channels")
    ) * (kernel - 1)
    ssm = shard(heads, tp, "KDA heads") * head_dim * head_dim
    return Layout(
        "Kimi-Linear (KDA + MLA)",
        "kda",
        n_layers,
        len(full),
        len(kda),
        mla_dim=mla,
        conv_elems=conv,
        ssm_elems=ssm,
        vllm_ssm_dtype="float32",
        sglang_radix="disabled",
    )


def minimax(f: Fields, tp: int) -> Layout:
    """MiniMax-Text-01 / M1: attn_type_list 0 = lightning, 1 = softmax; state heads*hd*hd, no conv."""
    kinds = f.raw("attn_type_list") or []
    c = count_kinds(kinds, {0: "lightning", 1: "softmax"}, f, "attn_type_list")
    heads, hd, kvh = f.int("num_attention_heads"), f.head_dim(), f.int("num_key_value_heads")
    f.check()
    layout = Layout(
        "MiniMax lightning attention",
        "lightning",
        len(kinds),
        c["softmax"],
        c["lightning"],
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        ssm_elems=shard(heads, tp, "num_attention_heads") * hd * hd,
        sglang_radix="unsupported",
    )
    layout.notes.append(
        "vLLM last supported MiniMax-Text-01/M1 in v0.23.0 (A2); which state dtype V1 used "
        "is [unverified], the generic linear-attention calculator gives the model dtype"
    )
    return layout


def sliding_window(f: Fields, tp: int) -> Layout:
    """Gemma-2/3, gpt-oss: no state; sliding layers keep at most `sliding_window` tokens of KV."""
    window, kvh, hd = f.int("sliding_window"), f.int("num_key_value_heads"), f.head_dim()
    n_layers = f.int("num_hidden_layers", default=0)
    types = f.cfg.get("layer_types")
    model_type = str(f.cfg.get("model_type", ""))
    if types is not None:
        c = count_kinds(types, {"sliding_attention": "sliding", "full_attention": "full"}, f, "layer_types")
        n_layers = len(types)
    elif model_type.startswith("gemma3") and f.cfg.get("sliding_window_pattern") and n_layers:
        every = f.int("sliding_window_pattern")  # Gemma-3: every `pattern`-th layer is global
        c = Counter("full" if (i + 1) % every == 0 else "sliding" for i in range(n_layers))
    elif model_type == "gemma2" and n_layers:
        c = Counter("sliding" if i % 2 == 0 else "full" for i in range(n_layers))
    else:
        f.need("layer_types (or num_hidden_layers and sliding_window_pattern)")
        c = Counter()
    f.check()
    return Layout(
        "sliding-window attention",
        None,
        n_layers,
        c["full"],
        0,
        n_sliding=c["sliding"],
        sliding_window=window,
        kv_heads=kv_heads_per_gpu(kvh, tp),
        head_dim=hd,
        sglang_radix="n/a",
    )


FAMILIES: dict[str, Callable[[Fields, int], Layout]] = {
    "qwen3_next": gdn,
    "qwen3_5": gdn,
    "qwen3_5_text": gdn,
    "qwen3_5_moe": gdn,
    "qwen3_5_moe_text": gdn,
    "nemotron_h": nemotron_h,
    "granitemoehybrid": granite,
    "falcon_h1": falcon_h1,
    "jamba": jamba,
    "lfm2": lfm2,
    "kimi_linear": kimi_linear,
    "minimax_text_01": minimax,
    "minimax_m1": minimax,
    "gemma2": sliding_window,
    "gemma3": sliding_window,
    "gemma3_text": sliding_window,
    "gpt_oss": sliding_window,
}


def flatten(cfg: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(model_type, fields): multimodal configs keep the language model's fields in `text_config`."""
    model_type = cfg.get("model_type")
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        return model_type, dict(cfg)
    if model_type not in FAMILIES and text.get("model_type") in FAMILIES:
        model_type = text["model_type"]
    return model_type, {**cfg, **text, "model_type": model_type}


def read_layout(cfg: Mapping[str, Any], tp: int, where: str = "config") -> tuple[Layout, dict[str, Any]]:
    """Dispatch on model_type; unknown architectures name what the tool would need."""
    model_type, fields = flatten(cfg)
    if model_type is None:
        raise UnknownArchitecture(f"{where} has no model_type field, so its architecture is unknown")
    if model_type not in FAMILIES:
        raise UnknownArchitecture(
            f"{where}: model_type {model_type!r} is not an architecture the memory model knows "
            f"(known: {', '.join(sorted(FAMILIES))}). Sizing a model needs which layers are full attention, "
            "their num_key_value_heads and head_dim, and for recurrent layers the conv and state shapes."
        )
    return FAMILIES[model_type](Fields(fields, where), tp), fields
