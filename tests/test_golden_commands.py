"""Golden outputs of every command on sample_logs/: each command runs in-process on the session's sample store
and its exit code, stdout and stderr (and the report files it writes) must equal tests/golden/commands/. They
pin behaviour across refactors; a deliberate change of output is regenerated with

    ATTRIBUTION_UPDATE_GOLDEN=1 pytest tests/test_golden_commands.py

and the diff of tests/golden/commands/ reviewed in the commit. Paths of the run are normalised (<STORE>,
<OUT>, <TREE>); nothing else in the output depends on the time of the run.
"""

from __future__ import annotations

import importlib
import itertools
import os
import re
from pathlib import Path

import pytest
import test_report
from conftest import REPO, once_per_session, report_key, run_cli, session_root
from rich.console import Console

from attribution import render

GOLDEN = REPO / "tests" / "golden" / "commands"
UPDATE = bool(os.environ.get("ATTRIBUTION_UPDATE_GOLDEN"))
WIDTH = 200  # a wide terminal's columns, so rich tables print whole whatever the test runner's COLUMNS


def _commands() -> dict[str, tuple[str, ...]]:
    """name -> arguments after the store option (the list in the refactor's before/after script)."""
    cmds: dict[str, tuple[str, ...]] = {}
    for fmt in ("json", "table", "csv"):
        f = ("--format", fmt)
        cmds[f"lengths.{fmt}"] = ("lengths", *f)
        cmds[f"lengths_hist.{fmt}"] = ("lengths", *f, "--table", "histogram")
        for name in ("concurrency", "latency", "capacity", "thresholds", "memsplit", "status", "metrics"):
            cmds[f"{name}.{fmt}"] = (name, *f)
        cmds[f"arrivals.{fmt}"] = ("arrivals", *f)
        cmds[f"thresholds_all.{fmt}"] = ("thresholds", *f, "--all")
        cmds[f"cache.{fmt}"] = ("cache", *f, "--gpu-hour-cost", "2.0", "--input-price", "3", "--cache-pricing",
                                "anthropic-5m")
        cmds[f"compare.{fmt}"] = ("compare", *f, "--cohort-by", "version", "--before", "0.15.1",
                                  "--after", "0.20.1")
        cmds[f"query.{fmt}"] = ("query", *f, "select deployment, kind, count(*) n, sum(line) s from engine_steps "
                                             "group by all order by all")
    for by in ("model", "deployment", "label", "day", "version"):
        cmds[f"lengths_by_{by}.json"] = ("lengths", "--format", "json", "--by", by)
        cmds[f"latency_by_{by}.json"] = ("latency", "--format", "json", "--by", by)
    for fmt in ("mooncake", "burstgpt"):  # replay: the trace on stdout, the summary on stderr
        cmds[f"replay.{fmt}"] = ("replay", "--since", "2026-05-05", "--until", "2026-05-05T00:20", "--speed", "2.5",
                                 "--format", fmt)
    # (test_report's sample report, the question: its analyses are run once per session, SAMPLE_REPORT)
    for fmt in ("json", "md"):
        cmds[f"report.{fmt}"] = ("report", "--since", "7d", "--gpu-hour-cost", "2.0", "--format", fmt,
                                 "--out", f"<OUT>/report.{fmt}")
    cmds["report3d"] = ("report", "--since", "3d", "--fail-on", "regression", "--format", "md",
                        "--out", "<OUT>/report3d.md")
    return cmds


COMMANDS = _commands()


def normalise(text: str, store: Path, out: Path) -> str:
    """The run's directories by name; the store's commit number (how many ingests and compactions the session
    ran before, not what the command computed)."""
    for path, name in ((store, "<STORE>"), (out, "<OUT>"), (REPO, "<TREE>")):
        text = text.replace(str(path), name)
    text = re.sub(r"\(commit \d+\)", "(commit <N>)", text)
    return re.sub(r'"commit": \d+', '"commit": "<N>"', text)


NUMBER = re.compile(r"(-?\d+\.\d+(?:[eE][-+]?\d+)?)")


def same_line(got: str, want: str) -> bool:
    """Equal but for the last digits of decimals: DuckDB's parallel sums add in no fixed order, so a mean can
    differ in its 15th significant digit from run to run (rel 1e-9 is far below anything printed for a person)."""
    if got == want:
        return True
    g, w = NUMBER.split(got), NUMBER.split(want)
    return len(g) == len(w) and all(
        a == b if i % 2 == 0 else float(a) == pytest.approx(float(b), rel=1e-9, abs=1e-12)
        for i, (a, b) in enumerate(zip(g, w, strict=True)))


def check(name: str, got: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"{path} is missing: ATTRIBUTION_UPDATE_GOLDEN=1 pytest {Path(__file__).name} writes it"
    g, w = got.splitlines(), path.read_text().splitlines()
    for i, (a, b) in enumerate(zip(g, w, strict=False)):  # the first differing line, not two pages of text
        if not same_line(a, b):
            pytest.fail(f"{name} differs from {path.relative_to(REPO)} at line {i + 1}\n got: {a}\nwant: {b}")
    assert len(g) == len(w), f"{name}: {len(g)} lines, {path.relative_to(REPO)} has {len(w)}"


# The library call of each command (seconds each: the analysis; the bootstrap, the what-if replay, the whole
# report): the forms of one command line (json, table, csv; the report's json and md) compute it once and
# render that one result (a copy) each time; the command's parsing, settings, connection, selection, progress
# lines and rendering still run every time. Keyed by the command line without its --format and --out (and
# the call's rank in the command, should it call twice); the report by the question asked
# (conftest.report_key), which test_report's early cohort asks too. The forms of a line run on one xdist
# worker (conftest.work_unit), whose process computes it.
ONCE = {"compare": ("attribution.compare", "compare"), "memsplit": ("attribution.memsplit", "memsplit"),
        "report": ("attribution.report", "build_report"),
        **{name: ("attribution.analyses", name) for name in ("lengths", "concurrency", "latency", "capacity",
                                                             "arrivals")},
        "thresholds": ("attribution.thresholds", "thresholds"), "metrics": ("attribution.histograms", "metrics"),
        "cache": ("attribution.cache.analysis", "cache"), "status": ("attribution.status", "store_status")}


# The report lines that ask test_report's sample report question: its analyses, run once per session for every
# module and worker (test_report.sample_report), are assembled and written by the command.
SAMPLE_REPORT = ("report.json", "report.md")


def _form_free(args: list[str]) -> tuple[str, ...]:
    return tuple(a for i, a in enumerate(args) if a not in ("--format", "--out")
                 and (i == 0 or args[i - 1] not in ("--format", "--out")))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_output_equals_the_golden_file(name, sample_store, tmp_path, tmp_path_factory, capsys, monkeypatch):
    monkeypatch.setattr(render, "out", Console(soft_wrap=True, width=WIDTH))
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("NO_COLOR", "1")
    cmd, *rest = COMMANDS[name]
    args = [cmd, "--store", str(sample_store), *(a.replace("<OUT>", str(tmp_path)) for a in rest)]
    if name in SAMPLE_REPORT:
        test_report.serve_sample_analyses(monkeypatch, sample_store, session_root(tmp_path_factory))
    elif cmd in ONCE:
        line, calls = (str(sample_store), *_form_free([cmd, *rest])), itertools.count()
        once_per_session(monkeypatch, importlib.import_module(ONCE[cmd][0]), ONCE[cmd][1],
                         report_key if cmd == "report" else lambda *a, **k: (line, next(calls)))
    code, out, err = run_cli(capsys, *args)
    check(f"{name}.out", normalise(f"exit {code}\n--- stdout\n{out}--- stderr\n{err}", sample_store, tmp_path))
    for written in sorted(tmp_path.glob("report*.*")):
        check(written.name, normalise(written.read_text(), sample_store, tmp_path))
    if cmd == "report":
        assert sorted(p.name for p in tmp_path.glob("report*.*")) == [Path(rest[-1]).name]


def test_the_golden_reports_traffic_equals_plain_duckdb_on_the_store_rows(sample_store):
    """The figures of the golden report's traffic table (tests/golden/report_sample_logs.json, pinned by
    test_report) worked out here with plain SQL over the stored gateway rows, none of the analysis code."""
    import json

    import duckdb

    from attribution.db import fetch
    from attribution.store import Store

    doc = json.loads((REPO / "tests" / "golden" / "report_sample_logs.json").read_text())
    (traffic,) = [s["tables"]["workloads"]["rows"] for s in doc["sections"] if s["id"] == "traffic"]
    rows = fetch(Store.open(sample_store).connect(),
                 "select key_alias, arrival, prompt_tokens, output_tokens from requests where source_kind = 'gateway'")
    con = duckdb.connect()
    con.register("g", rows.to_arrow())
    since = doc["window"]["since"]
    want = {r[0]: r[1:] for r in con.execute(
        "select key_alias, count(*), sum(prompt_tokens), avg(prompt_tokens), quantile_cont(prompt_tokens, 0.99), "
        "sum(output_tokens), avg(output_tokens) from g where arrival >= cast(? as timestamptz) group by all",
        [since]).fetchall()}
    assert sum(w[0] for w in want.values()) == doc["window"]["requests"]
    assert {r["workload"] for r in traffic} == set(want)
    for r in traffic:
        n, prompt, prompt_mean, prompt_p99, out, out_mean = want[r["workload"]]
        assert (r["requests"], r["prompt_tokens"], r["output_tokens"]) == (n, prompt, out), r["workload"]
        for got, worked in ((r["prompt_mean"], prompt_mean), (r["prompt_p99"], prompt_p99),
                            (r["output_mean"], out_mean)):
            assert got == pytest.approx(worked, rel=1e-5), r["workload"]  # the report keeps 6 digits


def test_the_forms_of_a_command_line_are_one_unit_of_work():
    """Under xdist the forms of one command line run on one worker (conftest.work_unit), whose process computes
    their library call once (ONCE); so do the tests of conftest.WITH_GOLDEN with the command they share."""
    from conftest import WITH_GOLDEN, work_unit

    unit = {name: work_unit(f"tests/{Path(__file__).name}::{test_command_output_equals_the_golden_file.__name__}"
                            f"[{name}]") for name in COMMANDS}
    lines: dict[tuple, set] = {}
    for name, args in COMMANDS.items():
        if args[0] in ONCE:  # (replay's forms are its trace formats: two computations)
            lines.setdefault(_form_free(list(args)), set()).add(unit[name])
    assert all(len(u) == 1 for u in lines.values())  # one unit per line ...
    assert len({unit[n] for n, a in COMMANDS.items() if a[0] in ONCE}) == len(lines)  # ... one line per unit
    assert len(lines) > 20  # every analysis command, its --by and --all lines
    for test, group in WITH_GOLDEN.items():
        file, name = test.split("::")
        assert file == "test_report.py" and callable(getattr(test_report, name))
        assert work_unit(f"tests/{test}") == unit[group]
