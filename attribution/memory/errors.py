"""Errors of the memory model: a config the tool cannot size, a preset it does not know, a model the engine
does not serve. All are `AttributionError`s, so the CLI maps them to its documented exit codes.
"""

from __future__ import annotations

from attribution.errors import InputError, UsageError


class ModelConfigError(InputError):
    """A model config.json is unreadable, or lacks fields that the sizing formulas need."""


class UnknownArchitecture(ModelConfigError):
    """The config's ``model_type`` is not one of the architectures the memory model knows."""


class UnknownPreset(UsageError):
    """A preset name that is neither a bundled preset, an alias, nor a path to a config.json."""


class UnsupportedOnEngine(UsageError):
    """The engine has no implementation of this architecture (e.g. Jamba or MiniMax-Text-01 on SGLang)."""
