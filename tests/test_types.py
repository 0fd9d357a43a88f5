"""The type checker over the package, as configured in pyproject.toml ([tool.mypy]: every module checked, the
core strictly). mypy is in the `test` extra; its cache (.mypy_cache) makes a rerun take seconds."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO


def test_mypy_is_clean():
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"mypy found type errors:\n{run.stdout[-6000:]}{run.stderr[-2000:]}"
    assert "Success: no issues found" in run.stdout, run.stdout
