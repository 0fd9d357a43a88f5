"""What-if: replay a start's measured arrivals (queries/memsplit_arrivals.sql) through the simulator
(attribution.simulate) under the current and the recommended split of the same memory, and compare queue
time, TTFT and per-pod capacity. Both runs use one static model: a KV pool of T tokens and at most C running
requests (C x k state slots of S bytes beside it). That is SGLang's split; for vLLM's shared pool it is the
conservative reading (state reserved for the cap). The step costs come from a simulator engine profile.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import duckdb
import polars as pl

from attribution import queries
from attribution.db import as_float, as_int
from attribution.errors import UsageError
from attribution.memsplit.current import CurrentSplit
from attribution.memsplit.current import when as _when
from attribution.memsplit.recommend import Recommendation, sized

WAITED_S = 1.0  # a request "waited" when it queued at least this long


@dataclass(frozen=True)
class PoolConfig:
    split: str  # current | recommended
    kv_tokens: int
    cap: int
    state_slots: int


def _version_key(v: str | None) -> tuple[int, ...]:
    out = []
    for p in (v or "").split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def service_profile(engine: str, version: str | None, name: str | None = None):
    """The simulator's step-cost profile for a start: `name` if given, else the packaged profile of the same
    engine with the nearest version (hybrid-model profiles first, then by name for ties)."""
    from attribution.simulate.model import PROFILE_DIR, load_profile

    if name:
        return load_profile(name)
    cands = []
    for path in sorted(PROFILE_DIR.glob("*.toml")):
        d = tomllib.loads(path.read_text())
        if d.get("engine") != engine:
            continue
        want, have = _version_key(version), _version_key(str(d.get("version")))
        distance = tuple(abs(a - b) for a, b in zip(want, have, strict=False)) if version else (0,)
        newest = tuple(-x for x in have)  # without a version: the newest profile
        cands.append(("hybrid" not in path.stem, distance, newest, path.stem))
    if not cands:
        raise UsageError(f"no simulator profile for engine {engine}: pass --service-model")
    return load_profile(min(cands)[3])


def _scenario(c: CurrentSplit, pool: PoolConfig, profile, longest: int):
    from attribution.simulate.model import Memory, Phase, Scenario

    cap = max(1, pool.cap)
    budget = max(c.max_batched_tokens or 8192, cap + 1)
    return Scenario(
        name=f"memsplit {c.deployment} {pool.split}", description="replay of measured arrivals",
        start=c.period_since.astimezone(UTC),
        seed=0, pods=1, requests_per_day=1.0, phases=(Phase(pool.split, profile, 1.0),), workloads=(),
        memory=Memory(pool.kv_tokens), max_running_requests=cap, max_num_batched_tokens=budget,
        max_model_len=min(pool.kv_tokens, max(longest + 1, 2)), prefix_cache=False,
    )  # fmt: skip


def replay(arrivals: pl.DataFrame, c: CurrentSplit, pool: PoolConfig, profile) -> dict[str, Any]:
    """Simulate one split; queue time, TTFT, peak running and Little's-law capacity at the cap."""
    from attribution.simulate import simulate

    longest = as_int((arrivals["prompt_tokens"] + arrivals["output_tokens"]).max())
    row: dict[str, Any] = {
        "start_id": c.start_id,
        "deployment": c.deployment,
        "split": pool.split,
        "source": "simulated",
        "requests": arrivals.height,
        "cap": pool.cap,
        "kv_pool_tokens": pool.kv_tokens,
        "state_slots": pool.state_slots,
    }
    if longest + 1 > pool.kv_tokens:
        row["note"] = (
            f"the longest request ({longest:,} tokens) does not fit a {pool.kv_tokens:,}-token KV pool"
        )
        return row
    rep = arrivals.select(
        "arrival",
        "prompt_tokens",
        "output_tokens",
        "max_tokens",
        "workload",
        pl.col("cached_tokens").fill_null(-1),
    )
    rep = rep.with_columns(
        pl.max_horizontal("max_tokens", "output_tokens").fill_null(pl.col("output_tokens"))
    )
    sim = simulate(_scenario(c, pool, profile, longest), arrivals=rep, workers=1, steps=False).requests
    service = (sim["finished"] - sim["admitted"]).dt.total_microseconds() / 1e6
    mean_service = as_float(service.mean())
    row.update(_latency(sim["queue_s"], sim["ttft_s"]))
    row.update({
        "peak_running": _peak(sim), "mean_service_s": mean_service,
        "capacity_per_day": pool.cap / mean_service * 86400 if mean_service > 0 else None,
    })  # fmt: skip
    return row


def _latency(queue: pl.Series, ttft: pl.Series) -> dict[str, Any]:
    def q(s: pl.Series, p: float) -> float | None:
        s = s.drop_nulls()
        return as_float(s.quantile(p, interpolation="linear")) if s.len() else None

    return {
        "queue_p50": q(queue, 0.5), "queue_p99": q(queue, 0.99),
        "queue_mean": as_float(queue.drop_nulls().mean()) if queue.drop_nulls().len() else None,
        "waited_share": as_float((queue.drop_nulls() >= WAITED_S).mean()) if queue.drop_nulls().len() else None,
        "ttft_p50": q(ttft, 0.5), "ttft_p99": q(ttft, 0.99),
    }  # fmt: skip


def _peak(sim: pl.DataFrame) -> int:
    from attribution.simulate.truth import peak_overlap

    return peak_overlap(sim["admitted"], sim["finished"])


def measured(arrivals: pl.DataFrame, c: CurrentSplit) -> dict[str, Any]:
    """The same figures as the logs measured them (queue time only where the source gives it)."""
    return {
        "start_id": c.start_id,
        "deployment": c.deployment,
        "split": "current",
        "source": "measured",
        "requests": arrivals.height,
        "cap": c.cap,
        "kv_pool_tokens": c.kv_pool_tokens,
        "state_slots": c.state_slots,
        **_latency(arrivals["queue_s"], arrivals["ttft_s"]),
    }


def replay_arrivals(trace: pl.DataFrame) -> pl.DataFrame:
    """A trace's arrivals (attribution.replay.read_trace) with the columns the what-if reads; it has no
    measured latency to compare with."""
    extra = {"max_tokens": pl.Int64, "cached_tokens": pl.Int64, "queue_s": pl.Float64, "ttft_s": pl.Float64}
    return trace.with_columns(pl.col("output_tokens").fill_null(1),
                              *[pl.lit(None, t).alias(c) for c, t in extra.items() if c not in trace.columns])


def start_arrivals(con: duckdb.DuckDBPyConnection) -> dict[int, pl.DataFrame]:
    """Each start's measured arrivals (queries/memsplit_arrivals.sql, one query for every start of
    int_memsplit_periods), by start_id."""
    rows = queries.run(con, "memsplit_arrivals")
    return {int(k[0]): part.drop("start_id") for k, part in rows.partition_by("start_id", as_dict=True).items()}


def whatif(
    c: CurrentSplit, rec: Recommendation, service_model: str | None = None, trace: pl.DataFrame | None = None,
    trace_name: str = "the trace", measured_arrivals: pl.DataFrame | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for the measured traffic (`measured_arrivals`, the start's own: start_arrivals) and its replay
    under the current and the recommended split; with `trace` (arrivals of a replay file) those arrivals are
    replayed instead of the start's own, and nothing is measured."""
    if trace is None:
        arrivals = measured_arrivals if measured_arrivals is not None else pl.DataFrame()
    else:
        arrivals = replay_arrivals(trace)
    if arrivals.is_empty():
        return [], [f"{c.deployment}: no requests with prompt and output lengths to replay"]
    profile = service_profile(c.engine, c.version, service_model)
    notes = [
        f"{c.deployment} ({_when(c.started)}): replayed {arrivals.height:,} requests"
        + ("" if trace is None else f" of {trace_name} (not this start's own)")
        + f" with the `{profile.name}` step costs ({profile.engine} {profile.version}); an estimate"
    ]
    pools = [PoolConfig("current", c.kv_pool_tokens, c.cap or c.state_cap, c.state_slots)]
    if rec.status in ("resize", "short"):
        z = sized(rec)
        pools.append(PoolConfig("recommended", z.kv_tokens, z.max_running, z.state_slots))
    rows = ([measured(arrivals, c)] if trace is None else []) + [replay(arrivals, c, p, profile) for p in pools]
    if rec.status == "fits":
        notes.append(
            f"{c.deployment} ({_when(c.started)}): the recommended split is the current one; "
            "nothing else to replay"
        )
    return rows, notes
