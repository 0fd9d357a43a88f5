"""One settings path: the same attribution.toml changes the same numbers in the CLI (latency, analyze), the
report and the dashboard's data layer; --format json says where each value came from; a bad value anywhere,
also in a process-level variable such as $ATTRIBUTION_JOBS, is a usage error (exit 2, one line); nothing but
attribution.config reads the environment."""

from __future__ import annotations

import json
import os
import re

import polars as pl
import pytest
from conftest import REPO, litellm_line, run_cli
from typer.testing import CliRunner

from attribution.cli import app
from attribution.config import load_settings
from attribution.dashboard import Filters, View
from attribution.ingest import ingest
from attribution.report import build_report
from attribution.store import Store

BASE = 1739235379.0  # 2025-02-11T00:56:19Z
# (alias, start, first token, end, prompt, completion), seconds after BASE
REQUESTS = [
    ("search", 0.0, 0.2, 1.2, 100, 11), ("chat", 0.5, 1.5, 3.5, 1000, 21), ("search", 1.0, 1.4, 2.0, 300, 6),
    ("chat", 2.0, 2.1, 2.6, 2000, 1), ("chat", 3.0, 3.3, 4.0, 3000, 8), ("chat", 4.0, 4.2, 6.0, 4000, 10),
]
TOML = 'by = "all"\nslo = ["ttft=0.25"]\npercentiles = [50, 95, 99.9]\ngpu_hour_cost = 3.0\n'


@pytest.fixture
def store(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [litellm_line(i, *r, base=BASE) for i, r in enumerate(REQUESTS)]
    (logs / "litellm.jsonl").write_text("\n".join(lines) + "\n")
    ingest([str(logs)], tmp_path / "store")
    return tmp_path / "store"


def _json(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def _share(rows: list[dict]) -> float:
    (row,) = rows
    return row["good_share_of_judged_requests"]


def test_one_config_file_changes_the_cli_the_report_and_the_dashboard_alike(store, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _share(_json("latency", "--store", str(store), "--by", "all")["tables"]["goodput"])
    (work / "attribution.toml").write_text(TOML)
    lat = _json("latency", "--store", str(store), "--by", "all")
    summary = _json("analyze", "--store", str(store), "--by", "all")
    report = build_report(Store.open(store), load_settings({"store": str(store)}), since="7d")
    view = View(store, Filters())
    dash = view.latency(by="all")
    overview = view.overview(by="all")
    # TTFT 0.2, 1.0, 0.4, 0.1, 0.3, 0.2 s; TPOT 0.1, 0.1, 0.12, none (one token), 0.1, 0.2 s. The default
    # (chat: ttft 0.5 s, tpot 0.05 s) is met by the one-token answer alone; the file's ttft <= 0.25 s by three
    assert before == pytest.approx(1 / 6) and _share(lat["tables"]["goodput"]) == pytest.approx(3 / 6)
    assert _share(summary["tables"]["goodput"]) == pytest.approx(3 / 6)
    assert _share(dash.tables["goodput"].to_dicts()) == pytest.approx(3 / 6)
    assert _share(overview.tables["goodput"].to_dicts()) == pytest.approx(3 / 6)
    (latency,) = [s for s in report.sections if s.id == "latency"]
    (table,) = [t.frame for t in latency.tables if t.name == "goodput"]
    assert _share(table.to_dicts()) == pytest.approx(3 / 6)
    (pct,) = [t.frame for t in latency.tables if t.name == "percentiles"]
    # the percentiles setting: p95 and p99.9 besides p50/p90/p99, in every front end
    for cols in (lat["tables"]["percentiles"][0], dash.tables["percentiles"].columns,
                 summary["tables"]["latency"][0], pct.columns):
        assert {"p50", "p90", "p95", "p99", "p99_9"} <= set(cols)
    # concurrency too: the time-weighted percentiles and the ones seen at arrival
    conc = _json("concurrency", "--store", str(store), "--by", "all")
    (csec,) = [s for s in report.sections if s.id == "concurrency"]
    (pods,) = [t.frame for t in csec.tables if t.name == "pods"]
    for cols in (conc["tables"]["pods"][0], view.concurrency(by="all").tables["pods"].columns,
                 overview.tables["concurrency"].columns, pods.columns):
        assert {"p50", "p90", "p95", "p99", "p99_9"} <= set(cols)
    assert conc["params"]["settings"]["percentiles"]["value"] == [50.0, 95.0, 99.9]
    seen = [r for r in conc["tables"]["pods"] if r["metric"] == "seen_at_arrival"]
    assert seen and all(r["p50"] <= r["p95"] <= r["p99_9"] <= r["peak"] for r in seen)
    assert overview.params["gpu_hour_cost"] == 3.0 and summary["params"]["gpu_hour_cost"] == 3.0
    # where each value came from
    used = lat["params"]["settings"]
    assert used["slo"] == {"value": ["ttft=0.25"], "from": f"file {work / 'attribution.toml'}"}
    assert used["percentiles"]["value"] == [50.0, 95.0, 99.9]
    assert summary["params"]["settings"]["ceiling_share"] == {"value": 0.05, "from": "default"}
    # a flag beats the file, the environment beats the file too
    flag = _json("latency", "--store", str(store), "--by", "all", "--slo", "ttft=0.5")
    assert _share(flag["tables"]["goodput"]) == pytest.approx(5 / 6)
    assert flag["params"]["settings"]["slo"]["from"] == "flag"
    monkeypatch.setenv("ATTRIBUTION_GPU_HOUR_COST", "4")
    cap = _json("capacity", "--store", str(store))
    assert cap["params"]["settings"]["gpu_hour_cost"] == {"value": 4.0, "from": "env ATTRIBUTION_GPU_HOUR_COST"}


def _groups(rows: list[dict], column: str) -> set:
    return {r[column] for r in rows}


def test_the_by_setting_groups_every_command_the_report_and_the_dashboard(store, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # without a setting: per workload (capacity: per pod as a whole)
    assert "workload" in _json("lengths", "--store", str(store))["tables"]["stats"][0]
    assert _json("capacity", "--store", str(store))["params"]["settings"]["by"] == {"value": "all",
                                                                                     "from": "default"}
    (work / "attribution.toml").write_text('by = "model"\n')
    source = {"value": "model", "from": f"file {work / 'attribution.toml'}"}
    out = {cmd: _json(cmd, "--store", str(store)) for cmd in ("lengths", "latency", "concurrency", "capacity",
                                                              "analyze")}
    for cmd, res in out.items():
        assert res["params"]["settings"]["by"] == source, cmd
        assert res["params"]["by"] == "model", cmd
    models = _groups(out["lengths"]["tables"]["stats"], "model")
    assert models and "workload" not in out["lengths"]["tables"]["stats"][0]
    assert _groups(out["latency"]["tables"]["goodput"], "model") == models
    report = build_report(Store.open(store), load_settings({"store": str(store)}), since="7d")
    (lat,) = [s for s in report.sections if s.id == "latency"]
    (good,) = [t.frame for t in lat.tables if t.name == "goodput"]
    assert set(good["model"]) == models
    view = View(store, Filters())
    assert set(view.lengths().tables["stats"]["model"]) == models
    assert set(view.latency().tables["goodput"]["model"]) == models
    # the flag beats the file; the environment beats the file
    flag = _json("lengths", "--store", str(store), "--by", "all")
    assert flag["params"]["settings"]["by"] == {"value": "all", "from": "flag"}
    monkeypatch.setenv("ATTRIBUTION_BY", "workload")
    env = _json("latency", "--store", str(store))
    assert env["params"]["settings"]["by"] == {"value": "workload", "from": "env ATTRIBUTION_BY"}
    assert "workload" in env["tables"]["goodput"][0]


@pytest.mark.parametrize(("env", "args", "needle"), [
    ({"ATTRIBUTION_JOBS": "abc"}, ["ingest", "LOGS"], "$ATTRIBUTION_JOBS = 'abc' is not valid"),
    ({"ATTRIBUTION_CHUNK_BYTES": "-5"}, ["ingest", "LOGS"], "$ATTRIBUTION_CHUNK_BYTES = '-5' is not valid"),
    ({"ATTRIBUTION_PERCENTILES": "50,101"}, ["latency"], "$ATTRIBUTION_PERCENTILES: percentiles = '50,101'"),
    ({"ATTRIBUTION_GPU_HOUR_COST": "cheap"}, ["capacity"], "$ATTRIBUTION_GPU_HOUR_COST: gpu_hour_cost"),
    ({"ATTRIBUTION_CEILING_SHARE": "x"}, ["analyze"], "$ATTRIBUTION_CEILING_SHARE: ceiling_share"),
    ({"ATTRIBUTION_BY": "pod"}, ["lengths"], "$ATTRIBUTION_BY: by = 'pod' is not valid (one of workload"),
    ({"ATTRIBUTION_TZ": "Mars/Olympus"}, ["arrivals"], "$ATTRIBUTION_TZ: tz = 'Mars/Olympus' is not valid (an IANA"),
])
def test_a_bad_environment_value_is_a_one_line_usage_error(store, tmp_path, monkeypatch, capsys, env, args, needle):
    # in-process: config reads the environment at each call, so a patched one is what a new process would see
    for name in [k for k in os.environ if k.startswith("ATTRIBUTION_")]:
        monkeypatch.delenv(name)
    for name, value in {"COLUMNS": "400", **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    argv = [str(logs) if a == "LOGS" else a for a in args]
    code, _, err = run_cli(capsys, *argv, "--store", str(tmp_path / "other-store" if args[0] == "ingest" else store))
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err and "internal error" not in err


def test_only_the_config_module_reads_the_environment():
    reads = re.compile(r"os\.environ|os\.getenv|getenv\(")
    found = [f"{p.relative_to(REPO)}:{i}" for p in sorted((REPO / "attribution").rglob("*.py"))
             if p.name != "config.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
    assert found == []


def test_no_progress_bar_on_stdout(store):
    # a query over 2 s (a big store, a busy machine) would print DuckDB's bar into --format json output
    from attribution.analyses.common import frames_connection

    for con in (Store.open(store).connect(), frames_connection(pl.DataFrame())):
        assert con.execute("select current_setting('enable_progress_bar')").fetchall() == [(False,)]
