"""`attribution changes` and `attribution health` (the report's "what changed" and "ingest health" on their
own): each prints the library's answer (attribution.report.build.window_changes / window_health, which the
report itself calls) for the window the report would take, in JSON and CSV, and a wide table on a terminal."""

from __future__ import annotations

import io
import json

import polars as pl
from conftest import run_cli

from attribution import render
from attribution.config import load_settings
from attribution.report.build import report_window, window_changes, window_health
from attribution.store import Store


def _library(store, fn, **window):
    con = Store.open(store).connect()
    st = load_settings()
    w = report_window(con, default=st.window, **window)
    res = fn(con, w, st) if fn is window_changes else fn(Store.open(store), con, w, st)
    return json.loads(render.to_json(res.to_dict()))


def test_changes_prints_the_librarys_answer(sample_store, capsys):
    code, out, _ = run_cli(capsys, "changes", "--store", str(sample_store), "--since", "2d", "--format", "json")
    assert code == 0
    got = json.loads(out)
    lib = _library(sample_store, window_changes, since="2d")
    assert got["tables"] == lib["tables"] and got["notes"] == lib["notes"]
    # two days back from the newest request: the previous two days are the vLLM upgrade's, this window SGLang's
    assert got["params"]["previous"] is not None and got["tables"]["traffic"]
    assert {r["change"] for r in got["tables"]["versions"]} <= {"new deployment", "new version", "restart",
                                                                "first seen"}
    code, out, _ = run_cli(capsys, "changes", "--store", str(sample_store), "--since", "2d", "--format", "csv",
                           "--table", "traffic")
    assert code == 0
    assert pl.read_csv(io.StringIO(out)).height == len(got["tables"]["traffic"])


def test_health_prints_the_librarys_answer(sample_store, capsys):
    code, out, _ = run_cli(capsys, "health", "--store", str(sample_store), "--gap-minutes", "60", "--format", "json")
    assert code == 0
    got = json.loads(out)
    assert got["params"]["gap_minutes"] == 60
    lib = _library(sample_store, window_health)  # the default 120 minutes: fewer or the same gaps
    assert got["tables"]["joins"] == lib["tables"]["joins"] and got["tables"]["files"] == lib["tables"]["files"]
    assert len(got["tables"]["gaps"]) >= len(lib["tables"]["gaps"])
    assert {j["matched_share"] for j in got["tables"]["joins"]} == {1.0}  # sample_logs: every request matched
    code, out, _ = run_cli(capsys, "health", "--store", str(sample_store))
    assert code == 0 and "engine <-> gateway matches per source" in out and "100.0%" in out


def test_health_of_an_empty_store_says_there_is_nothing(tmp_path, capsys):
    Store.open(tmp_path / "s", create=True)
    code, _, err = run_cli(capsys, "health", "--store", str(tmp_path / "s"))
    assert code != 0 and "holds no requests" in err
