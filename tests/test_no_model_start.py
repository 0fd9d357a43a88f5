"""An engine start without a model name (issue 16, finding 5): its model line was not logged or was rotated
away. `memsplit` and `report` said "config.json: no such config file" (exit 3: the empty name was read as the
path `.`); now the start's model profile is unknown, said so, and the report is written."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, shared

from attribution.ingest import ingest

REAL = "vllm_repo-jayashan10-Deepseek-qwen-deployment.log"
MODEL = "deepseek-r1-14b"  # the model this log's start names; every line naming it is left out below


@pytest.fixture
def store(tmp_path):
    """The real log without the lines that name its model (read from ../shared, written to tmp_path only)."""
    lines = shared("traces", "real_logs", REAL).read_text(errors="replace").splitlines(keepends=True)
    kept = [ln for ln in lines if MODEL not in ln]
    assert len(kept) < len(lines)
    (tmp_path / "vllm.log").write_text("".join(kept))
    ingest([str(tmp_path / "vllm.log")], tmp_path / "store", year=2026, tz="UTC")
    return tmp_path / "store"


def test_memsplit_says_the_model_is_unknown(store, capsys):
    code, _out, err = run_cli(capsys, "memsplit", "--store", str(store))
    assert "config.json" not in err.replace("path/to/config.json", "")
    assert code == 2 and "names no model" in err and "model profile is unknown" in err


def test_report_is_written_and_says_why_there_is_no_memory_split(store, tmp_path, capsys):
    out = tmp_path / "report.json"
    code, _out, err = run_cli(capsys, "report", "--store", str(store), "--out", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    mem = next(s for s in doc["sections"] if s["id"] == "memsplit")
    assert any("names no model" in line for line in mem["lines"])
