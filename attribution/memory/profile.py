"""A hybrid model's memory profile for one engine and TP size: KV bytes per token of the full-attention
layers (B), recurrent-state bytes per request slot (S, conv + SSM), sliding-window KV, and the dtypes used.
Built from a Hugging Face config.json with the engine's default cache dtypes
(formats/memory-and-thresholds.md A3; SGLang A1.1, vLLM A2 "Dtypes").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attribution.errors import UsageError
from attribution.memory.dtypes import canonical_dtype, dtype_bytes, explicit
from attribution.memory.errors import ModelConfigError, UnsupportedOnEngine
from attribution.memory.families import read_layout
from attribution.memory.layout import Layout

ENGINES = ("sglang", "vllm")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class ModelProfile:
    """Per-GPU (per TP rank) cache sizes of one model served by one engine.

    ``layers`` counts layers by kind: ``full_attention``, ``sliding_attention`` and the state kind
    (``gdn``, ``mamba2``, ``mamba1``, ``short_conv``, ``kda``, ``lightning``). Falcon-H1 layers carry both
    attention and state, so the counts may add up to more than ``n_layers``.
    """

    name: str
    family: str
    model_type: str
    engine: str
    tp: int
    n_layers: int
    layers: Mapping[str, int]
    state_kind: str | None
    kv_bytes_per_token: int  # B: summed over the full-attention layers
    swa_kv_bytes_per_token: int  # summed over the sliding layers; each holds at most `sliding_window` tokens
    sliding_window: int | None
    conv_bytes_per_slot: int  # summed over the state layers
    ssm_bytes_per_slot: int
    model_dtype: str
    kv_dtype: str
    conv_dtype: str | None
    ssm_dtype: str | None
    mla: bool
    sglang_radix: str  # extra_buffer | no_buffer | disabled | unsupported | n/a (doc A1.1)
    notes: tuple[str, ...] = field(default=())

    @property
    def n_full_attention(self) -> int:
        return self.layers.get("full_attention", 0)

    @property
    def n_state_layers(self) -> int:
        return self.layers.get(self.state_kind, 0) if self.state_kind else 0

    @property
    def n_sliding(self) -> int:
        return self.layers.get("sliding_attention", 0)

    @property
    def state_bytes_per_slot(self) -> int:
        """S: conv + SSM bytes of one request slot, summed over the state layers."""
        return self.conv_bytes_per_slot + self.ssm_bytes_per_slot

    @property
    def state_bytes_per_layer(self) -> int:
        """One state layer's slot: vLLM's unpadded mamba page (A2 "Page-size alignment")."""
        return self.state_bytes_per_slot // self.n_state_layers if self.n_state_layers else 0

    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        """One full-attention layer's KV per token: vLLM's attention page per token (A2)."""
        return self.kv_bytes_per_token // self.n_full_attention if self.n_full_attention else 0

    @property
    def state_token_equivalent(self) -> float:
        """S/B: how many KV tokens one state slot costs (A0 "useful metric")."""
        return (
            self.state_bytes_per_slot / self.kv_bytes_per_token if self.kv_bytes_per_token else float("inf")
        )

    def kv_bytes(self, tokens: int) -> int:
        """KV bytes of one sequence of `tokens` tokens: B*L + B_swa*min(L, W) (A3 "Sliding window")."""
        bounded = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return self.kv_bytes_per_token * tokens + self.swa_kv_bytes_per_token * bounded

    def describe(self) -> str:
        """A few lines a platform engineer can paste into a ticket."""
        kinds = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in self.layers.items())
        kv_layers = f"{self.n_full_attention} {'MLA' if self.mla else 'full-attention'} layers"
        lines = [
            f"{self.name}: {self.family}, {self.engine}, TP={self.tp}",
            f"  layers     {self.n_layers}: {kinds}",
            f"  KV/token   {self.kv_bytes_per_token:,} B = {fmt_bytes(self.kv_bytes_per_token)} "
            f"({kv_layers}, {self.kv_dtype})",
        ]
        if self.n_sliding:
            lines.append(
                f"  sliding    +{self.swa_kv_bytes_per_token:,} B/token = "
                f"{fmt_bytes(self.swa_kv_bytes_per_token)} for the last {self.sliding_window} tokens "
                f"({self.n_sliding} layers)"
            )
        if self.state_kind:
            s = self.state_bytes_per_slot
            size = f"{s / 1e6:.2f} MB = {s / MiB:.1f} MiB" if s >= MiB else fmt_bytes(s)
            parts = [
                f"{part} {n:,} B {dt}"
                for part, n, dt in (
                    ("conv", self.conv_bytes_per_slot, self.conv_dtype),
                    ("ssm", self.ssm_bytes_per_slot, self.ssm_dtype),
                )
                if dt
            ]
            lines += [
                f"  state/slot {s:,} B = {size} ({self.n_state_layers} {self.state_kind} layers; "
                f"{' + '.join(parts)})",
                f"  one slot   = {self.state_token_equivalent:,.0f} KV tokens",
            ]
        if self.engine == "sglang" and self.state_kind:
            lines.append(f"  radix      {_RADIX[self.sglang_radix]}")
        lines += [f"  note       {n}" for n in self.notes]
        return "\n".join(lines)


_RADIX = {
    "extra_buffer": "radix cache on, extra_buffer allowed (3 slots per running request, 4-5 with it)",
    "no_buffer": "radix cache on, no_buffer only (3 slots per running request); overlap scheduler disabled",
    "disabled": "radix cache disabled for this architecture (1 slot per running request)",
}


def fmt_bytes(n: float) -> str:
    """Binary units, as the doc writes KV sizes (24 KiB, 280 MiB)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def load_config(config: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], str]:
    """A config dict, or a path to a config.json (or to the model directory holding one)."""
    if isinstance(config, Mapping):
        return dict(config), "config"
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelConfigError(f"{path}: not a readable JSON config ({e})") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data, str(path)


def _model_dtype(fields: Mapping[str, Any], override: str | None, notes: list[str]) -> str:
    chosen = explicit(override)
    if chosen is not None:
        return canonical_dtype(chosen)
    raw = fields.get("torch_dtype") or fields.get("dtype")
    if raw is None:
        notes.append("config has no torch_dtype; assumed bfloat16")
        return "bfloat16"
    dtype = canonical_dtype(raw)
    if dtype == "float32":
        # Both engines serve float32 checkpoints in a 16-bit dtype unless --dtype says otherwise.
        notes.append("config dtype float32 is served as bfloat16 unless --dtype is set")
        return "bfloat16"
    return dtype


def _state_dtypes(
    engine: str,
    layout: Layout,
    fields: Mapping[str, Any],
    model_dtype: str,
    conv_flag: str | None,
    ssm_flag: str | None,
) -> tuple[str | None, str | None]:
    """(conv, SSM) dtypes by the precedence `from_hf_config` documents; None where a part does not exist."""
    if not layout.state_kind:
        return None, None
    conv_set, ssm_set = explicit(conv_flag), explicit(ssm_flag)
    if engine == "sglang":
        conv = "bfloat16" if conv_set is None else canonical_dtype(conv_set)
        ssm = ssm_set if ssm_set is not None else fields.get("mamba_ssm_dtype") or "float32"
    else:
        conv = model_dtype if conv_set is None else canonical_dtype(conv_set)
        ssm = ssm_set if ssm_set is not None else layout.vllm_ssm_dtype or conv
    # Lightning layers have no conv part and short-conv layers no SSM part.
    return (conv if layout.conv_elems else None), (canonical_dtype(ssm) if layout.ssm_elems else None)


def from_hf_config(
    config: Mapping[str, Any] | str | Path,
    *,
    engine: str = "sglang",
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    mamba_ssm_dtype: str | None = None,
    mamba_conv_dtype: str | None = None,
    dtype: str | None = None,
    name: str | None = None,
    notes: tuple[str, ...] = (),
) -> ModelProfile:
    """Compute B and S from a config.json for `engine` ("sglang" or "vllm") at attention TP size `tp`.

    Dtypes (A3 "Default dtypes"): KV = `kv_cache_dtype` (``auto``/None = model dtype). SGLang: conv =
    `mamba_conv_dtype` (env SGLANG_MAMBA_CONV_DTYPE) else bfloat16; SSM = `mamba_ssm_dtype`
    (--mamba-ssm-dtype) else the config's ``mamba_ssm_dtype`` else float32. vLLM: conv = `mamba_conv_dtype`
    (--mamba-cache-dtype) else the model dtype; SSM = `mamba_ssm_dtype` (--mamba-ssm-cache-dtype) else the
    family's override (NemotronH: config ``mamba_ssm_cache_dtype`` or float32; Qwen3.5: config
    ``mamba_ssm_dtype``; KDA: float32) else the conv dtype. `dtype` overrides the model dtype (--dtype).
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if not isinstance(tp, int) or tp < 1:
        raise UsageError(f"tensor-parallel size must be a positive integer, got {tp!r}")
    cfg, where = load_config(config)
    try:
        layout, fields = read_layout(cfg, tp, where)
    except UsageError as e:  # sharding errors: say which model they are about
        raise UsageError(f"{name or where}: {e}") from None
    from_path = Path(where).parent.name if where != "config" else None
    label = (
        name
        or cfg.get("_name_or_path")
        or from_path
        or (cfg.get("architectures") or [fields["model_type"]])[0]
    )
    if engine == "sglang" and layout.sglang_radix == "unsupported":
        raise UnsupportedOnEngine(f"{label}: SGLang has no {layout.family} model (doc A3); use engine='vllm'")
    all_notes = list(notes) + layout.notes
    model_dtype = _model_dtype(fields, dtype, all_notes)
    kv_set = explicit(kv_cache_dtype)
    kv_dtype = model_dtype if kv_set is None else canonical_dtype(kv_set)
    conv_dtype, ssm_dtype = _state_dtypes(
        engine, layout, fields, model_dtype, mamba_conv_dtype, mamba_ssm_dtype
    )
    b_kv = dtype_bytes(kv_dtype)
    per_layer = layout.mla_dim * b_kv if layout.mla_dim else 2 * layout.kv_heads * layout.head_dim * b_kv
    layers = {"full_attention": layout.n_full}
    if layout.state_kind:
        layers[layout.state_kind] = layout.n_state
    if layout.n_sliding:
        layers["sliding_attention"] = layout.n_sliding
    conv_bytes = layout.n_state * layout.conv_elems * (dtype_bytes(conv_dtype) if conv_dtype else 0)
    ssm_bytes = layout.n_state * layout.ssm_elems * (dtype_bytes(ssm_dtype) if ssm_dtype else 0)
    return ModelProfile(
        name=label,
        family=layout.family,
        model_type=fields["model_type"],
        engine=engine,
        tp=tp,
        n_layers=layout.n_layers,
        layers=layers,
        state_kind=layout.state_kind,
        kv_bytes_per_token=layout.n_full * per_layer,
        swa_kv_bytes_per_token=layout.n_sliding * per_layer,
        sliding_window=layout.sliding_window,
        conv_bytes_per_slot=conv_bytes,
        ssm_bytes_per_slot=ssm_bytes,
        model_dtype=model_dtype,
        kv_dtype=kv_dtype,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
        mla=bool(layout.mla_dim),
        sglang_radix=layout.sglang_radix,
        notes=tuple(all_notes),
    )
