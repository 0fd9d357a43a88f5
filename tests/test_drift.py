"""Drift that catches what matters: a new or vanished workload above a share, a share change, a length
shift per workload (KS distance with its interval) and an arrival-rate change, on frames and through
`attribution report --fail-on drift` on a store of LiteLLM lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from attribution.cli import app
from attribution.ingest import ingest
from attribution.report.drift import DriftSettings, ks, lengths, traffic

T0 = datetime(2025, 3, 3, tzinfo=UTC)  # Monday of 2025-W10


def _frame(rng: np.random.Generator, shares: dict[str, float], n: int, prompt_scale: float = 1.0,
           t0: datetime = T0) -> pl.DataFrame:
    names = list(shares)
    grp = rng.choice(names, n, p=np.array(list(shares.values())) / sum(shares.values()))
    return pl.DataFrame({
        "grp": grp, "arrival": [t0 + timedelta(seconds=float(s)) for s in np.sort(rng.uniform(0, 7 * 86400, n))],
        "prompt_tokens": np.round(rng.lognormal(7, 1, n) * prompt_scale).astype(np.int64),
        "output_tokens": np.round(rng.lognormal(5, 0.8, n)).astype(np.int64),
    })  # fmt: skip


def test_ks_against_a_worked_example():
    assert ks(np.array([1, 2, 3, 4]), np.array([3, 4, 5, 6])) == pytest.approx(0.5)
    assert ks(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0


def test_a_new_workload_with_12_percent_is_drift_and_an_equal_week_is_not():
    rng = np.random.default_rng(1)
    week = {"chat": 0.6, "batch": 0.4}
    before = _frame(rng, week, 5000)
    same = _frame(rng, week, 5000)
    t = traffic(before, same, 168, 168)
    assert set(t["status"]) == {"stable"}
    assert set(lengths(before, same)["status"]) == {"stable"}
    new = _frame(rng, {"chat": 0.6 * 0.88, "batch": 0.4 * 0.88, "agents": 0.12}, 5000)
    t = {r["grp"]: r for r in traffic(before, new, 168, 168).iter_rows(named=True)}
    assert t["agents"]["status"] == "new" and t["agents"]["share_now"] == pytest.approx(0.12, abs=0.02)
    # the others keep their shares among the workloads on both sides: a new one alone moves no one
    assert t["chat"]["status"] == t["batch"]["status"] == "stable"
    small = _frame(rng, {"chat": 0.59, "batch": 0.4, "agents": 0.01}, 5000)
    assert traffic(before, small, 168, 168).filter(pl.col("grp") == "agents")["status"][0] == "new (small)"
    gone = {r["grp"]: r["status"] for r in traffic(new, before, 168, 168).iter_rows(named=True)}
    assert gone["agents"] == "gone"


def test_share_change_rate_change_and_length_shift():
    rng = np.random.default_rng(2)
    before = _frame(rng, {"chat": 0.6, "batch": 0.4}, 5000)
    moved = {r["grp"]: r for r in traffic(before, _frame(rng, {"chat": 0.4, "batch": 0.6}, 5000), 168, 168)
             .iter_rows(named=True)}
    assert moved["chat"]["status"] == "share change" and moved["chat"]["share_change_hi"] < 0
    doubled = traffic(before, _frame(rng, {"chat": 0.6, "batch": 0.4}, 10000), 168, 168).row(0, named=True)
    assert doubled["grp"] == "all" and doubled["status"] == "rate change"
    assert doubled["rate_ratio_lo"] <= doubled["rate_ratio"] <= doubled["rate_ratio_hi"]
    # the same count over half the hours of data (the store began mid-window) is no rate change
    assert traffic(before, _frame(rng, {"chat": 0.6, "batch": 0.4}, 2500), 168, 84).row(0, named=True)["status"] \
        == "stable"
    longer = lengths(before, _frame(rng, {"chat": 0.6, "batch": 0.4}, 5000, prompt_scale=1.5),
                     DriftSettings(distance=0.1))
    p = longer.filter(pl.col("metric") == "prompt_tokens")
    assert set(p["status"]) == {"drift"}
    assert (p["distance_lo"] <= p["distance"]).all() and (p["distance"] <= p["distance_hi"]).all()
    assert set(longer.filter(pl.col("metric") == "output_tokens")["status"]) == {"stable"}


def _line(i: int, t: datetime, alias: str, prompt: int, ttft: float) -> str:
    s = t.timestamp()
    return json.dumps({
        "id": f"chatcmpl-{i:032x}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": s, "completionStartTime": s + ttft, "endTime": s + ttft + 1.0,
        "model": "hosted_vllm/Qwen/Qwen3-8B", "model_group": "qwen", "api_base": "http://10.0.0.5:8000/v1",
        "prompt_tokens": prompt, "completion_tokens": 21, "metadata": {"user_api_key_alias": alias},
    })


def _run(*args: str) -> int:
    """`attribution ARGS`: its exit code (5: a --fail-on condition held)."""
    r = CliRunner().invoke(app, list(args))
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code


def test_a_new_workload_trips_fail_on_drift(tmp_path):
    """Two weeks of the same two workloads; the second adds a third carrying 12% of its requests."""
    rng = np.random.default_rng(3)
    lines, i = [], 0
    for week, shares in ((0, {"chat": 0.6, "batch": 0.4}), (1, {"chat": 0.528, "batch": 0.352, "agents": 0.12})):
        f = _frame(rng, shares, 1500, t0=T0 + timedelta(days=7 * week))
        for r in f.iter_rows(named=True):
            lines.append(_line(i, r["arrival"], r["grp"], r["prompt_tokens"], float(rng.lognormal(-1, 0.5))))
            i += 1
    (tmp_path / "litellm.jsonl").write_text("\n".join(lines) + "\n")
    ingest([str(tmp_path / "litellm.jsonl")], tmp_path / "store")
    (tmp_path / "attribution.toml").write_text("resamples = 50\n")
    args = ["report", "--store", str(tmp_path / "store"), "--config", str(tmp_path / "attribution.toml"),
            "--week", "2025-W11", "--out", str(tmp_path / "r.json"), "-q"]
    assert _run(*args, "--fail-on", "drift", "--fail-on", "regression") == 5
    doc = json.loads((tmp_path / "r.json").read_text())
    assert "drift" in doc["found"] and "regression" not in doc["found"]
    assert any(a["kind"] == "drift" and "New workload agents" in a["text"] for a in doc["actions"])
    # a higher share threshold makes it minor: no drift
    (tmp_path / "attribution.toml").write_text("resamples = 50\ndrift_share = 0.2\n")
    assert _run(*args, "--fail-on", "drift") == 0
