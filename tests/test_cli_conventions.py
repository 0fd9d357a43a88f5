"""CLI conventions every command keeps: `--version`; `--format csv|json` only where the command writes it (else
a one-line usage error, exit 2); JSON numbers are JSON numbers (HUGEINT, DECIMAL; NaN and infinity null);
piped tables never split a word across lines; CSV keeps the notes on stderr; every command has help with an
example and a row in the README's command table."""

from __future__ import annotations

import csv
import inspect
import io
import json
import re
from datetime import date, datetime, time
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import polars as pl
import pytest
import typer
from conftest import REPO, litellm_line, run_cli

from attribution import render
from attribution.cli import app
from attribution.render import Format

BOX = set("│┃┏┓┗┛━─┡┩└┘╇╈┼")
# (alias, start, first token, end, prompt, completion), seconds after the base; two cohorts by label
REQUESTS = [(("chat-web", "search-backend")[i % 2], 7.0 * i, 7.0 * i + 0.3, 7.0 * i + 2.5, 300 * (i + 1), 5 + i)
            for i in range(12)]

SGLANG_START = [
    "[2025-02-11 00:56:00] server_args=ServerArgs(model_path='Qwen/Qwen3.5-35B-A3B', tp_size=1, "
    "mamba_full_memory_ratio=0.9)",
    "[2025-02-11 00:56:06] max_total_num_tokens=65478, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=6, context_len=32768, available_gpu_mem=7.40 GB",
    "[2025-02-11 00:57:00] Decode batch, #running-req: 6, #full token: 9000, full token usage: 0.14, mamba num: 18, "
    "mamba usage: 1.00, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 3",
]


def _strict_json(text: str):
    """JSON as the RFC has it: NaN and Infinity are not JSON."""
    def bad(name: str):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """Twelve LiteLLM requests in two labelled cohorts and an SGLang start, in a store the tests only read."""
    tmp_path = tmp_path_factory.mktemp("small")
    store = tmp_path / "store"
    for label, part in (("before", REQUESTS[:6]), ("after", REQUESTS[6:])):
        d = tmp_path / label
        d.mkdir()
        (d / "litellm.jsonl").write_text(
            "\n".join(litellm_line(i, *r) for i, r in enumerate(part, start=0 if label == "before" else 6)) + "\n")
    # an SGLang start (the documented startup lines), so that memsplit has a pool to split
    (tmp_path / "before" / "sglang.log").write_text("\n".join(SGLANG_START) + "\n")
    from attribution.ingest import ingest

    for label in ("before", "after"):
        ingest([str(tmp_path / label)], store, label=label, tz="UTC", deployment="pod")
    return store


def test_version_is_the_installed_package_version(capsys):
    code, out, err = run_cli(capsys, "--version")
    assert code == 0 and err == ""
    try:
        expected = version("attribution")
    except PackageNotFoundError:
        expected = "0+unknown"
    assert out == f"attribution {expected}\n"


# Every command with --format, the arguments that make it run on the small store, and the formats it writes.
RUNS = {
    "lengths": ([], ("table", "csv", "json")),
    "concurrency": ([], ("table", "csv", "json")),
    "latency": ([], ("table", "csv", "json")),
    "capacity": ([], ("table", "csv", "json")),
    "cache": ([], ("table", "csv", "json")),
    "analyze": ([], ("table", "csv", "json")),
    "thresholds": ([], ("table", "csv", "json")),
    "compare": (["--before", "before", "--after", "after", "--resamples", "20"], ("table", "csv", "json")),
    "memsplit": (["--no-whatif"], ("table", "csv", "json")),
    "changes": ([], ("table", "csv", "json")),
    "health": ([], ("table", "csv", "json")),
    "metrics": ([], ("table", "csv", "json")),
    "arrivals": ([], ("table", "csv", "json")),
    "status": ([], ("table", "json")),
    "query": (["select label, count(*) n from requests group by 1 order by 1"], ("table", "csv", "json")),
}


def test_every_format_option_is_listed_here():
    """A new command with `--format` gets a row in RUNS (and so the checks below)."""
    with_format = {c.name for c in app.registered_commands
                   if any(p.annotation is not None and "Format" in str(p.annotation)
                          for p in inspect.signature(c.callback).parameters.values())}
    # a parser name; report has html|md|json; replay's --format names a load generator's trace format
    with_format -= {"ingest", "report", "dashboard", "simulate", "replay"}
    assert with_format == set(RUNS), f"commands with --format missing from RUNS: {sorted(with_format - set(RUNS))}"


@pytest.mark.parametrize("command", sorted(RUNS))
def test_format_written_or_refused_in_one_line(capsys, small_store, command):
    args, formats = RUNS[command]
    for fmt in ("csv", "json"):
        code, out, err = run_cli(capsys, command, *args, "--store", str(small_store), "--format", fmt)
        if fmt not in formats:
            assert code == 2 and out == "", (command, fmt, code, out)
            assert err.count("\n") == 1 and f"--format {fmt}" in err and " or ".join(formats[:-1]) in err, err
            continue
        assert code == 0, (command, fmt, err)
        assert not BOX & set(out), f"{command} --format {fmt} printed a table"
        if fmt == "json":
            _strict_json(out)
        else:
            rows = list(csv.reader(io.StringIO(out)))
            assert rows and len({len(r) for r in rows}) == 1, f"{command} --format csv: ragged CSV"


def test_csv_keeps_the_notes_on_stderr(capsys, small_store):
    """The notes JSON carries are the `note:` lines on stderr with CSV; stdout holds the CSV alone."""
    code, out, _ = run_cli(capsys, "concurrency", "--store", str(small_store), "--format", "json")
    notes = _strict_json(out)["notes"]
    assert notes, "the concurrency of gateway logs has notes (queue time unknown)"
    code, out, err = run_cli(capsys, "concurrency", "--store", str(small_store), "--format", "csv")
    assert code == 0 and "note:" not in out
    assert [ln.removeprefix("note: ") for ln in err.splitlines() if ln.startswith("note: ")] == notes


def test_json_numbers_are_json_numbers(capsys, small_store):
    sql = ("select sum(prompt_tokens) total, sum(prompt_tokens)::varchar total_text, "
           "12345678901234567890123::hugeint huge, 2.50::decimal(6,2) dec, 'nan'::double nan, 'inf'::double inf, "
           "'-inf'::double ninf, date '2026-05-04' d, timestamp '2026-05-04 10:11:12' ts, "
           "[1.5, 'nan'::double] xs from requests")
    code, out, err = run_cli(capsys, "query", sql, "--store", str(small_store), "--format", "json")
    assert code == 0, err
    (row,) = _strict_json(out)
    assert row == {"total": int(row["total_text"]), "total_text": row["total_text"],
                   "huge": 12345678901234567890123, "dec": 2.5, "nan": None, "inf": None, "ninf": None,
                   "d": "2026-05-04", "ts": "2026-05-04T10:11:12", "xs": [1.5, None]}
    assert isinstance(row["total"], int) and isinstance(row["dec"], float)


def test_json_writer_values():
    doc = {"d": Decimal("0.1"), "big": Decimal("1e30"), "nan": Decimal("NaN"), "np": np.int64(7),
           "npf": np.float64("nan"), "t": time(1, 2), "dt": datetime(2026, 1, 2, 3, 4, 5), "day": date(2026, 1, 2),
           "tuple": (1, float("inf")), 3: "int key", "other": Format.csv}
    assert json.loads(render.to_json(doc)) == {
        "d": 0.1, "big": 10**30, "nan": None, "np": 7, "npf": None, "t": "01:02:00", "dt": "2026-01-02T03:04:05",
        "day": "2026-01-02", "tuple": [1, None], "3": "int key", "other": "csv"}


def _words_intact(text: str, words: list[str]) -> list[str]:
    """The words that no line of `text` holds whole (a word folded across lines)."""
    return [w for w in words if not any(w in line for line in text.splitlines())]


def test_piped_table_keeps_every_word_on_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # describes a terminal the pipe is not
    words = ["hybrid.linear_attention_prefill", "sglang.chunked_prefill_size_over_the_limit", "x" * 300]
    df = pl.DataFrame({"feature": words, "description": [" ".join(words)] * 3, "n": [1, 22, 333]})
    render.out.print(render.table(df, "a title"))
    out = capsys.readouterr().out
    assert _words_intact(out, words) == []
    body = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert len(body) == df.height, "a row spans more than one line"
    assert all(ln == ln.rstrip() for ln in out.splitlines()), "lines padded to the pipe width"


def test_piped_thresholds_table_splits_no_word(capsys, small_store):
    code, out, _ = run_cli(capsys, "thresholds", "--store", str(small_store), "--format", "json")
    doc = _strict_json(out)
    words = sorted({w for r in doc["tables"]["requests"] for k in ("feature", "quantity", "method")
                    for w in str(r[k]).split()})
    assert any(len(w) > 25 for w in words)  # long enough to be folded in 80 columns
    code, out, _ = run_cli(capsys, "thresholds", "--store", str(small_store))
    assert code == 0
    assert _words_intact(out, words) == []


def _commands() -> list[tuple[str, typer.models.CommandInfo]]:
    """Every command with its full name: `ingest`, and a group's `store upgrade`."""
    out = [(c.name or c.callback.__name__, c) for c in app.registered_commands]
    for g in app.registered_groups:
        out += [(f"{g.name} {c.name or c.callback.__name__}", c) for c in g.typer_instance.registered_commands]
    return out


def test_every_command_has_an_example_and_a_readme_row():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `attribution ([a-z][a-z-]*(?: [a-z][a-z-]*)*)", section, flags=re.M))
    problems = []
    for name, c in _commands():
        doc = c.help or c.callback.__doc__ or ""
        if not doc.strip():
            problems.append(f"`attribution {name}` has no help (a docstring)")
        if f"Example: attribution {name}" not in doc:
            problems.append(f"`attribution {name}`'s help has no line 'Example: attribution {name} ...'")
        if name not in rows:
            problems.append(f"`attribution {name}` has no row '| `attribution {name} ...` | ... |' in the README's "
                            "## Commands table")
    assert not problems, "\n".join(problems)
    assert rows <= {name for name, _c in _commands()}, "README rows for commands that do not exist"

