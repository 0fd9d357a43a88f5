"""The feature-threshold catalogue: engine features that switch on at a threshold, read from TOML
(`catalogue.toml` in this package, then user files) and from `--threshold "id: quantity > value"` specs.
A feature names the quantity it compares, the flag or startup fact that sets its threshold, its defaults
(by engine version and GPU), and how it can be counted from logs (memory-and-thresholds.md Part B).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attribution.errors import UsageError

PACKAGE_FILE = Path(__file__).resolve().parent / "catalogue.toml"

# What a feature can be compared on, by scope, and what each quantity means.
QUANTITIES: dict[str, tuple[str, str]] = {
    "prompt_tokens": ("request", "prompt tokens (cached + uncached)"),
    "uncached_prompt_tokens": ("request", "prompt - cached tokens: what the engine computes at prefill"),
    "kv_len_at_prefill": ("request", "KV length at prefill = cached + new tokens = the prompt"),
    "peak_kv_len": ("request", "prompt + output tokens: the KV length at the last decode step"),
    "output_tokens": ("request", "output tokens"),
    "cached_tokens": ("request", "prompt tokens served from the prefix cache"),
    "decode_batch_size": ("step", "requests in a decode batch (SGLang decode lines; vLLM: running requests "
                                  "of the periodic line, an estimate)"),
    "running_requests": ("step", "running requests in a step or periodic line"),
    "prefill_batch_tokens": ("step", "new tokens in a prefill batch (SGLang prefill lines)"),
    "step_tokens": ("step", "tokens processed in a step (prefill: new tokens; decode: one per request)"),
    "state_usage": ("step", "hybrid state (mamba) pool usage, 0-1"),
    "kv_usage": ("step", "KV pool usage, 0-1"),
    "waiting_requests": ("step", "queued requests"),
    "preemptions": ("step", "preemptions in the interval"),
    "max_model_len": ("deployment", "the deployment's context length"),
    "none": ("", "not countable from the logs"),
}
OPS = (">", ">=", "<", "<=")
SCOPES = ("request", "step", "deployment")
ENABLED = ("always", "flag", "threshold", "unknown")
RULE_KEYS = {"value", "note", "gpu_mem_gib_min", "gpu_mem_gib_max", "gpu_is_a100", "tp_min", "tp_max",
             "version_min", "version_max"}
_KEYS = {
    "id", "engine", "title", "effect", "flag", "cli", "fact", "quantity", "op", "scope", "enabled",
    "enable_flag", "disable_flag", "enabled_default", "default", "model_field", "requires", "model_types",
    "versions", "count_from", "source", "ref", "notes", "unverified",
}  # fmt: skip
_NUM = r"[0-9][0-9_,]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_SPEC_FULL = re.compile(rf"^\s*([A-Za-z][\w.\-]*)\s*:\s*([a-z_]+)\s*(>=|<=|>|<)\s*({_NUM})\s*$")
_SPEC_VALUE = re.compile(rf"^\s*([A-Za-z][\w.\-]*)\s*(>=|<=|>|<|=)\s*({_NUM})\s*$")


@dataclass(frozen=True)
class Rule:
    """One default: `value` (a number or an expression) when every condition holds."""

    value: float | str
    note: str = ""
    conditions: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Feature:
    id: str
    engines: tuple[str, ...]  # ("any",) applies to every engine
    title: str
    quantity: str
    op: str
    scope: str
    effect: str = ""
    flag: str | None = None
    cli: str | None = None
    fact: str | None = None
    enabled: str = "always"
    enable_flag: str | None = None
    disable_flag: str | None = None
    enabled_default: bool = True
    default: tuple[Rule, ...] = ()
    model_field: str | None = None
    requires: str | None = None  # hybrid | mla
    model_types: tuple[str, ...] = ()
    version_min: str | None = None
    version_max: str | None = None
    count_from: str = ""
    source: str = ""
    ref: str = ""
    notes: tuple[str, ...] = ()
    unverified: bool = False
    override: float | None = None  # a user's --threshold for this feature: wins over everything
    origin: str = "catalogue"

    def applies_to(self, engine: str | None) -> bool:
        return "any" in self.engines or (engine is not None and engine in self.engines)

    @property
    def countable(self) -> bool:
        return self.quantity != "none"

    def describe(self) -> str:
        return f"{self.quantity} {self.op} threshold"


@dataclass
class Catalogue:
    features: dict[str, Feature]
    assume: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Feature]:
        return iter(self.features.values())

    def __len__(self) -> int:
        return len(self.features)

    def select(self, patterns: list[str] | None) -> Catalogue:
        """Only the features whose id matches one of `patterns` (exact, a prefix ending in `.`, or a glob)."""
        if not patterns:
            return self
        import fnmatch

        keep = {k: f for k, f in self.features.items()
                if any(k == p or fnmatch.fnmatch(k, p) or (p.endswith(".") and k.startswith(p)) for p in patterns)}
        if not keep:
            raise UsageError(f"no feature matches {', '.join(patterns)} (see `attribution thresholds --list`)")
        return Catalogue(keep, self.assume, self.files)


def _rules(raw: Any, where: str) -> tuple[Rule, ...]:
    if raw is None:
        return ()
    if isinstance(raw, int | float | str) and not isinstance(raw, bool):
        return (Rule(raw),)
    if not isinstance(raw, list):
        raise UsageError(f"{where}: `default` must be a number, an expression or a list of rules")
    out = []
    for r in raw:
        if not isinstance(r, dict) or "value" not in r or set(r) - RULE_KEYS:
            raise UsageError(f"{where}: a default rule needs `value` and only {', '.join(sorted(RULE_KEYS))}")
        conds = tuple((k, v) for k, v in r.items() if k not in ("value", "note"))
        out.append(Rule(r["value"], r.get("note", ""), conds))
    return tuple(out)


def feature_from_dict(d: dict[str, Any], where: str, origin: str = "catalogue") -> Feature:
    unknown = sorted(set(d) - _KEYS)
    fid = d.get("id")
    if not fid or unknown:
        raise UsageError(f"{where}: a [[feature]] needs an `id`" + (f"; unknown keys: {', '.join(unknown)}"
                                                                      if unknown else ""))
    where = f"{where} feature {fid}"
    quantity = d.get("quantity", "none")
    if quantity not in QUANTITIES:
        raise UsageError(f"{where}: quantity {quantity!r} is not one of {', '.join(QUANTITIES)}")
    scope = d.get("scope", QUANTITIES[quantity][0] or "request")
    op = d.get("op", ">")
    enabled = d.get("enabled", "always")
    if scope not in SCOPES or op not in OPS or enabled not in ENABLED:
        raise UsageError(f"{where}: scope must be one of {SCOPES}, op one of {OPS}, enabled one of {ENABLED}")
    if quantity != "none" and QUANTITIES[quantity][0] != scope:
        raise UsageError(f"{where}: quantity {quantity} is {QUANTITIES[quantity][0]}-scoped, not {scope}")
    engines = d.get("engine", "any")
    engines = tuple(engines) if isinstance(engines, list) else (engines,)
    versions = d.get("versions", {})
    return Feature(
        id=fid, engines=engines, title=d.get("title", fid), quantity=quantity, op=op, scope=scope,
        effect=d.get("effect", ""), flag=d.get("flag"), cli=d.get("cli"), fact=d.get("fact"), enabled=enabled,
        enable_flag=d.get("enable_flag"), disable_flag=d.get("disable_flag"),
        enabled_default=bool(d.get("enabled_default", True)), default=_rules(d.get("default"), where),
        model_field=d.get("model_field"), requires=d.get("requires"), model_types=tuple(d.get("model_types", ())),
        version_min=versions.get("min"), version_max=versions.get("max"), count_from=d.get("count_from", ""),
        source=d.get("source", ""), ref=d.get("ref", ""), notes=tuple(d.get("notes", ())),
        unverified=bool(d.get("unverified", False)), origin=origin,
    )  # fmt: skip


def _read(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the feature catalogue ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    feats = doc.get("feature", [])
    if not isinstance(feats, list):
        raise UsageError(f"{path}: features are a list of [[feature]] tables")
    return feats, doc.get("assume", {})


def parse_threshold(spec: str, known: dict[str, Feature] | None = None) -> Feature:
    """`"sparse_prefill: kv_len_at_prefill > 95000"` defines a feature (engine any, request or step scope
    from the quantity); `"vllm.chunked_prefill = 16384"` (or `> 16384`) overrides a known feature's
    threshold for every deployment."""
    known = known or {}
    if m := _SPEC_FULL.match(spec):
        fid, quantity, op, value = m.groups()
        if quantity not in QUANTITIES or quantity == "none":
            raise UsageError(f"--threshold {spec!r}: unknown quantity {quantity!r} "
                             f"(one of {', '.join(q for q in QUANTITIES if q != 'none')})")
        base = known.get(fid)
        if base is not None and base.quantity != quantity:
            raise UsageError(f"--threshold {spec!r}: {fid} compares {base.quantity}, not {quantity}")
        if base is not None:
            return replace(base, op=op, override=_number(value), origin="--threshold")
        return Feature(id=fid, engines=("any",), title=f"{fid} (user threshold)", quantity=quantity, op=op,
                       scope=QUANTITIES[quantity][0], enabled="unknown", override=_number(value),
                       count_from="R" if QUANTITIES[quantity][0] == "request" else "S",
                       source="--threshold", origin="--threshold")
    if m := _SPEC_VALUE.match(spec):
        fid, op, value = m.groups()
        if fid not in known:
            raise UsageError(f"--threshold {spec!r}: no feature {fid!r}; define one as "
                             f"\"{fid}: QUANTITY {op if op != '=' else '>'} {value}\"")
        base = known[fid]
        return replace(base, op=base.op if op == "=" else op, override=_number(value), origin="--threshold")
    raise UsageError(f"--threshold {spec!r}: expected \"NAME: QUANTITY OP VALUE\" (e.g. \"sparse_prefill: "
                     "kv_len_at_prefill > 95000\") or \"KNOWN_FEATURE = VALUE\"")


def _number(text: str) -> float:
    return float(text.replace("_", "").replace(",", ""))


def load_catalogue(files: list[str | Path] | None = None, specs: list[str] | None = None) -> Catalogue:
    """The package catalogue, then each user file (a feature with a known id replaces it; [assume] keys
    replace the package's), then each `--threshold` spec."""
    feats, assume = _read(PACKAGE_FILE)
    cat = Catalogue({}, dict(assume), [str(PACKAGE_FILE)])
    for d in feats:
        f = feature_from_dict(d, str(PACKAGE_FILE))
        cat.features[f.id] = f
    for path in files or []:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"{p}: no such catalogue file")
        extra, extra_assume = _read(p)
        cat.assume.update(extra_assume)
        cat.files.append(str(p))
        for d in extra:
            f = feature_from_dict(d, str(p), origin=str(p))
            cat.features[f.id] = f
    for spec in specs or []:
        f = parse_threshold(spec, cat.features)
        cat.features[f.id] = f
    return cat
