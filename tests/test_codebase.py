"""Standing rules of the codebase, checked: lint clean, the library never imports streamlit, no private name
is imported from outside its owner, every SQL question (and test oracle) carries its header, the product never
runs an oracle, and nothing from the unlicensed console logs is committed."""

from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED

from attribution import queries


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    dirs = [d for d in ("attribution", "tests", "bench", "dashboards") if (REPO / d).is_dir()]
    proc = subprocess.run([ruff, "check", *dirs], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_library_never_imports_streamlit():
    for f in (REPO / "attribution").rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "streamlit" for n in names), f"{f} imports streamlit"


def _private_imports(path: Path, importer: str) -> list[str]:
    """`from a.b._c import d` / `from a.b.c import _d` / `import a.b._c` in `path` whose private part (a name
    with a leading underscore) belongs to a module or package `importer` is not inside."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            dotted = [[*node.module.split("."), a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            dotted = [a.name.split(".") for a in node.names]
        else:
            continue
        for parts in dotted:
            if parts[0] != "attribution":
                continue
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__") and not (
                        importer == owner or importer.startswith(owner + ".")):
                    found.append(f"{path}:{node.lineno} imports {'.'.join(parts)}")
    return found


def test_no_private_name_is_imported_from_outside_its_owner():
    """What another package or a test needs is a public name of the module (or package) that owns it."""
    found = []
    for f in [*(REPO / "attribution").rglob("*.py"), *(REPO / "tests").rglob("*.py")]:
        parts = f.relative_to(REPO).with_suffix("").parts
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found += _private_imports(f, importer)
    assert not found, "\n".join(found)


def test_the_private_import_rule_flags_what_it_should(tmp_path: Path):
    """The rule on lines that break it and lines that keep it (a package's own modules use its private parts)."""
    f = tmp_path / "probe.py"
    code = ("from attribution.wrappers._platforms import iter_items\n"
            "from attribution.compare.comparison import _helper, latency_tables\n"
            "import attribution.sources._stray_commas\n"
            "from attribution.sources import _vllm_layouts\n")
    f.write_text(code)
    assert len(_private_imports(f, "tests.probe")) == 4
    assert len(_private_imports(f, "attribution.wrappers.loki")) == 3  # the wrappers package's own module
    assert len(_private_imports(f, "attribution.sources.vllm_log")) == 2  # a module of sources
    assert len(_private_imports(f, "attribution.wrappers")) == 3  # the package itself (its __init__)


def test_a_temporary_table_made_from_a_query_file_is_named_as_the_file():
    """queries/README.md: `materialize(con, "int_x")` makes the table int_x; a view over a file is named as it.
    A temporary view alias (`queries.alias(con, view, table)`, "Names that are not files") puts a table made from
    one file behind another file's name: both names are files, written out in the call, and the README lists
    the alias."""
    import re

    found, aliases, calls = [], [], 0
    for f in (REPO / "attribution").rglob("*.py"):
        text = f.read_text()
        for file, table in re.findall(r'materialize\([^,()]+,\s*"(\w+)",\s*"(\w+)"', text):
            found += [f"{f.name}: {file}.sql as {table}"] if file != table else []
        for name, file in re.findall(r'temp (?:view|table) (\w+) as[^"]*"\s*\+\s*queries\.load\("(\w+)"\)', text):
            found += [f"{f.name}: {file}.sql as {name}"] if file != name else []
        calls += len(re.findall(r"\bqueries\.alias\(", text))
        aliases += re.findall(r'\bqueries\.alias\([^,()]+,\s*"(\w+)",\s*"(\w+)"\)', text)
    assert not found, found
    assert (REPO / "queries" / "int_threshold_requests.sql").exists()
    assert aliases and len(aliases) == calls, "a queries.alias call whose names are not written out"
    readme = (REPO / "queries" / "README.md").read_text()
    listed = readme[readme.index("## Names that are not files"):]
    for view, table in aliases:
        assert (REPO / "queries" / f"{view}.sql").exists() and (REPO / "queries" / f"{table}.sql").exists()
        assert f"`{view}`" in listed and f"`{table}`" in listed, f"queries/README.md does not list {table} as {view}"


@pytest.mark.parametrize("sql", sorted((REPO / "queries").glob("*.sql")), ids=lambda p: p.name)
def test_every_query_has_its_header(sql: Path):
    q = queries.load(sql.stem)
    for part in ("Question:", "Grain:", "Parameters:"):
        assert part in q.doc, f"{sql.name}: header lacks `-- {part}`"
    assert "select * from final" in q.sql.lower(), f"{sql.name}: end with `select * from final`"


ORACLES = sorted((REPO / "tests" / "oracle").glob("*.sql"))


@pytest.mark.parametrize("sql", ORACLES, ids=lambda p: p.name)
def test_every_oracle_has_its_header_and_the_product_never_runs_it(sql: Path):
    """Test oracles (tests/oracle) state an answer the product computes another way; one product path each."""
    text = sql.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    for part in ("Question:", "Grain:", "Parameters:", "Oracle:"):
        assert f"-- {part}" in header, f"{sql.name}: header lacks `-- {part}`"
    assert "select * from final" in text.lower(), f"{sql.name}: end with `select * from final`"
    assert not (REPO / "queries" / sql.name).exists(), f"{sql.name}: also a product query"
    for f in (REPO / "attribution").rglob("*.py"):
        assert f'"{sql.stem}"' not in f.read_text(), f"{f} runs the oracle {sql.stem}"


def test_no_unlicensed_console_log_lines_are_committed():
    seen = set()
    for f in list(SHARED.glob("traces/vllm_server_logs/*.txt")) + list(SHARED.glob("traces/real_logs/*.log")):
        for line in f.read_bytes().splitlines():
            if len(line) > 60:
                seen.add(hashlib.sha1(line.strip()).digest())
    assert seen, "../shared/traces console logs are missing"
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.splitlines()
    for name in tracked:
        p = REPO / name
        if not p.is_file() or p.stat().st_size > 5_000_000:
            continue
        hits = sum(1 for line in p.read_bytes().splitlines()
                   if len(line) > 60 and hashlib.sha1(line.strip()).digest() in seen)
        assert hits < 5, f"{name} holds {hits} lines of the unlicensed console logs in ../shared/traces"


# The module fixtures both xdist workers built when the file's tests were spread over them (bench/suite/suite30.md)
SHARED_MODULE_FIXTURES = {"test_memsplit_sample.py": "answer", "test_cli_conventions.py": "small_store",
                          "test_memsplit.py": "bound_store", "test_prometheus_scrapes.py": "store",
                          "test_lengths.py": "trace_store", "test_compare.py": "caused"}


@pytest.mark.parametrize("file", sorted(SHARED_MODULE_FIXTURES))
def test_a_file_whose_module_fixture_both_workers_built_is_one_unit_of_work(file: str):
    """Under xdist every test of these files runs on one worker (conftest.ONE_WORKER_FILES), which builds the
    module fixture once: while the file has it (else the grouping only lengthens a unit, and goes)."""
    from conftest import work_unit

    tree = ast.parse((REPO / "tests" / file).read_text())
    fixtures = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) for d in f.decorator_list
                if isinstance(d, ast.Call) and any(k.arg == "scope" and ast.literal_eval(k.value) == "module"
                                                   for k in d.keywords)}
    assert SHARED_MODULE_FIXTURES[file] in fixtures
    tests = [f"tests/{file}::{f.name}" for f in tree.body if isinstance(f, ast.FunctionDef)
             and f.name.startswith("test_")]
    assert len(tests) > 1 and len({work_unit(t) for t in tests}) == 1
