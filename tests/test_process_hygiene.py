"""Worker processes and the dashboard never import modules from the directory the user runs the tool in: a
planted `zstandard.py` / `secrets.py` there (which would shadow the real ones) must not be executed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from synthetic_source import write_log

from attribution import dashboard_launch, workers

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

_PLANT = "import pathlib\npathlib.Path({marker!r}).write_text('imported from the working directory')\n"


def _plant(cwd: Path) -> list[Path]:
    """`zstandard.py` and `secrets.py` in `cwd` that leave a marker file when imported."""
    markers = []
    for name in ("zstandard", "secrets"):
        marker = cwd / f"{name}.imported"
        (cwd / f"{name}.py").write_text(_PLANT.format(marker=str(marker)))
        markers.append(marker)
    return markers


_INGEST = """
import sys
sys.path[:0] = [{tests!r}, {repo!r}]
from synthetic_source import register
register()
import attribution.ingest.run as m
m.PARALLEL_MIN_BYTES = 0
s = m.ingest([{src!r}], {store!r}, chunk_bytes=4096, jobs=2)
print(sorted(f.status for f in s.files), s.rows.get("engine_steps"))
"""


def test_ingest_workers_do_not_import_from_the_working_directory(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    markers = _plant(cwd)
    src = tmp_path / "logs"
    src.mkdir()
    for i in range(3):
        write_log(src / f"pod{i}.log", i * 1000, 300)
    code = _INGEST.format(tests=str(TESTS), repo=str(REPO), src=str(src), store=str(tmp_path / "s"))
    # -P: the ingest process itself does not put its working directory on sys.path (the installed
    # `attribution` command does not either); only its workers are under test
    r = subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("]")[-1].strip() == "900"
    assert "'read', 'read', 'read'" in r.stdout
    assert [m.name for m in markers if m.exists()] == []


def test_import_path_leaves_out_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    path = workers.import_path()
    assert "" not in path and str(tmp_path) not in path
    assert str(REPO) in path  # attribution itself stays importable


def test_dashboard_interpreter_does_not_import_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    markers = _plant(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:")  # even a PYTHONPATH naming it (or '') is cleaned
    cmd, env = dashboard_launch.command(tmp_path / "store")
    # the launcher's interpreter and flags, running a probe in place of `-m streamlit run ...`
    probe = [*cmd[: cmd.index("-m")], "-c", "import secrets, zstandard, attribution; print(zstandard.__file__)"]
    r = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert str(tmp_path) not in r.stdout
    assert [m.name for m in markers if m.exists()] == []
