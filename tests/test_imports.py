"""Lean imports, checked in a fresh interpreter (as harlequin does): the library loads no front end and the
CLI starts without the chart and dashboard stacks, even for `--help` (which builds every command's options).
A command imports its analysis when it runs; the last test checks that one does, so the lean start is not
bought by a command that lost its work."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

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


def _modules() -> dict[str, Path]:
    pkg = REPO / "attribution"
    out = {}
    for f in pkg.rglob("*.py"):
        name = ".".join(f.relative_to(REPO).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> list[tuple[str, str, int]]:
    """(module imported, name imported from it or '', line) for every import in the file, in functions too
    (a lazy import is still a dependency), but not under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, "", node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base.split(".")[: len(base.split(".")) - node.level + 1] + ([mod] if mod else []))
            for a in node.names:
                sub = f"{mod}.{a.name}"
                found.append((sub, "", node.lineno) if sub in mods else (mod, a.name, node.lineno))
    return found


def test_no_import_cycles_between_modules():
    """Module A imports B (at the top or inside a function) and B imports A, directly or through others: a
    cycle means neither can be read, tested or loaded alone. A package and its own submodules are exempt."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for mod, _, _ in _imports(name, path, mods):
            parts = mod.split(".")
            deps |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & mods.keys()
        graph[name] = {d for d in deps if d != name and not d.startswith(name + ".") and not name.startswith(d + ".")}
    cycles, index, low, stack, on = [], {}, {}, [], set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                on.discard(w)
                comp.append(w)
            on.discard(v)
            if comp:
                cycles.append(sorted([v, *comp]))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_private_names_imported_across_modules():
    mods = _modules()
    found = [f"{path.relative_to(REPO)}:{line}: {mod}.{name}" for module, path in mods.items()
             for mod, name, line in _imports(module, path, mods)
             if name.startswith("_") and not name.startswith("__") and mod.startswith("attribution")]
    assert found == []
