"""Settings (SLO, GPU-hour cost, model profile, workload names, report options) resolved in one function,
`load_settings`, with one precedence: a command-line flag, else the environment (`ATTRIBUTION_<KEY>`), else
the config file (`--config FILE`, else $ATTRIBUTION_CONFIG, else the nearest `attribution.toml` or
`pyproject.toml` with a `[tool.attribution]` table, from the working directory up), else the default.
Every value remembers where it came from (`Settings.sources`), so a report can say so. This module is the
only reader of the environment: the process-level knobs (`ATTRIBUTION_JOBS`, `ATTRIBUTION_CHUNK_BYTES`, ...)
are read through `env`, `env_int` and `env_float`, and a bad value is a usage error, never a crash.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from attribution.errors import UsageError

ENV_PREFIX = "ATTRIBUTION_"
CONFIG_NAME = "attribution.toml"
_SPLIT_RE = re.compile(r"[,\s]+")
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
ENGINES = ("duckdb", "spark")  # where analyses run (--engine, $ATTRIBUTION_ENGINE)
GROUPINGS = ("workload", "model", "deployment", "label", "day", "version", "all")  # analyses.GroupBy's values


@dataclass(frozen=True)
class Settings:
    """What the report (and any front end) needs beyond the store's own data. Paths are absolute once
    resolved (a relative path in a config file is relative to that file)."""

    store: str | None = None            # store directory (after --store and $ATTRIBUTION_STORE)
    slo: tuple[str, ...] = ()           # joint SLO terms, e.g. ("ttft=0.5", "tpot=50ms")
    slo_preset: str | None = None       # else a named SLO from presets.toml (default: chat)
    gpu_hour_cost: float | None = None  # price of one GPU-hour, for cost per million tokens
    gpus_per_pod: int | None = None     # default: the engine's tensor-parallel size, else 1
    prefill_tokens_per_s: float | None = None  # cache economics: prefill rate (default: measured per deployment)
    input_price: float | None = None    # cache economics: API input price, USD per million tokens
    cache_pricing: str | None = None    # cached-input price: a preset of cache/prices.toml or a read ratio (0.1)
    model: str | None = None            # model profile for memsplit (preset or config.json path)
    workloads: dict[str, str] | str | None = None  # key hash / alias / team -> name, or a workloads.toml
    window: str = "7d"                  # report window when no --since/--from is given
    by: str = "workload"                # grouping of the per-group tables (report, dashboard, every --by)
    resamples: int = 200                # bootstrap resamples for the week-over-week comparisons
    tolerance: float = 0.05             # smallest change called material (0.05 = 5%)
    alpha: float = 0.05                 # family-wise false-alarm rate of the report's latency alarms (Holm)
    drift_threshold: float = 0.1        # distance between length distributions reported as drift
    drift_share: float = 0.05           # share of a window's requests a new or vanished workload must carry
    drift_share_change: float = 0.05    # change of a workload's share of requests reported as drift
    drift_rate: float = 0.5             # arrival-rate change reported as drift (0.5: x1.5 or /1.5)
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES  # latency/length/concurrency percentiles shown
    gap_minutes: float = 120.0          # silence in a pod's logs reported as a gap
    ceiling_share: float = 0.05         # share of busy time at the running limit reported as a ceiling
    tz: str = "UTC"                     # zone of the hour-of-day and weekday profiles (arrivals)
    whatif: bool = False                # replay the arrivals under the recommended memory split (slow)
    max_future: str = "1d"              # ingest: latest admissible timestamp, this span after the ingest's clock
    # ingest of Prometheus exports and /metrics snapshots: the labels naming a deployment, first present wins
    # (in a file: `[prometheus] deployment_labels = [...]`, or the top-level key)
    deployment_labels: tuple[str, ...] = ("pod", "instance")
    catalogue: tuple[str, ...] = ()     # more feature catalogue TOML files
    thresholds: tuple[str, ...] = ()    # more or changed feature thresholds ("name: quantity > N")
    engine: str = "duckdb"              # where analyses (and `ingest --engine spark`) run: duckdb or spark
    spark_master: str | None = None     # Spark master URL for --engine spark (default local[*])
    spark_conf: tuple[str, ...] = ()    # Spark settings for --engine spark, "key=value" each
    config_file: str | None = None      # the file the settings were read from, if any
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # key -> flag / env / file / default

    def public(self) -> dict[str, Any]:
        """The settings as plain data, without the store path and file locations (for report output)."""
        # (max_future and deployment_labels are the ingest's, not the report's)
        skip = {"store", "config_file", "sources", "max_future", "deployment_labels"}
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in skip}


KEYS = tuple(f.name for f in fields(Settings) if f.name not in ("config_file", "sources"))
_PATH_KEYS = {"store", "model", "workloads", "catalogue"}


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def find_config(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """$ATTRIBUTION_CONFIG, else the nearest attribution.toml or pyproject.toml holding [tool.attribution] in
    `cwd` or a parent (attribution.toml first within one directory)."""
    env = os.environ if env is None else env
    if explicit := env.get(f"{ENV_PREFIX}CONFIG"):
        return Path(explicit)
    here = (cwd or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / CONFIG_NAME).is_file():
            return d / CONFIG_NAME
        py = d / "pyproject.toml"
        if py.is_file() and "attribution" in _read_toml(py).get("tool", {}):
            return py
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return copy.deepcopy(_parsed(path.read_text()))  # (a copy: callers may change what they are given)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such config file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: not a readable TOML file ({exc})") from None


@lru_cache(maxsize=32)
def _parsed(text: str) -> dict[str, Any]:
    """A TOML text parsed, once per process for a given text: every ingest and command resolves the settings,
    which parses the project's pyproject.toml (~2 ms); reading the file is what tells a changed one."""
    return tomllib.loads(text)


def read_config(path: Path) -> dict[str, Any]:
    """The settings table of a config file: `[tool.attribution]` of a pyproject.toml, else the top level."""
    doc = _read_toml(path)
    table = doc.get("tool", {}).get("attribution", {}) if path.name == "pyproject.toml" else doc
    prom = table.get("prometheus")
    if isinstance(prom, Mapping):  # `[prometheus]`: the settings of the Prometheus sources
        table = {k: v for k, v in table.items() if k != "prometheus"}
        extra = sorted(set(prom) - {"deployment_labels"})
        if extra:
            raise UsageError(f"{path}: unknown setting prometheus.{', prometheus.'.join(extra)} "
                             "(known: prometheus.deployment_labels)")
        if "deployment_labels" in prom:
            table["deployment_labels"] = prom["deployment_labels"]
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(f"{path}: unknown setting {', '.join(unknown)} (known: {', '.join(KEYS)})")
    return table


def _coerce(key: str, value: Any, where: str, base: Path | None) -> Any:
    """Check and convert one value to the type of the Settings field; resolve relative paths against `base`."""
    try:
        if key in ("slo", "catalogue", "thresholds", "spark_conf") and not isinstance(value, (str, list, tuple)):
            raise ValueError("a string or a list of strings")
        if key == "spark_conf":
            pairs = [value] if isinstance(value, str) else [str(x) for x in value]
            if not all("=" in x and x.partition("=")[0].strip() for x in pairs):
                raise ValueError("key=value strings, e.g. [\"spark.executor.memory=8g\"]")
            return tuple(x.strip() for x in pairs)
        if key == "engine":
            if str(value).strip().lower() not in ENGINES:
                raise ValueError(f"one of {', '.join(ENGINES)}")
            return str(value).strip().lower()
        if key in ("slo", "catalogue", "thresholds"):
            items = _SPLIT_RE.split(value.strip()) if isinstance(value, str) and key == "slo" else (
                [value] if isinstance(value, str) else list(value))
            out = tuple(str(x) for x in items if str(x).strip())
            return tuple(_path(x, base) for x in out) if key == "catalogue" else out
        if key == "workloads":
            if isinstance(value, Mapping):
                if not all(isinstance(v, str) for v in value.values()):
                    raise ValueError("a table of \"key hash, alias or team\" = \"name\"")
                return {str(k): v for k, v in value.items()}
            return _path(str(value), base)
        if key == "percentiles":
            return parse_percentiles(value)
        if key == "by":
            if str(value).strip() not in GROUPINGS:
                raise ValueError(f"one of {', '.join(GROUPINGS)}")
            return str(value).strip()
        if key in ("gpu_hour_cost", "prefill_tokens_per_s", "input_price", "tolerance", "drift_threshold", "gap_minutes", "drift_share",
                   "drift_share_change", "drift_rate", "ceiling_share"):
            v = float(value)
            if v < 0 or v != v:
                raise ValueError("a number >= 0")
            return v
        if key == "alpha":
            v = float(value)
            if not 0 < v < 1:
                raise ValueError("a number between 0 and 1")
            return v
        if key in ("gpus_per_pod", "resamples"):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("a whole number")
            v = int(value)
            if v < 1:
                raise ValueError("a whole number >= 1")
            return v
        if key == "whatif":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError("true or false")
            return text in ("1", "true", "yes", "on")
        if key == "deployment_labels":
            items = _SPLIT_RE.split(value.strip()) if isinstance(value, str) else list(value)
            labels = tuple(str(x).strip() for x in items if str(x).strip())
            if not labels or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", x) for x in labels):
                raise ValueError("label names, e.g. [\"pod\", \"instance\"]")
            return labels
        if key == "tz":
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(str(value).strip())
            except ZoneInfoNotFoundError:
                raise ValueError("an IANA time zone such as UTC or Europe/Berlin") from None
            return str(value).strip()
        if key == "max_future":
            span_seconds(str(value))
            return str(value).strip()
        if key in _PATH_KEYS:
            return _path(str(value), base)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {key} = {value!r} is not valid ({exc})") from None


_SPAN_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)?\s*$", re.IGNORECASE)
_SPAN_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def span_seconds(text: str) -> float:
    """`1d`, `12h`, `30m`, `90s` or a number of seconds -> seconds."""
    m = _SPAN_RE.match(text)
    if not m:
        raise ValueError("a span such as 1d, 12h, 30m or a number of seconds")
    return float(m.group(1)) * _SPAN_UNITS[(m.group(2) or "s").lower()]


def parse_percentiles(value: Any) -> tuple[float, ...]:
    """`50,90,95,99.9` (or a list of numbers) as sorted distinct floats, each above 0 and below 100."""
    items = _SPLIT_RE.split(value.strip()) if isinstance(value, str) else list(value)
    out = sorted({float(x) for x in items if str(x).strip()})
    if not out or not all(0 < q < 100 for q in out):
        raise ValueError("percentiles between 0 and 100, e.g. 50,90,95,99,99.9")
    return tuple(out)


def percentile_name(q: float) -> str:
    """The column name of a percentile: 50 -> p50, 99.9 -> p99.9."""
    return f"p{q:g}"


def env(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The environment variable `name` (None when unset or empty): the one place the environment is read."""
    value = (os.environ if environ is None else environ).get(name)
    return value if value not in (None, "") else None


def set_default_env(name: str, value: str) -> None:
    """$name = `value` for this process and the processes it starts, unless already set (the one place the
    environment is written, e.g. PYSPARK_PYTHON for Spark's local Python workers)."""
    os.environ.setdefault(name, value)


def environment() -> dict[str, str]:
    """A copy of the environment, for a child process to start from."""
    return dict(os.environ)


N = TypeVar("N", int, float)


def _env_number(name: str, default: N | None, parse: Callable[[str], N], minimum: N, what: str) -> N | None:
    """$name parsed by `parse` and >= `minimum`, else `default`; anything else is a usage error."""
    text = env(name)
    if text is None:
        return default
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not value >= minimum:
        raise UsageError(f"${name} = {text!r} is not valid ({what})")
    return value


def env_int(name: str, default: int | None = None, minimum: int = 1) -> int | None:
    """$name as a whole number >= `minimum`, else `default`."""
    return _env_number(name, default, int, minimum, f"a whole number >= {minimum}")


def env_on(name: str) -> bool:
    """$name as a switch that is on unless set to 0, off, no or false (any case): the knobs that turn a
    default behaviour off (ATTRIBUTION_SUMMARIES, ATTRIBUTION_FSYNC, ...)."""
    return (env(name) or "1").strip().lower() not in ("0", "off", "no", "false")


def env_float(name: str, default: float) -> float:
    """$name as a number >= 0, else `default`."""
    value = _env_number(name, default, float, 0.0, "a number >= 0")
    return default if value is None else value


def _path(text: str, base: Path | None) -> str:
    """A path relative to the config file's directory; a model preset name (no slash, no .json) stays as is."""
    if (base is None or os.path.isabs(text) or "://" in text  # (an s3:// store)
            or ("/" not in text and not text.endswith((".json", ".toml")))):
        return text
    return str((base / text).resolve())


def load_settings(flags: Mapping[str, Any] | None = None, *, config: str | os.PathLike[str] | None = None,
                  env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Resolve every setting: `flags` (values given on the command line; None means not given), else
    $ATTRIBUTION_<KEY> (e.g. ATTRIBUTION_GPU_HOUR_COST=2.5, ATTRIBUTION_SLO="ttft=0.5,tpot=0.05"), else the
    config file (`config`, else `find_config`), else the default."""
    env = os.environ if env is None else env
    path = Path(config) if config is not None else find_config(cwd, env)
    table = read_config(path) if path is not None else {}
    base = path.resolve().parent if path is not None else None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        flag = (flags or {}).get(key)
        env_value = env.get(ENV_PREFIX + key.upper())
        if flag is not None and flag != () and flag != []:
            values[key], sources[key] = _coerce(key, flag, f"--{key.replace('_', '-')}", Path.cwd()), "flag"
        elif env_value not in (None, ""):
            name = ENV_PREFIX + key.upper()
            # $ATTRIBUTION_WORKLOADS is read by the store's views themselves; here it only names the source
            values[key], sources[key] = _coerce(key, env_value, f"${name}", Path.cwd()), f"env {name}"
        elif key in table:
            values[key], sources[key] = _coerce(key, table[key], str(path), base), f"file {path}"
        else:
            sources[key] = "default"
    return replace(Settings(**values), config_file=str(path) if path else None, sources=sources)


def workload_map(settings: Settings, env: Mapping[str, str] | None = None) -> pl.DataFrame | None:
    """The workload names the settings give, as the store views' `workload_map` frame (match, name); None
    when they give none or when $ATTRIBUTION_WORKLOADS (which the views read themselves) is set."""
    env = os.environ if env is None else env
    w = settings.workloads
    if w is None or env.get(f"{ENV_PREFIX}WORKLOADS"):
        return None
    if isinstance(w, str):
        doc = _read_toml(Path(w))
        w = doc.get("workloads", {})
        if not isinstance(w, dict) or not all(isinstance(v, str) for v in w.values()):
            raise UsageError(f"{settings.workloads}: expected a [workloads] table of \"key hash, alias or team\" = "
                             "\"name\"")
    return pl.DataFrame({"match": list(w), "name": list(w.values())}, schema={"match": pl.Utf8, "name": pl.Utf8})


def describe(settings: Settings, keys: tuple[str, ...] | list[str]) -> dict[str, dict[str, Any]]:
    """`keys` of `settings` as {key: {"value": ..., "from": "flag" | "env ATTRIBUTION_X" | "file PATH" |
    "default"}}: what a command's JSON output says about the settings it used."""
    return {k: {"value": _plain(getattr(settings, k)), "from": settings.sources.get(k, "default")} for k in keys}


def connect_settings(con: Any, settings: Settings) -> None:
    """Apply the settings' workload names to a store connection (replacing the store's own mapping)."""
    names = workload_map(settings)
    if names is not None:
        con.register("_workload_map", names.to_arrow())
