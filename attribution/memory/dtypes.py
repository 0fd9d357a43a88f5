"""Cache dtype names as the engines' flags and HF configs spell them, and their sizes in bytes.

Used for `--kv-cache-dtype`, SGLang `--mamba-ssm-dtype` / `SGLANG_MAMBA_CONV_DTYPE`, vLLM
`--mamba-cache-dtype` / `--mamba-ssm-cache-dtype` and the config's `torch_dtype`.
"""

from __future__ import annotations

from attribution.errors import UsageError

_CANONICAL = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
}
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def canonical_dtype(name: str) -> str:
    """``'bf16'``, ``'torch.bfloat16'``, ``'BFloat16'`` -> ``'bfloat16'``; unknown names raise."""
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in _CANONICAL:
        raise UsageError(f"unknown dtype {name!r}; expected one of {', '.join(sorted(set(_CANONICAL)))}")
    return _CANONICAL[key]


def dtype_bytes(name: str) -> int:
    """Bytes per element of a cache dtype (fp8 variants are 1 byte)."""
    return _BYTES[canonical_dtype(name)]


def is_auto(name: str | None) -> bool:
    """True for an unset flag or the engines' ``auto`` value."""
    return name is None or str(name).strip().lower() == "auto"


def explicit(name: str | None) -> str | None:
    """A dtype flag's value, None when it is unset or ``auto``."""
    return None if is_auto(name) else name
