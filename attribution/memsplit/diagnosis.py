"""Diagnosis from the engine's step lines (queries/memsplit_*.sql): per engine start, how often and how long
the running cap bound with requests waiting while the KV pool had room (episodes), the queueing it cost, what
limited the start (state pool, running cap, KV pool, compute, nothing), and the demand the recommendation
sizes the pools for. The exact sweep of the concurrency analysis (attribution.analyses) cross-checks the
demand where requests have per-request intervals.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from attribution import queries
from attribution.memsplit.current import CurrentSplit
from attribution.queries import materialize

LIMITS = {
    "state_pool": "most queueing happened with running requests at the cap the state pool sets and the KV "
    "pool "
    "below kv_low: the state pool binds",
    "running_cap": "most queueing happened at the running cap with the KV pool below kv_low, and the state "
    "pool "
    "would admit more: the cap binds",
    "kv_pool": "most queueing happened with KV usage at or above kv_low: the KV pool binds",
    "compute": "most queueing happened below the cap with KV to spare: the engine's throughput (e.g. "
    "prefill) is "
    "the limit, and no split of memory removes it",
    "none": "no request waited",
}


@dataclass(frozen=True)
class Settings:
    """How a binding line is told apart and how demand is summarised (documented in DEFINITIONS)."""

    kv_low: float = 0.8
    max_gap_s: float = 60.0
    merge_s: float = 30.0
    percentile: float = 0.99
    headroom: float = 0.10


def load_starts(
    con: duckdb.DuckDBPyConnection,
    *,
    engine: str | None,
    deployments: list[str] | None,
    since: datetime | None,
    until: datetime | None,
) -> pl.DataFrame:
    """The engine starts under analysis (int_memsplit_starts), kept as a temporary table on `con` beside their
    periods and step lines (int_memsplit_periods, int_memsplit_step_lines: one join of the step lines)."""
    materialize(con, "int_memsplit_periods", engine=engine, deployments=deployments, since=since, until=until)
    materialize(con, "int_memsplit_step_lines")
    materialize(con, "int_memsplit_starts")
    return queries.table_rows(con, "int_memsplit_starts")


def step_frames(con: duckdb.DuckDBPyConnection, s: Settings) -> dict[str, pl.DataFrame]:
    """binding (one row per start), episodes (one per episode) and demand (one per start), from the step
    lines of the starts in int_memsplit_starts."""
    materialize(con, "int_memsplit_lines", kv_low=s.kv_low, max_gap_s=s.max_gap_s)
    materialize(con, "int_memsplit_episodes", max_gap_s=s.max_gap_s, merge_s=s.merge_s)
    episodes = queries.table_rows(con, "int_memsplit_episodes")
    return {
        "binding": queries.run(con, "memsplit_binding"),
        "episodes": episodes,
        "demand": queries.run(con, "memsplit_demand", q=s.percentile),
    }


STEP_TABLES = ("int_memsplit_episodes", "int_memsplit_lines", "int_memsplit_step_lines", "int_memsplit_starts")


def drop_step_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the tables only load_starts and step_frames read (int_memsplit_periods stays: the what-if's
    arrivals read it), so that they do not sit in DuckDB's memory beside the exact sweep's requests (at 1M
    requests ~600 MB). On Spark they stay (the report drops nothing there)."""
    if queries.spark_connection(con) is not None:
        return
    for name in STEP_TABLES:
        con.execute(f"drop table if exists temp.{name}")


def exact_in_system(
    con: duckdb.DuckDBPyConnection, splits: list[CurrentSplit]
) -> tuple[pl.DataFrame, list[str]]:
    """Requests in the system (arrival to end) per start from the concurrency analysis' exact sweep over
    per-request intervals: peak and p99. Each distinct period is swept as the concurrency analysis of that
    window sweeps it (bounds from all of its requests; no sweep when no request with an interval arrives in
    it), for the deployments of its starts only (_period_parts)."""
    schema = {"start_id": pl.Int64, "in_system_peak_exact": pl.Float64, "in_system_p99_exact": pl.Float64}
    try:
        from attribution import analyses
        from attribution.analyses import sweep
    except ImportError:  # pragma: no cover - the analyses ship with the package
        return pl.DataFrame(schema=schema), [
            "the concurrency analysis is not available: no exact cross-check"
        ]
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    periods: dict[tuple[Any, ...], list[CurrentSplit]] = {}
    for c in splits:
        periods.setdefault((c.period_since, c.period_until), []).append(c)
    if not periods:
        return pl.DataFrame(schema=schema), notes
    ends = [u for _, u in periods]
    since = min(s for s, _ in periods)
    until = None if any(u is None for u in ends) else max(ends)
    try:
        sel = analyses.select(con, since=since, until=until, by="all")
        # on Spark every row of the periods in one fetch (each query more is a job; the driver holds them)
        everything = (sweep.interval_requests(con, sel.window.since, sel.window.until, False, kv=False)
                      if queries.spark_connection(con) is not None else None)
    except Exception as exc:  # noqa: BLE001 - a cross-check must not sink the answer
        return pl.DataFrame(schema=schema), [
            f"exact concurrency sweep failed ({exc}); demand comes from the step lines only"
        ]
    for (p_since, p_until), group in periods.items():
        try:
            found = _period_parts(con, everything, p_since, p_until, {c.deployment for c in group})
            if found is None:  # no deployment is `exact` in that window: the analysis sweeps nothing
                continue
            b, parts = found
            # in_system only: no live KV tokens, one deployment's step function at a time
            got = sweep.stats_frame([r for _, s in sweep.part_segments(parts, b, False, kv=False)
                                     for r in sweep.stat_rows(s, metrics=("in_system",))[0]])
        except Exception as exc:  # noqa: BLE001 - a cross-check must not sink the answer
            notes.append(f"exact concurrency sweep failed ({exc}); demand comes from the step lines only")
            continue
        for c in group:
            r = got.filter(pl.col("deployment") == c.deployment)
            if r.height:
                rows.append(
                    {
                        "start_id": c.start_id,
                        "in_system_peak_exact": r["peak"][0],
                        "in_system_p99_exact": r["p99"][0],
                    }
                )
    return pl.DataFrame(rows, schema=schema), notes


def _period_parts(con: duckdb.DuckDBPyConnection, everything: pl.DataFrame | None, since: datetime | None,
                  until: datetime | None, deployments: set[str | None]
                  ) -> tuple[Any, Iterator[tuple[str | None, pl.DataFrame]]] | None:
    """The sweep's bounds over the requests with an interval touching [since, until) (sweep.interval_requests),
    and the rows of `deployments` among them one deployment at a time; None when none arrives in it. From
    `everything` (the rows of every period, Spark's one fetch), else by queries: the count and bounds by aggregate
    queries, each deployment's rows fetched as it is swept (at 6M requests a frame of every row of the periods
    set the report's peak)."""
    from attribution.analyses import sweep

    lo, hi = sweep.epoch_us(since), sweep.epoch_us(until)
    mine = sorted(d for d in deployments if d is not None)  # (a start without a deployment matches no row)
    if everything is None:
        arriving = queries.run_columns(
            con, "concurrency_requests", ["count(*) as n"], since=since, until=until,
            where=("($lo::bigint is null or t_arrival >= $lo) and ($hi::bigint is null or t_arrival < $hi)",
                   {"lo": lo, "hi": hi}))["n"].item()
        if not arriving:
            return None
        columns = sweep.interval_columns(False, False)
        return sweep.request_bounds(con, since, until), (
            (d, sweep.deployment_requests(con, since, until, d, columns)) for d in mine)
    touching = [c for c in (None if lo is None else pl.col("t_end") > lo,
                            None if hi is None else pl.col("t_arrival") < hi) if c is not None]
    arriving_in = [c for c in (None if lo is None else pl.col("t_arrival") >= lo,
                               None if hi is None else pl.col("t_arrival") < hi) if c is not None]
    near = everything.lazy().filter(*touching) if touching else everything.lazy()
    edge = near.select(t_end=pl.col("t_end").max(), t_arrival=pl.col("t_arrival").min(),
                       arriving=pl.all_horizontal(arriving_in).sum() if arriving_in else pl.len()).collect()
    if not edge["arriving"].item():
        return None
    b = sweep.bounds(edge.select("t_end", "t_arrival"), since, until)  # (over one row: the same)
    return b, ((d, near.filter(pl.col("deployment") == d).collect()) for d in mine)


def limit_of(c: CurrentSplit, b: dict[str, Any] | None) -> str:
    """What cost the start most queueing (a key of LIMITS): the cause with the most waiting request-seconds
    among binding lines (state pool or running cap), KV-bound lines and lines queued below the cap
    (compute)."""
    if not b or not b.get("waiting_request_s"):
        return "none"
    cap = "state_pool" if c.cap is not None and c.state_cap <= c.cap else "running_cap"
    costs = {
        cap: b["binding_waiting_request_s"],
        "kv_pool": b["kv_bound_waiting_request_s"],
        "compute": b["below_cap_waiting_request_s"],
    }
    return max(costs, key=lambda k: costs[k])
