"""Capacity and cost: completed requests per pod per day, Little's law at the observed ceiling, and the cost per
million tokens ($2/h at 100 output tokens/s is $5.556 per million)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from attribution.analyses import capacity, select
from attribution.analyses.common import frames_connection

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _requests(rows: list[tuple], deployment: str = "pod-a", workload: str = "w") -> pl.DataFrame:
    """rows: (arrival_s, queue_s, e2e_s, prompt, output, status)."""
    return pl.DataFrame({
        "deployment": [deployment] * len(rows), "workload": [workload] * len(rows),
        "arrival": [T0 + timedelta(seconds=r[0]) for r in rows], "queue_s": [r[1] for r in rows],
        "ttft_s": [r[1] for r in rows], "e2e_s": [r[2] for r in rows], "prompt_tokens": [r[3] for r in rows],
        "output_tokens": [r[4] for r in rows], "status": [r[5] for r in rows],
    }, schema_overrides={"queue_s": pl.Float64})


def test_littles_law_and_cost_per_million_tokens():
    # two requests running [0, 10) s side by side, 500 output tokens each: 100 output tokens/s over 10 s;
    # a request failing at once (at 10 s) is not completed and never in the system
    df = _requests([(0, 0.0, 10.0, 2000, 500, "ok"), (0, 0.0, 10.0, 1600, 500, "ok"),
                    (10, 0.0, 0.0, 100, 0, "error")])
    res = capacity(select(frames_connection(df), by="all"), gpu_hour_cost=2.0)
    cap = res.tables["capacity"].row(0, named=True)
    assert cap["deployment"] == "pod-a" and cap["completed_per_day"] == pytest.approx(2 / 10 * 86400)
    little = res.tables["littles_law"].row(0, named=True)
    assert little["completed"] == 2 and little["completed_per_s"] == pytest.approx(0.2)
    assert little["mean_in_system"] == pytest.approx(2.0) and little["littles_in_system"] == pytest.approx(0.2 * 10)
    assert (cap["ceiling"], cap["ceiling_metric"]) == (2, "running")
    assert cap["capacity_per_day"] == pytest.approx(2 / 10 * 86400) and cap["utilization"] == pytest.approx(1.0)
    cost = res.tables["cost"].row(0, named=True)
    assert cost["gpus"] == 1 and cost["output_tps"] == pytest.approx(100)
    assert cost["usd_per_m_output"] == pytest.approx(5.556, abs=5e-4)
    assert cost["usd_per_m_input"] == pytest.approx(2 / (360 * 3600) * 1e6)  # 3,600 tokens / 10 s
    assert cost["usd_per_m_output_at_capacity"] == pytest.approx(cost["usd_per_m_output"])


def test_capacity_at_the_ceiling_and_gpus_from_tensor_parallelism():
    # one request at a time for 4 s each, then two together: ceiling 2, service 4 s -> 43,200 a day
    df = _requests([(0, 0.0, 4.0, 10, 40, "ok"), (4, 0.0, 4.0, 10, 40, "ok"), (8, 0.0, 4.0, 10, 40, "ok"),
                    (8, 0.0, 4.0, 10, 40, "ok")])
    config = pl.DataFrame({"ts": [T0], "deployment": ["pod-a"], "tp_size": [4], "max_running_requests": [64],
                           "start_line": [1]})
    res = capacity(select(frames_connection(df, engine_config=config), by="all"), gpu_hour_cost=2.0)
    cap = res.tables["capacity"].row(0, named=True)
    assert cap["completed_per_day"] == pytest.approx(4 / 12 * 86400)
    assert cap["ceiling"] == 2 and cap["configured_max"] == 64
    assert cap["capacity_per_day"] == pytest.approx(2 / 4 * 86400)
    assert cap["utilization"] == pytest.approx((4 / 12) / (2 / 4))
    cost = res.tables["cost"].row(0, named=True)
    assert cost["gpus"] == 4  # tp_size
    assert cost["usd_per_m_output"] == pytest.approx(8 / (160 / 12 * 3600) * 1e6)
    one = capacity(select(frames_connection(df, engine_config=config), by="all"), gpu_hour_cost=2.0, gpus_per_pod=1)
    assert one.tables["cost"]["gpus"].to_list() == [1]


def test_per_group_rows_and_arrival_only_deployments():
    df = pl.concat([
        _requests([(0, 0.0, 10.0, 10, 10, "ok")], workload="x"),
        _requests([(0, 0.0, 5.0, 10, 10, "ok"), (1, 0.0, 5.0, 10, 10, "ok")], workload="y"),
        pl.DataFrame({"deployment": ["trace"], "workload": ["t"], "arrival": [T0], "prompt_tokens": [5],
                      "output_tokens": [5]}),
    ], how="diagonal_relaxed")
    res = capacity(select(frames_connection(df), by="workload"))
    little = res.tables["littles_law"]
    assert little.select("deployment", "workload", "completed").rows() == [("pod-a", "x", 1), ("pod-a", "y", 2)]
    assert res.tables["capacity"]["ceiling"].to_list() == [1, 2]
    assert "cost" not in res.tables
    assert any("no capacity: trace" in n for n in res.notes)


def test_service_time_comes_from_the_busiest_hour():
    # 12:00-13:00: one request of 10 s; 13:00-14:00: three of 2 s, at most two at once
    df = _requests([(0, 0.0, 10.0, 10, 10, "ok"), (3600, 0.0, 2.0, 10, 10, "ok"), (3601, 0.0, 2.0, 10, 10, "ok"),
                    (3602, 0.0, 2.0, 10, 10, "ok")])
    cap = capacity(select(frames_connection(df), by="all")).tables["capacity"].row(0, named=True)
    assert cap["busiest_hour_per_day"] == 3 * 24
    assert cap["busy_service_s"] == pytest.approx(2.0) and cap["ceiling"] == 2
    assert cap["capacity_per_day"] == pytest.approx(2 / 2.0 * 86400)
    assert cap["completed_per_day"] == pytest.approx(4 / 3604 * 86400)
