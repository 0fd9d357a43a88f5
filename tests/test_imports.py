"""Lean imports, checked in a fresh interpreter (as harlequin does): the library loads no front end and the
CLI starts without the chart and dashboard stacks, even for `--help` (which builds every command's options).
A command imports its analysis when it runs; the last test checks that one does, so the lean start is not
bought by a command that lost its work."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

FRONT_ENDS = ("plotly", "streamlit")
# what starting the CLI must not load either: the analyses' engines, loaded by the command that needs them
HEAVY = (*FRONT_ENDS, "numpy", "duckdb")


def _loaded(code: str) -> set[str]:
    """Top-level packages in sys.modules after running `code` in a new interpreter from the repository."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_library_loads_no_front_end():
    loaded = _loaded("import attribution")
    assert "attribution" in loaded
    assert not loaded & {*FRONT_ENDS, "typer", "rich"}


def test_importing_the_cli_loads_neither_plotly_nor_streamlit_nor_the_analyses_engines():
    loaded = _loaded("import attribution.cli")
    assert {"attribution", "typer"} <= loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_help_builds_every_command_without_them():
    loaded = _loaded("import contextlib, io, sys\nfrom attribution.cli import main\nsys.argv[:] = ['attribution', "
                     "'--help']\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf), "
                     "contextlib.suppress(SystemExit):\n    main()\nassert 'thresholds' in buf.getvalue()")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_command_loads_what_it_runs(tmp_path):
    code = ("import contextlib, io, sys\nfrom attribution.cli import main\nsys.argv[:] = ['attribution', 'query', "
            f"'select 1 as x', '--store', {str(tmp_path / 's')!r}, '--format', 'json']\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main()")
    assert "duckdb" in _loaded(code)
