"""`attribution changes` and `attribution health` (the report's "what changed" and "ingest health" on their
own): each prints the library's answer (attribution.report.build.window_changes / window_health, which the
report itself calls) for the window the report would take, in JSON and CSV, and a wide table on a terminal.
The library runs once per question asked (conftest.computed_once): the test asserts that the CLI asked the
question the test itself asks (same window, same settings), then compares the CLI's output with the answer."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest
from conftest import computed_once, run_cli, settings_key

from attribution import render
from attribution.config import load_settings
from attribution.report import build
from attribution.store import Store


@pytest.fixture
def asked(monkeypatch) -> dict[str, list]:
    """The (function, window, settings) of every call of window_changes and window_health, CLI's and test's."""
    return {
        "changes": computed_once(monkeypatch, build, "window_changes",
                                 lambda con, w, st, **kw: ("changes", repr(w), settings_key(st), repr(kw))),
        "health": computed_once(monkeypatch, build, "window_health",
                                lambda store, con, w, st, **kw: ("health", str(store.root), repr(w),
                                                                 settings_key(st), repr(kw))),
    }


def _library(store, fn, **window):
    con = Store.open(store).connect()
    st = load_settings()
    w = build.report_window(con, default=st.window, **window)
    res = (build.window_changes(con, w, st) if fn == "changes"
           else build.window_health(Store.open(store), con, w, st))
    return json.loads(render.to_json(res.to_dict()))


def test_changes_prints_the_librarys_answer(sample_store, capsys, asked):
    code, out, _ = run_cli(capsys, "changes", "--store", str(sample_store), "--since", "2d", "--format", "json")
    assert code == 0
    got = json.loads(out)
    lib = _library(sample_store, "changes", since="2d")
    assert len(asked["changes"]) == 2 and len(set(asked["changes"])) == 1  # the CLI asked what the test asks
    assert got["tables"] == lib["tables"] and got["notes"] == lib["notes"]
    # two days back from the newest request: the previous two days are the vLLM upgrade's, this window SGLang's
    assert got["params"]["previous"] is not None and got["tables"]["traffic"]
    assert {r["change"] for r in got["tables"]["versions"]} <= {"new deployment", "new version", "restart",
                                                                "first seen"}
    code, out, _ = run_cli(capsys, "changes", "--store", str(sample_store), "--since", "2d", "--format", "csv",
                           "--table", "traffic")
    assert code == 0
    assert pl.read_csv(io.StringIO(out)).height == len(got["tables"]["traffic"])
    assert len(set(asked["changes"])) == 1


def test_health_prints_the_librarys_answer(sample_store, capsys, asked):
    code, out, _ = run_cli(capsys, "health", "--store", str(sample_store), "--gap-minutes", "60", "--format", "json")
    assert code == 0
    got = json.loads(out)
    assert got["params"]["gap_minutes"] == 60
    lib = _library(sample_store, "health")  # the default 120 minutes: fewer or the same gaps
    assert got["tables"]["joins"] == lib["tables"]["joins"] and got["tables"]["files"] == lib["tables"]["files"]
    assert len(got["tables"]["gaps"]) >= len(lib["tables"]["gaps"])
    assert {j["matched_share"] for j in got["tables"]["joins"]} == {1.0}  # sample_logs: every request matched
    code, out, _ = run_cli(capsys, "health", "--store", str(sample_store))
    assert code == 0 and "engine <-> gateway matches per source" in out and "100.0%" in out
    # the CLI with 60 minutes asked its own question; without --gap-minutes, the test's (the default 120)
    cli60, library, cli = asked["health"]
    assert cli == library != cli60 and "gap_minutes=60.0" in cli60[3] and "gap_minutes=120.0" in library[3]


def test_health_of_an_empty_store_says_there_is_nothing(tmp_path, capsys):
    Store.open(tmp_path / "s", create=True)
    code, _, err = run_cli(capsys, "health", "--store", str(tmp_path / "s"))
    assert code != 0 and "holds no requests" in err
