"""Scenario and engine-profile data for the simulator: dataclasses, TOML loading and validation.

A scenario (``scenarios/*.toml``) names the pods, the engine profile of each phase, the memory pools, the
scheduler limits and the workloads; a profile (``profiles/*.toml``) is the per-step cost model of one engine
version. Length distributions are calibrated so that their stated ``mean`` is the mean of what is drawn.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from attribution.errors import InputError, UsageError

HERE = Path(__file__).resolve().parent
SCENARIO_DIR = HERE / "scenarios"
PROFILE_DIR = HERE / "profiles"


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _clipped_lognormal_mean(mu: float, sigma: float, lo: float, hi: float) -> float:
    """E[min(max(X, lo), hi)] for X = exp(N(mu, sigma^2))."""
    a = (math.log(lo) - mu) / sigma
    b = (math.log(hi) - mu) / sigma
    body = math.exp(mu + sigma * sigma / 2) * (_phi(b - sigma) - _phi(a - sigma))
    return lo * _phi(a) + body + hi * (1.0 - _phi(b))


@dataclass(frozen=True)
class Dist:
    """A token-count distribution: lognormal (mean, sigma), geometric (mean, on 1, 2, ...) or const.

    Draws are clipped to [min, max]. With ``tail_p`` > 0 a share ``tail_p`` of draws is log-uniform in
    [tail_min, tail_max] instead (a long tail of huge prompts). For lognormal the location is solved so
    that the mean of the whole mixture, clipping included, equals ``mean``.
    """

    kind: str
    mean: float
    sigma: float = 1.0
    min: int = 1
    max: int = 1 << 30
    tail_p: float = 0.0
    tail_min: int = 0
    tail_max: int = 0
    mu: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("lognormal", "geometric", "const"):
            raise UsageError(f"unknown distribution kind {self.kind!r} (lognormal, geometric, const)")
        if not (1 <= self.min <= self.mean <= self.max):
            raise UsageError(
                f"distribution needs 1 <= min <= mean <= max, got {self.min}, {self.mean}, {self.max}"
            )
        if self.tail_p and not (0 < self.tail_p < 1 and 0 < self.tail_min <= self.tail_max):
            raise UsageError("long tail needs 0 < p < 1 and 0 < tail_min <= tail_max")
        if self.kind == "lognormal":
            object.__setattr__(self, "mu", self._solve_mu())

    def _tail_mean(self) -> float:
        if not self.tail_p:
            return 0.0
        lo, hi = self.tail_min, self.tail_max
        return lo if lo == hi else (hi - lo) / math.log(hi / lo)

    def _solve_mu(self) -> float:
        target = (self.mean - self.tail_p * self._tail_mean()) / (1.0 - self.tail_p)
        if not (self.min < target < self.max):
            raise UsageError(f"lognormal mean {self.mean} cannot be reached within [{self.min}, {self.max}]")
        lo, hi = math.log(self.min) - 10 * self.sigma, math.log(self.max) + 10 * self.sigma
        for _ in range(200):  # the clipped mean is increasing in mu: bisection
            mid = (lo + hi) / 2
            if _clipped_lognormal_mean(mid, self.sigma, self.min, self.max) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "const":
            x = np.full(n, float(self.mean))
        elif self.kind == "geometric":
            x = rng.geometric(1.0 / self.mean, n).astype(float)
        else:
            x = rng.lognormal(self.mu, self.sigma, n)
        x = np.clip(np.rint(x), self.min, self.max)
        if self.tail_p:
            tail = rng.random(n) < self.tail_p
            k = int(tail.sum())
            if k:
                lo, hi = math.log(self.tail_min), math.log(self.tail_max)
                x[tail] = np.rint(np.exp(rng.uniform(lo, hi, k)))
        return x.astype(np.int64)


@dataclass(frozen=True)
class Sessions:
    """Multi-turn conversations: turn k+1's prompt is turn k's prompt + output + a new message."""

    turns_mean: float  # mean turns per session (>= 1); turns are 1 + geometric
    think_s: float  # mean (exponential) gap between a turn's arrival and the next turn's arrival


@dataclass(frozen=True)
class Workload:
    name: str
    key_alias: str
    team: str
    share: float  # share of the requests (not of sessions)
    # None for a workload named only by replayed arrivals (their lengths come from the trace)
    prompt: Dist | None  # for sessions: the new message of each turn
    output: Dist | None
    max_tokens: int
    process: str = "poisson"  # poisson | gamma (bursty renewal with coefficient of variation `cv`)
    cv: float = 1.0
    sessions: Sessions | None = None


@dataclass(frozen=True)
class Profile:
    """Per-step cost model of one engine version (seconds).

    step = base + prefill_per_token * prefill tokens + prefill_attn * sum(chunk * (context + chunk/2))
           + decode_per_seq * decoding requests + decode_per_kv_token * their live tokens
    where a chunk of a request whose KV length at prefill exceeds long_prefill_min_tokens (when set) counts
    long_prefill_scale times in both prefill terms: a kernel that switches on above a threshold.
    """

    name: str
    engine: str  # vllm | sglang (for the log writers)
    version: str
    batching: str  # mixed (vLLM V1: decodes and prefill chunks share a step) | prefill_first (SGLang)
    base_s: float
    prefill_per_token_s: float
    prefill_attn_s: float
    decode_per_seq_s: float
    decode_per_kv_token_s: float
    long_prefill_min_tokens: int = 0  # a threshold-gated prefill kernel: above this KV length at prefill ...
    long_prefill_scale: float = 1.0  # ... a request's prefill costs (per token and attention) scale by this


@dataclass(frozen=True)
class Memory:
    """The KV pool in tokens and, for hybrid models, the state pool in slots (k slots per running request)."""

    kv_pool_tokens: int
    state_slots: int | None = None
    slots_per_request: int = 1
    kv_bytes_per_token: int | None = None  # kept for the log writers when the pools were derived
    state_bytes_per_slot: int | None = None


@dataclass(frozen=True)
class Pricing:
    """A LiteLLM custom price for the served model (`model_info` in its config), USD per token. Cached prompt
    tokens cost `cache_read_input_token_cost`, which LiteLLM takes as 0 when it is not set."""

    input_cost_per_token: float
    output_cost_per_token: float
    cache_read_input_token_cost: float = 0.0


@dataclass(frozen=True)
class Phase:
    label: str
    profile: Profile
    days: float


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    start: datetime
    seed: int
    pods: int
    requests_per_day: float  # all pods together
    phases: tuple[Phase, ...]
    workloads: tuple[Workload, ...]
    memory: Memory
    max_running_requests: int
    max_num_batched_tokens: int
    max_model_len: int
    model: str = "model"
    prefix_cache: bool = False
    block_size: int = 16
    diurnal_amplitude: float = 0.0
    diurnal_peak_hour: float = 14.0
    stats_interval_s: float = 10.0
    replay: str | None = None  # path of arrivals to replay instead of generating them
    pricing: Pricing | None = None  # the gateway's price for the model; None: LiteLLM has none (bills nothing)

    @property
    def days(self) -> float:
        return sum(p.days for p in self.phases)

    @property
    def running_cap(self) -> int:
        """max_running_requests after the state pool's cap (SGLang: slots // k, A1.3)."""
        cap = self.max_running_requests
        if self.memory.state_slots is not None:
            cap = min(cap, self.memory.state_slots // self.memory.slots_per_request)
        return cap

    def with_horizon(self, *, requests: int | None, days: float | None) -> Scenario:
        """Scale the run: `days` alone keeps the rate; `requests` alone keeps the rate and sets the days;
        both set the rate. Phases keep their proportions."""
        if requests is None and days is None:
            return self
        rate = self.requests_per_day
        if days is None:
            assert requests is not None  # (one of the two is given)
            days = requests / rate
        elif requests is not None:
            rate = requests / days
        if days <= 0:
            raise UsageError("days must be positive")
        scale = days / self.days
        phases = tuple(replace(p, days=p.days * scale) for p in self.phases)
        return replace(self, phases=phases, requests_per_day=rate)


def _dist(d: dict[str, Any], where: str) -> Dist:
    try:
        tail = d.get("tail", {})
        return Dist(
            kind=d.get("dist", "lognormal"),
            mean=float(d["mean"]),
            sigma=float(d.get("sigma", 1.0)),
            min=int(d.get("min", 1)),
            max=int(d.get("max", 1 << 30)),
            tail_p=float(tail.get("p", 0.0)),
            tail_min=int(tail.get("min", 0)),
            tail_max=int(tail.get("max", 0)),
        )
    except KeyError as e:
        raise UsageError(f"{where}: missing {e.args[0]!r}") from None


def find_file(name: str, folder: Path, what: str, base: Path | None) -> Path:
    """A name with a slash or a .toml suffix is a path (relative to `base`, then the working directory);
    anything else is looked up in the packaged folder."""
    if "/" in name or name.endswith(".toml"):
        cands = [base / name] if base is not None else []
        cands.append(Path(name))
    else:
        cands = [folder / f"{name}.toml"]
    for c in cands:
        if c.is_file():
            return c
    known = ", ".join(sorted(p.stem for p in folder.glob("*.toml")))
    raise InputError(f"no {what} named {name!r} (known: {known})")


def load_profile(name: str, base: Path | None = None) -> Profile:
    path = find_file(name, PROFILE_DIR, "engine profile", base)
    d = tomllib.loads(path.read_text())
    cost = d.get("cost", {})
    try:
        prof = Profile(
            name=d.get("name", path.stem),
            engine=d["engine"],
            version=str(d["version"]),
            batching=d.get("batching", "mixed"),
            base_s=float(cost["base_s"]),
            prefill_per_token_s=float(cost.get("prefill_per_token_s", 0.0)),
            prefill_attn_s=float(cost.get("prefill_attn_s", 0.0)),
            decode_per_seq_s=float(cost.get("decode_per_seq_s", 0.0)),
            decode_per_kv_token_s=float(cost.get("decode_per_kv_token_s", 0.0)),
            long_prefill_min_tokens=int(cost.get("long_prefill_min_tokens", 0)),
            long_prefill_scale=float(cost.get("long_prefill_scale", 1.0)),
        )
    except KeyError as e:
        raise UsageError(f"{path}: missing {e.args[0]!r}") from None
    if prof.batching not in ("mixed", "prefill_first"):
        raise UsageError(f"{path}: batching must be 'mixed' or 'prefill_first'")
    if prof.long_prefill_scale <= 0 or prof.long_prefill_min_tokens < 0:
        raise UsageError(f"{path}: cost.long_prefill_scale must be > 0 and long_prefill_min_tokens >= 0")
    if prof.base_s <= 0:
        raise UsageError(f"{path}: cost.base_s must be > 0 (every step takes time)")
    return prof


def _memory(m: dict[str, Any], where: str) -> Memory:
    k = int(m.get("slots_per_request", 1))
    if "kv_pool_tokens" in m:
        slots = m.get("state_slots")
        return Memory(int(m["kv_pool_tokens"]), None if slots is None else int(slots), k)
    # Derived like SGLang 0.5.9 handle_max_mamba_cache (memory-and-thresholds.md A1.2): the state pool
    # takes r/(1+r) of the bytes left after weights, the KV pool the rest.
    try:
        rest = float(m["bytes_after_weights"])
        b = int(m["kv_bytes_per_token"])
        s = int(m["state_bytes_per_slot"])
        r = float(m.get("mamba_full_memory_ratio", 0.9))
    except KeyError as e:
        raise UsageError(f"{where}: [memory] needs kv_pool_tokens or {e.args[0]!r}") from None
    slots = int(rest * r / (1 + r) // s)
    return Memory(int((rest - slots * s) // b), slots, k, b, s)


def _pricing(p: dict[str, Any] | None, where: str) -> Pricing | None:
    if p is None:
        return None
    try:
        price = Pricing(float(p["input_cost_per_token"]), float(p["output_cost_per_token"]),
                        float(p.get("cache_read_input_token_cost", 0.0)))
    except KeyError as e:
        raise UsageError(f"{where}: [pricing] needs {e.args[0]!r}") from None
    if min(price.input_cost_per_token, price.output_cost_per_token, price.cache_read_input_token_cost) < 0:
        raise UsageError(f"{where}: [pricing] costs must not be negative")
    return price


def load_scenario(scenario: str | Path) -> Scenario:
    """Load a scenario by path or by name (``scenarios/<name>.toml`` in this package)."""
    path = find_file(str(scenario), SCENARIO_DIR, "scenario", None)
    d = tomllib.loads(path.read_text())
    where = str(path)
    try:
        sched = d["scheduler"]
        phases = tuple(
            Phase(p.get("label", p["profile"]), load_profile(p["profile"], path.parent), float(p["days"]))
            for p in d["phases"]
        )
        workloads = tuple(
            Workload(
                name=w["name"],
                key_alias=w.get("key_alias", w["name"]),
                team=w.get("team", w["name"]),
                share=float(w["share"]),
                prompt=_dist(w["prompt"], f"{where} workload {w['name']} prompt"),
                output=_dist(w["output"], f"{where} workload {w['name']} output"),
                max_tokens=int(w.get("max_tokens", w["output"].get("max", 1 << 20))),
                process=w.get("process", "poisson"),
                cv=float(w.get("cv", 1.0)),
                sessions=Sessions(float(w["sessions"]["turns_mean"]), float(w["sessions"]["think_s"]))
                if "sessions" in w
                else None,
            )
            for w in d.get("workloads", [])
        )
        start = d.get("start", datetime(2025, 6, 2, tzinfo=UTC))
        if isinstance(start, str):
            start = datetime.fromisoformat(start.replace("Z", "+00:00"))
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        diurnal = d.get("diurnal", {})
        cache = d.get("prefix_cache", {})
        replay = d.get("replay")
        scn = Scenario(
            name=d.get("name", path.stem),
            description=d.get("description", ""),
            start=start.astimezone(UTC),
            seed=int(d.get("seed", 0)),
            pods=int(d.get("pods", 1)),
            requests_per_day=float(d["requests_per_day"]),
            phases=phases,
            workloads=workloads,
            memory=_memory(d["memory"], where),
            max_running_requests=int(sched["max_running_requests"]),
            max_num_batched_tokens=int(sched["max_num_batched_tokens"]),
            max_model_len=int(sched["max_model_len"]),
            model=d.get("model", "model"),
            prefix_cache=bool(cache.get("enabled", False)),
            block_size=int(cache.get("block_size", 16)),
            diurnal_amplitude=float(diurnal.get("amplitude", 0.0)),
            diurnal_peak_hour=float(diurnal.get("peak_hour", 14.0)),
            stats_interval_s=float(d.get("stats_interval_s", 10.0)),
            replay=None if replay is None else str((path.parent / replay).resolve()),
            pricing=_pricing(d.get("pricing"), where),
        )
    except KeyError as e:
        raise UsageError(f"{where}: missing {e.args[0]!r}") from None
    validate(scn)
    return scn


def validate(scn: Scenario, replay: bool = False) -> None:
    """Reject configurations that cannot run (a request that never fits would stall the queue forever)."""
    if not scn.workloads and scn.replay is None and not replay:
        raise UsageError(f"scenario {scn.name}: no workloads and no replay")
    if scn.pods < 1 or not scn.phases:
        raise UsageError(f"scenario {scn.name}: needs pods >= 1 and at least one phase")
    if scn.memory.kv_pool_tokens < scn.max_model_len:
        raise UsageError(
            f"scenario {scn.name}: KV pool ({scn.memory.kv_pool_tokens} tokens) is smaller than "
            f"max_model_len ({scn.max_model_len}); a long request could never be admitted"
        )
    if scn.running_cap < 1:
        raise UsageError(f"scenario {scn.name}: the state pool leaves room for no running request")
    if scn.max_num_batched_tokens <= scn.running_cap and any(
        p.profile.batching == "mixed" for p in scn.phases
    ):
        raise UsageError("max_num_batched_tokens must exceed the running cap (decodes share the budget)")
    if not 0 <= scn.diurnal_amplitude < 1:
        raise UsageError("diurnal amplitude must be in [0, 1)")
    for w in scn.workloads:
        if w.prompt is None:  # a workload named only by replayed arrivals
            continue
        if w.process not in ("poisson", "gamma"):
            raise UsageError(f"workload {w.name}: process must be poisson or gamma")
        if w.max_tokens >= scn.max_model_len:
            raise UsageError(f"workload {w.name}: max_tokens must be below max_model_len")
    total = sum(w.share for w in scn.workloads)
    if scn.workloads and abs(total - 1.0) > 1e-6:
        raise UsageError(f"scenario {scn.name}: workload shares sum to {total}, not 1")
