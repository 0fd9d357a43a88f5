"""Effective feature settings per engine start: whether each catalogue feature was on and at which
threshold, from what the engine printed at startup (`engine_config` flags and facts), the model's config
(bundled presets) and the engine's defaults for its version and GPU. Every value says where it came from,
and what the logs did not say is taken from the catalogue's [assume] table and reported as assumed.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from functools import cache
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from attribution import queries
from attribution.thresholds.catalogue import Catalogue, Feature, Rule

if TYPE_CHECKING:
    from attribution.schema import PolarsType

FALLBACK_ENGINES = ("vllm", "sglang", "unknown")  # config ids `default:<engine>` for requests without a start
COLUMNS: dict[str, PolarsType] = {
    "config_id": pl.Utf8, "deployment": pl.Utf8, "engine": pl.Utf8, "version": pl.Utf8, "model": pl.Utf8,
    "start_ts": pl.Datetime("us", "UTC"), "feature": pl.Utf8, "title": pl.Utf8, "quantity": pl.Utf8,
    "op": pl.Utf8, "scope": pl.Utf8, "status": pl.Utf8, "threshold": pl.Float64, "threshold_source": pl.Utf8,
    "assumed": pl.Utf8, "evaluate": pl.Boolean, "deployment_crossed": pl.Boolean, "count_from": pl.Utf8,
}  # fmt: skip
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv}
_FACTS = ("max_model_len", "max_running_requests", "chunked_prefill_size", "max_prefill_tokens", "block_size",
          "kv_pool_tokens", "state_pool_slots", "tp_size")


def version_tuple(v: str | None) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+(?:\.\d+)*)", v.strip()) if v else None
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def parse_value(raw: Any) -> Any:
    """A stored flag value (a string: JSON, a Python literal, or text) as a Python value; None for unset."""
    if raw is None or not isinstance(raw, str):
        return raw
    s = raw.strip()
    if s in ("None", "null", ""):
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(s)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            continue
    return s


def flag_value(flags: dict[str, Any], name: str | None) -> Any:
    """A flag by name; `a.b` reads key b of flag a's dict value (e.g. compilation_config)."""
    if not name:
        return None
    if name in flags:
        return parse_value(flags[name])
    head, _, rest = name.partition(".")
    if rest and head in flags:
        inner = parse_value(flags[head])
        if isinstance(inner, dict):
            return parse_value(inner.get(rest)) if isinstance(inner.get(rest), str) else inner.get(rest)
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def _truthy(v: Any) -> bool | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return v != 0
    return str(v).strip().lower() in ("true", "1", "yes", "on")


class _Unknown(Exception):
    pass


def evaluate_expression(expr: str, names: dict[str, float]) -> float:
    """Arithmetic over known names with min/max; raises _Unknown naming a value the logs did not give."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise _Unknown(node.id)
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return float(_BIN[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            vals = [ev(a) for a in node.args]
            return min(vals) if node.func.id == "min" else max(vals)
        raise ValueError(f"unsupported expression {expr!r}")

    return ev(ast.parse(expr, mode="eval").body)


@cache
def model_info(model: str | None) -> dict[str, Any]:
    """What the bundled presets say about a model: hybrid (has a recurrent state), mla, model_type and the
    raw config.json fields; empty when the model is not a known preset."""
    if not model:
        return {}
    from attribution.memory.catalog import get_preset, load_profile

    try:
        preset = get_preset(model)
        prof = load_profile(model)
    except Exception:  # an unknown name, or a preset the memory model cannot read: nothing known
        return {}
    cfg = preset.config
    text = cfg.get("text_config", {}) if isinstance(cfg.get("text_config"), dict) else {}
    return {"preset": preset.name, "hybrid": prof.state_kind is not None, "mla": prof.mla,
            "model_type": cfg.get("model_type") or text.get("model_type"), "config": {**cfg, **text},
            "sliding_window": prof.sliding_window}


def _model_field(info: dict[str, Any], path: str) -> float | None:
    cur: Any = info.get("config", {})
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return _number(cur)


class _Start:
    """One engine start's context: flags, facts, version, GPU and the assumptions used about them."""

    def __init__(self, row: dict[str, Any], assume: dict[str, Any], gpu_mem_gib: float | None,
                 tp_size: int | None) -> None:
        self.row = row
        self.engine = row.get("engine") or "unknown"
        raw_flags = row.get("flags") or {}
        if isinstance(raw_flags, list):  # a MAP arrives as key/value structs
            raw_flags = {kv["key"]: kv["value"] for kv in raw_flags}
        self.flags = dict(raw_flags)
        self.facts = {k: float(row[k]) for k in _FACTS if row.get(k) is not None}
        self.model = info = model_info(row.get("model"))
        self.hybrid = bool(row.get("state_pool_slots") or row.get("mamba_page_padding") or info.get("hybrid")
                           or any(k.startswith("mamba") for k in self.flags))
        self.assumed: list[str] = []
        self.assume = assume
        self._gpu = gpu_mem_gib
        tp = tp_size or self.facts.get("tp_size") or _number(flag_value(self.flags, "tp_size")) \
            or _number(flag_value(self.flags, "tensor_parallel_size"))
        self._tp = tp
        self.version = row.get("version")
        self._version = version_tuple(self.version)

    def fact(self, key: str, what: str) -> Any:
        """A context value, recording the assumption when the logs did not give it."""
        if key == "gpu_mem_gib" and self._gpu is not None:
            return self._gpu
        if key == "tp_size" and self._tp is not None:
            return self._tp
        if key == "version" and self._version is not None:
            return self._version
        if key == "version":
            v = self.assume.get(f"{self.engine}_version")
            if v is None:
                return None
            self._note(f"{self.engine} version {v}")
            return version_tuple(v)
        v = self.assume.get(key)
        if v is not None:
            self._note(what.format(v=v))
        return v

    def _note(self, text: str) -> None:
        if text not in self.assumed:
            self.assumed.append(text)


def _rule_holds(rule: Rule, st: _Start) -> bool:
    for key, want in rule.conditions:
        if key.startswith("gpu_mem_gib"):
            have = st.fact("gpu_mem_gib", "GPU memory {v} GiB")
        elif key == "gpu_is_a100":
            have = st.fact("gpu_is_a100", "GPU is A100: {v}")
        elif key.startswith("tp_"):
            have = st.fact("tp_size", "tensor parallel {v}")
        else:
            have = st.fact("version", "")
            want = version_tuple(str(want))
        if have is None:
            return False
        if key.endswith("_min") and not have >= want:
            return False
        if key.endswith("_max") and not have < want:
            return False
        if key == "gpu_is_a100" and bool(have) != bool(want):
            return False
    return True


def _threshold(f: Feature, st: _Start, names: dict[str, float]) -> tuple[float | None, str]:
    if f.override is not None:
        return f.override, f"{f.origin}"
    if f.fact and f.fact in st.facts:
        return st.facts[f.fact], f"printed by the engine at startup ({f.fact})"
    v = _number(flag_value(st.flags, f.flag))
    if v is not None:
        return v, f"flag {f.flag}={v:g}"
    if f.model_field:
        mv = _model_field(st.model, f.model_field) if st.model else None
        if mv is None and f.model_field == "sliding_window":
            mv = _number(st.model.get("sliding_window"))
        if mv is not None:
            return mv, f"model config {f.model_field} (preset {st.model['preset']})"
    for rule in f.default:
        if not _rule_holds(rule, st):
            continue
        if isinstance(rule.value, str):
            try:
                val = evaluate_expression(rule.value, names)
            except _Unknown as exc:
                return None, f"default {rule.value} needs {exc.args[0]}, which the logs do not give"
            return val, f"default {rule.value} = {val:g}" + (f" ({rule.note})" if rule.note else "")
        return float(rule.value), "default" + (f" ({rule.note})" if rule.note else "")
    if f.model_field and st.model:
        return None, f"the model's config has no {f.model_field}"
    if f.model_field:
        return None, f"needs the model's {f.model_field} (the model is not a bundled preset): give --threshold"
    return None, "not set"


def _status(f: Feature, st: _Start, threshold: float | None) -> str:
    ver = st.fact("version", "")
    if ver is not None and ((f.version_min and ver < version_tuple(f.version_min))
                            or (f.version_max and ver >= version_tuple(f.version_max))):
        return "not in version"
    if f.requires == "hybrid" and not st.hybrid:
        return "not applicable"
    if f.requires == "mla" and not st.model.get("mla"):
        return "not applicable"
    if f.model_types and st.model.get("model_type") not in f.model_types:
        return "not applicable"
    if f.model_field and threshold is None and f.override is None:
        # a known model without the field does not have the mechanism; an unknown model might
        return "not applicable" if st.model else "unknown"
    if f.override is not None and f.enabled in ("threshold", "unknown"):
        return "on" if f.enabled == "threshold" else "unknown"
    if f.enabled == "unknown":
        return "unknown"
    if f.enabled == "threshold":
        return "on" if threshold is not None and threshold > 0 else "off"
    if f.enabled == "flag":
        if _truthy(flag_value(st.flags, f.disable_flag)):
            return "off"
        on = _truthy(flag_value(st.flags, f.enable_flag)) if f.enable_flag else None
        if f.enable_flag == "max_num_partial_prefills":  # on only above one partial prefill (V0)
            n = _number(flag_value(st.flags, f.enable_flag))
            on = None if n is None else n > 1
        return "on" if (f.enabled_default if on is None else on) else "off"
    return "on"


def settings_for_start(row: dict[str, Any], catalogue: Catalogue, *, gpu_mem_gib: float | None = None,
                       tp_size: int | None = None) -> list[dict[str, Any]]:
    """One settings row per catalogue feature that applies to this start's engine."""
    st = _Start(row, catalogue.assume, gpu_mem_gib, tp_size)
    names = {**st.facts, **{k: v for k, v in ((k, _number(parse_value(x))) for k, x in st.flags.items())
                            if v is not None}}
    feats = [f for f in catalogue if f.applies_to(st.engine if st.engine != "unknown" else None)]
    out: dict[str, dict[str, Any]] = {}
    # Expressions may name another feature's flag (max_num_seqs): resolve plain values first.
    for f in sorted(feats, key=lambda f: any(isinstance(r.value, str) for r in f.default)):
        st.assumed = []
        thr, src = _threshold(f, st, names)
        if thr is not None and f.flag and f.flag not in names:
            names[f.flag] = thr
        status = _status(f, st, thr)
        if not f.countable:
            status = "not countable" if status in ("on", "unknown") else status
        crossed = None
        if f.scope == "deployment" and thr is not None and f.quantity in st.facts:
            crossed = _OPS[f.op](st.facts[f.quantity], thr)
        out[f.id] = {
            "config_id": row["config_id"], "deployment": row.get("deployment"), "engine": row.get("engine"),
            "version": row.get("version"), "model": row.get("model"), "start_ts": row.get("ts"),
            "feature": f.id, "title": f.title, "quantity": f.quantity, "op": f.op, "scope": f.scope,
            "status": status, "threshold": thr, "threshold_source": src, "assumed": "; ".join(st.assumed),
            "evaluate": status in ("on", "unknown") and thr is not None
            and (f.scope != "deployment" or crossed is not None),
            "deployment_crossed": crossed, "count_from": f.count_from,
        }  # fmt: skip
    return [out[f.id] for f in feats]


def engine_starts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return queries.run(con, "engine_starts")


def effective_settings(starts: pl.DataFrame, catalogue: Catalogue, *, gpu_mem_gib: float | None = None,
                       tp_size: int | None = None) -> pl.DataFrame:
    """One row per (engine start, applicable feature), plus rows for the fallback config ids
    `default:vllm`, `default:sglang` and `default:unknown` that requests without a known start use."""
    rows: list[dict[str, Any]] = []
    for row in starts.iter_rows(named=True):
        rows += settings_for_start(row, catalogue, gpu_mem_gib=gpu_mem_gib, tp_size=tp_size)
    for eng in FALLBACK_ENGINES:
        rows += settings_for_start({"config_id": f"default:{eng}", "engine": None if eng == "unknown" else eng},
                                   catalogue, gpu_mem_gib=gpu_mem_gib, tp_size=tp_size)
    return pl.DataFrame(rows, schema=COLUMNS)
