"""Bundled model presets (`presets/*.toml`: a name, aliases, and the config.json architecture fields) and
`load_profile`, which accepts a preset name, an alias, a Hugging Face repo id, or a path to a config.json.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from attribution.memory.errors import ModelConfigError, UnknownPreset
from attribution.memory.profile import ModelProfile, from_hf_config

PRESET_DIR = Path(__file__).resolve().parent / "presets"
_KEYS = {"name", "hf_repo", "aliases", "source", "notes", "config"}


@dataclass(frozen=True)
class Preset:
    name: str
    config: dict[str, Any]
    aliases: tuple[str, ...] = ()
    hf_repo: str | None = None
    source: str = ""
    notes: tuple[str, ...] = ()
    path: Path | None = None


def normalize(name: str) -> str:
    """Case-insensitive, org prefix dropped: ``Qwen/Qwen3.5-35B-A3B`` -> ``qwen3.5-35b-a3b``."""
    return name.strip().rsplit("/", 1)[-1].lower().replace("_", "-").replace(" ", "-")


def _read(path: Path) -> Preset:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ModelConfigError(f"{path}: invalid TOML ({e})") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown or "name" not in data or not isinstance(data.get("config"), dict):
        raise ModelConfigError(
            f"{path}: a preset needs `name` and a [config] table of config.json fields "
            f"(allowed keys: {', '.join(sorted(_KEYS))}; unknown: {unknown})"
        )
    return Preset(
        name=data["name"],
        config=data["config"],
        aliases=tuple(data.get("aliases", ())),
        hf_repo=data.get("hf_repo"),
        source=data.get("source", ""),
        notes=tuple(data.get("notes", ())),
        path=path,
    )


@cache
def presets() -> dict[str, Preset]:
    """Every lookup key (name, aliases, repo id, file stem; normalised) -> its preset."""
    index: dict[str, Preset] = {}
    for path in sorted(PRESET_DIR.glob("*.toml")):
        preset = _read(path)
        keys = {normalize(k) for k in (preset.name, path.stem, *preset.aliases, preset.hf_repo or "") if k}
        for key in keys:
            if key in index and index[key].path != path:
                raise ModelConfigError(f"{path}: preset key {key!r} is also used by {index[key].path}")
            index[key] = preset
    return index


def list_presets() -> list[str]:
    """The bundled preset names, sorted."""
    return sorted({p.name for p in presets().values()}, key=str.lower)


def get_preset(name: str) -> Preset:
    """A preset by name, alias or repo id (case-insensitive); unknown names suggest close ones."""
    index = presets()
    key = normalize(name)
    if key in index:
        return index[key]
    close = difflib.get_close_matches(key, list(index), n=5, cutoff=0.6)
    names = list(dict.fromkeys(index[c].name for c in close))[:3]
    hint = f"; did you mean {', '.join(names)}?" if names else ""
    raise UnknownPreset(
        f"no model preset {name!r}{hint} Known presets: {', '.join(list_presets())}. "
        "A path to a config.json also works."
    )


def load_profile(
    name_or_path: str | Path, *, engine: str = "sglang", tp: int = 1, **flags: Any
) -> ModelProfile:
    """A `ModelProfile` from a preset name or a config.json path; `flags` go to `from_hf_config`."""
    path = Path(name_or_path)
    if path.exists():
        return from_hf_config(path, engine=engine, tp=tp, **flags)
    if str(name_or_path).endswith(".json"):
        raise ModelConfigError(f"{name_or_path}: no such config file")
    preset = get_preset(str(name_or_path))
    return from_hf_config(preset.config, engine=engine, tp=tp, name=preset.name, notes=preset.notes, **flags)
