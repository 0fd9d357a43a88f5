"""Gateway spend next to the GPU cost (issue 18 item 4): the spend mart's counts and sums worked by hand
(billed, partly priced, 0 billed, no price, no gateway), capacity's spend table beside the cost table, and a
store without gateway rows showing none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from attribution.analyses import capacity, select
from attribution.analyses.common import frames_connection
from attribution.analyses.spend import summary

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _rows(rows: list[tuple]) -> pl.DataFrame:
    """rows: (deployment, workload, arrival_s, e2e_s, prompt, output, source_kind, cost)."""
    return pl.DataFrame({
        "deployment": [r[0] for r in rows], "workload": [r[1] for r in rows],
        "arrival": [T0 + timedelta(seconds=r[2]) for r in rows], "e2e_s": [float(r[3]) for r in rows],
        "ttft_s": [0.5] * len(rows), "queue_s": [0.0] * len(rows),
        "prompt_tokens": [r[4] for r in rows], "output_tokens": [r[5] for r in rows],
        "source_kind": [r[6] for r in rows],
        "source": ["litellm" if r[6] == "gateway" else "vllm_log" for r in rows],
        "cost": [r[7] for r in rows], "status": ["ok"] * len(rows),
    }, schema_overrides={"cost": pl.Float64})


ROWS = [
    # pod-a: two priced gateway requests, one without a price, one the gateway never saw
    ("pod-a", "chat", 0, 10, 1000, 100, "gateway", 0.01),
    ("pod-a", "chat", 0, 10, 3000, 300, "gateway", 0.03),
    ("pod-a", "batch", 5, 5, 500, 50, "gateway", None),
    ("pod-a", "batch", 6, 4, 500, 50, "engine", None),
    # pod-b: a model priced at 0
    ("pod-b", "chat", 0, 20, 100, 10, "gateway", 0.0),
    ("pod-b", "chat", 1, 19, 100, 10, "gateway", 0.0),
    # pod-c: no price at all; pod-d: no gateway
    ("pod-c", "batch", 0, 36, 100, 10, "gateway", None),
    ("pod-d", "batch", 0, 36, 100, 10, "engine", None),
]


def test_spend_mart_by_pod_worked_by_hand():
    sel = select(frames_connection(_rows(ROWS)), by="all")
    got = {r["deployment"]: r for r in sel.run("spend_billed_by_deployment", per_group=False).iter_rows(named=True)}
    a = got["pod-a"]
    assert (a["requests"], a["gateway_requests"], a["billed_requests"], a["unpriced_requests"]) == (4, 3, 2, 1)
    assert a["billed_usd"] == pytest.approx(0.04)
    # the tokens of the billed requests only: 4000 input, 400 output
    assert (a["billed_input_tokens"], a["billed_output_tokens"]) == (4000, 400)
    assert a["usd_per_m_input"] == pytest.approx(0.04 / 4000 * 1e6)  # $10 per million
    assert a["usd_per_m_output"] == pytest.approx(0.04 / 400 * 1e6)  # $100 per million
    assert (a["billing"], a["cost_sources"]) == ("partly priced", "litellm")
    b = got["pod-b"]
    assert (b["billed_requests"], b["zero_cost_requests"], b["billed_usd"], b["billing"]) == (2, 2, 0.0, "0 billed")
    c = got["pod-c"]
    assert (c["billed_requests"], c["billed_usd"], c["usd_per_m_input"], c["billing"]) == (0, None, None, "no price")
    assert got["pod-d"]["billing"] == "no gateway"


def test_spend_mart_by_workload():
    sel = select(frames_connection(_rows(ROWS)), by="workload")
    got = {(r["deployment"], r["grp"]): r for r in
           sel.run("spend_billed_by_deployment", per_group=True).iter_rows(named=True)}
    assert got[("pod-a", "chat")]["billed_usd"] == pytest.approx(0.04)
    assert got[("pod-a", "chat")]["billing"] == "billed"
    assert got[("pod-a", "batch")]["billing"] == "no price"  # its gateway request had no cost
    assert got[("pod-a", "batch")]["gateway_requests"] == 1


def test_capacity_puts_billed_usd_next_to_the_gpu_cost():
    res = capacity(select(frames_connection(_rows(ROWS)), by="all"), gpu_hour_cost=2.0)
    spend = {r["deployment"]: r for r in res.tables["spend"].iter_rows(named=True)}
    a = spend["pod-a"]
    # pod-a's span: first arrival 0 s to last end 10 s; 1 GPU at $2/h: 2 * 10 / 3600 USD
    assert a["gpu_usd"] == pytest.approx(2 * 10 / 3600)
    assert a["billed_share_of_gpu_cost"] == pytest.approx(0.04 / (2 * 10 / 3600))
    cost = res.tables["cost"].filter(pl.col("deployment") == "pod-a").row(0, named=True)
    assert a["gpu_usd_per_m_output"] == pytest.approx(cost["usd_per_m_output"])
    assert a["billed_usd_per_m_output"] == pytest.approx(100.0)
    assert spend["pod-c"]["billed_share_of_gpu_cost"] is None and spend["pod-c"]["gpu_usd"] == pytest.approx(
        2 * 36 / 3600)
    title = res.titles["spend"]
    assert "billed $0.04 for 4 of its 6 requests; 2 had no price" in title
    assert "billing" in res.definitions and "gpu_usd" in res.definitions


def test_capacity_per_workload_has_no_gpu_usd_for_a_group():
    res = capacity(select(frames_connection(_rows(ROWS)), by="workload"), gpu_hour_cost=2.0)
    spend = res.tables["spend"]
    assert "workload" in spend.columns and spend["gpu_usd"].null_count() == spend.height
    chat = spend.filter((pl.col("deployment") == "pod-a") & (pl.col("workload") == "chat")).row(0, named=True)
    assert chat["billed_usd"] == pytest.approx(0.04) and chat["gpu_usd_per_m_output"] is not None


def test_without_a_price_or_a_gateway():
    nothing = _rows([r for r in ROWS if r[0] in ("pod-c", "pod-d")])
    res = capacity(select(frames_connection(nothing), by="all"))
    assert "gpu_usd" not in res.tables["spend"].columns  # no GPU-hour price: no GPU cost to compare
    assert summary(res.tables["spend"]).startswith("the gateway billed nothing: none of its 1 requests had a price")
    engine_only = capacity(select(frames_connection(_rows([r for r in ROWS if r[6] == "engine"])), by="all"))
    assert "spend" not in engine_only.tables and "billing" not in engine_only.definitions
    zero = capacity(select(frames_connection(_rows([r for r in ROWS if r[0] == "pod-b"])), by="all"))
    assert summary(zero.tables["spend"]).startswith("the gateway billed $0 for the 2 requests with a cost")
