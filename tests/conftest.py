"""Shared fixtures: every test gets its own store directory and a pinned time zone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from hypothesis import settings, strategies

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# The suite (what CI runs) draws the same property-test examples every run: a landing never depends on the
# examples a random seed happened to draw, and a failure reproduces anywhere. ATTRIBUTION_HYPOTHESIS_RANDOM=1
# searches afresh (the edit loop, after a change to a parser or a reader).
settings.register_profile("suite", derandomize=True, print_blob=True)
if not os.environ.get("ATTRIBUTION_HYPOTHESIS_RANDOM"):
    settings.load_profile("suite")

# st.text()'s own alphabet, characters(codec="utf-8"), named by category instead: the same characters (all but
# the surrogates), so the same examples drawn, without Hypothesis encoding every code point to find them (2 s
# of CPU in each process where .hypothesis/ does not cache that answer yet: a fresh checkout, CI). Pass it:
# st.text(UTF8, ...).
UTF8 = strategies.characters(exclude_categories=("Cs",))


# Tests that run for many seconds whatever the machine (the browser tests of the dashboard: one unit of a minute,
# ONE_WORKER_FILES): started first, so that under `-n 2` (xdist hands out
# tests in collection order) neither worker is left alone with one of them at the end of the run.
LONG = ("test_types.py::", "test_soak.py::", "test_dashboard_browser.py::")


@pytest.hookimpl(tryfirst=True)  # (before `-m` deselects: the marker added here counts)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark_session" not in getattr(item, "fixturenames", ()):
            continue
        if work_unit(item.nodeid).startswith("spark-free:"):
            raise pytest.UsageError(f"{item.nodeid} uses the spark_session: not a SPARK_FREE test (conftest)")
        # a test on the session's JVM is `slow`: the quick subset (-m 'not slow') leaves the JVM out; the whole
        # suite, which CI runs, keeps every one
        item.add_marker(pytest.mark.slow)
    first = [i for i in items if i.get_closest_marker("slow") or any(k in i.nodeid for k in LONG)]
    ids = {id(i) for i in first}
    items[:] = first + [i for i in items if id(i) not in ids]


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "summaries: the ingests of this test prepare the readers' inputs after "
                            "their commit (attribution.summaries), as a user's do; off in every other test")
    # For the whole process (module and session fixtures too) and the processes it starts: an ingest's
    # after-commit preparing (join cache, filter values: a DuckDB file per commit) costs more CPU than the
    # ingest of a small test file, and the readers build what they read lazily, with the same answers
    # (test_summaries checks both ways); tests of the preparing itself are marked `summaries` (_isolated).
    # Scratch stores are not fsynced: a kill, which the kill tests send, still leaves a consistent store.
    os.environ["ATTRIBUTION_SUMMARIES"] = "0"
    os.environ["ATTRIBUTION_FSYNC"] = "0"


@pytest.fixture(autouse=True)
def _isolated(request, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("ATTRIBUTION_CHUNK_BYTES", raising=False)
    if request.node.get_closest_marker("summaries") is not None:  # (off for every other test: pytest_configure)
        monkeypatch.delenv("ATTRIBUTION_SUMMARIES", raising=False)


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


def in_ci() -> bool:
    """CI runs with CI=true: there a missing browser is a failure, not a skip (it would hide the test)."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def app_test(script: Path, **kwargs):
    """Streamlit's `AppTest.from_file(script, **kwargs)`, but Streamlit's scan of every installed distribution's
    metadata for its v2 components (each new AppTest scans again on its first run: about 0.3 s of CPU, a third
    of a small page's run) done once per process: the installed packages do not change during a session, and
    the scan's answer (the components found, none for this app) is only read."""
    import functools

    from streamlit.components.v2 import manifest_scanner
    from streamlit.testing.v1 import AppTest

    if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):  # (looked up there at each run)
        manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    return AppTest.from_file(str(script), **kwargs)


def need_chromium(path: str) -> None:
    """Skip a browser test when Chromium (or Playwright) is missing, except in CI, where the test fails."""
    import importlib.util

    missing = ("playwright" if importlib.util.find_spec("playwright") is None
               else None if Path(path).is_file() else f"Chromium at {path}")
    if missing:
        if in_ci():
            pytest.fail(f"no {missing}: CI installs Debian's chromium package and the test extras (.ci/run)")
        pytest.skip(f"no {missing}")


def shared(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.fail(f"{p} is missing: ../shared must be checked out beside the repository")
    return p


SAMPLE = REPO / "sample_logs"


def sample_store_at(basetemp: Path) -> Path:
    """sample_logs/ ingested into `<basetemp>/sample_store` (year and zone from its ground_truth.json): a copy,
    private to this worker, of the one store the whole session ingests (sample_master)."""
    return _worker_copy(basetemp, "sample_store", sample_master)


def days_store_at(basetemp: Path) -> Path:
    """The `sample` scenario simulated small over sample_logs' days, in `<basetemp>/days_store`: a copy, private
    to this worker, of the one store the whole session builds (days_master)."""
    return _worker_copy(basetemp, "days_store", days_master)


def _worker_copy(basetemp: Path, name: str, master) -> Path:
    import shutil

    store = basetemp / name
    if not (store / "attribution-store.json").exists():
        root = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp  # as session_root
        tmp = basetemp / f".{name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(master(root), tmp)
        shutil.rmtree(store, ignore_errors=True)
        tmp.rename(store)
    return store


def _session_master(root: Path, name: str, build) -> Path:
    """`build(<root>/<name>)` once per test session, where `root` is common to every xdist worker (the parent of
    their base temporary directories): the first worker to ask builds under a file lock, the others wait for
    it. Workers copy it (_worker_copy): a store is a few MB, and a copy keeps each worker's readers (the join
    cache under `_cache/`, commit numbers) to itself. Ingests in `build` are prepared after their commit as a
    user's are (whatever the asking test's environment): the workers' copies carry the join cache instead of
    each building it."""
    import fcntl
    import shutil

    master, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if not done.exists():
            shutil.rmtree(master, ignore_errors=True)  # a half-written store of a worker that failed
            was = os.environ.pop("ATTRIBUTION_SUMMARIES", None)
            try:
                build(master)
            finally:
                if was is not None:
                    os.environ["ATTRIBUTION_SUMMARIES"] = was
            done.write_text("")
    return master


def sample_master(root: Path) -> Path:
    """sample_logs/ ingested once per test session into `<root>/sample_master` (_session_master): its ingest costs
    15-25 s of CPU."""
    from attribution.ingest import ingest

    def build(master: Path) -> None:
        truth = json.loads((SAMPLE / "ground_truth.json").read_text())
        ingest([str(SAMPLE)], master, year=truth["year"], tz=truth.get("tz", "UTC"))

    return _session_master(root, "sample_master", build)


DAYS_PROMETHEUS_STEP_S = 3600  # the days store's Prometheus exports (the `sample` scenario's is 300)


def days_master(root: Path) -> Path:
    """The `sample` scenario at 600 requests a member over sample_logs' days (the vLLM pods 2026-05-04 to 05-09,
    the SGLang pod 05-08 to 05-13; every source kind, every table partitioned by day), built once per test
    session into `<root>/days_master` (_session_master; ~3 CPU s): the windows of tests/test_pruning.py cut it as
    they cut sample_logs (MIDNIGHT keeps engine_steps' 05-05 to 05-07 of ten days), at a size where an analysis
    costs its per-query overhead, not the 100k requests of the sample store (1.5-3 CPU s an analysis on
    DuckDB, 20-45 s on Spark's local[2] under load). The vLLM pods' Prometheus exports at an hour's step, not the
    scenario's 5 minutes: 38k histogram samples instead of 460k, which Spark's metric_increase read in 13-21
    JVM s an analysis (the windows still cut them at midnight, between two samples and relative to the newest
    request). Prepared after its commit as a user's ingest is (the join cache too, as the sample store's)."""
    import shutil
    from dataclasses import replace

    from attribution.ingest import ingest
    from attribution.simulate import output

    def build(master: Path) -> None:
        logs = root / "days_master.logs"
        shutil.rmtree(logs, ignore_errors=True)
        plan = output.load_plan
        with pytest.MonkeyPatch.context() as m:
            m.setattr(output, "load_plan", lambda name: replace(plan(name), prometheus_step_s=DAYS_PROMETHEUS_STEP_S))
            truth = output.simulate_to_dir("sample", logs, requests=600, days=6, seed=5)
        ingest([str(logs)], master, year=truth["year"], tz=truth["tz"])
        assert list(master.glob("_cache/*"))  # (the commit's join is cached)

    return _session_master(root, "days_master", build)


def sample_slice(dst: Path, lines: int = 1500, points: int = 48, only: tuple[str, ...] = ()) -> None:
    """sample_logs/ cut short, every file kept where it is (the paths name the deployments): each log's first
    `lines` lines, each Prometheus series' first `points` samples, the ignore file and what it ignores. Every
    format and pod of sample_logs at 1/60 of its 265 MB (by default). `only`: the files under these
    subdirectories alone."""
    import gzip
    import itertools
    import shutil

    for src in SAMPLE.rglob("*"):
        if not src.is_file() or (only and not any(src.is_relative_to(SAMPLE / o) for o in only)):
            continue
        out = dst / src.relative_to(SAMPLE)
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.name.endswith(".json.gz"):
            doc = json.loads(gzip.decompress(src.read_bytes()))
            for series in doc["data"]["result"]:
                series["values"] = series["values"][:points]
            out.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
        elif src.suffix == ".gz":
            with gzip.open(src, "rb") as fh:
                out.write_bytes(gzip.compress(b"".join(itertools.islice(fh, lines)), compresslevel=1))
        else:
            shutil.copy(src, out)


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """sample_logs/ ingested once per test session (this worker's copy); tests only read it."""
    return sample_store_at(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def days_store(tmp_path_factory) -> Path:
    """The `sample` scenario small over sample_logs' days (days_master; this worker's copy); tests only read it."""
    return days_store_at(tmp_path_factory.getbasetemp())


def litellm_line(i: int, alias: str, start: float, first: float, end: float, prompt: int, out: int,
                 base: float = 1739235379.0) -> str:
    """One LiteLLM spend-log line (the documented `StandardLoggingPayload` fields the gateway source reads) of
    a streamed request `start`, `first` (token) and `end` seconds after `base`, for a key alias."""
    return json.dumps({
        "id": f"chatcmpl-{i:032x}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": base + start, "completionStartTime": base + first, "endTime": base + end,
        "model": "hosted_vllm/Qwen/Qwen3-8B", "model_group": "qwen", "api_base": "http://10.0.0.5:8000/v1",
        "prompt_tokens": prompt, "completion_tokens": out, "metadata": {"user_api_key_alias": alias},
    })


_CLICK: dict = {}


def _click_once(typer_app, build):
    """typer.main.get_command (`build`), but the Click command of one Typer app is built once per process: Typer
    rebuilds it on every call of the app (about 0.08 s of CPU: signatures, help), which a user pays once per
    process and the suite once per in-process CLI call (hundreds). Click commands keep no state between runs."""
    key = (id(typer_app), len(typer_app.registered_commands), len(typer_app.registered_groups))
    if key not in _CLICK:
        _CLICK[key] = build(typer_app)
    return _CLICK[key]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """`attribution ARGS` through the CLI's own entry point: exit code, stdout, stderr."""
    import sys

    import typer.main

    from attribution.cli import main

    argv, build = sys.argv, typer.main.get_command
    sys.argv = ["attribution", *args]
    typer.main.get_command = lambda typer_app: _click_once(typer_app, build)
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, typer.main.get_command = argv, build
    out = capsys.readouterr()
    return code, out.out, out.err


def ours(store: Path, table: str) -> pl.DataFrame:
    """The rows of a table as the store's reader gives them (the commit log's live files), sorted."""
    from attribution.db import fetch
    from attribution.store import Store

    df = fetch(Store.open(store).connect(), f"select * from raw_{table}")
    return df.sort(df.columns) if df.height else df


def plain(store: Path, table: str) -> pl.DataFrame:
    """What Polars reads from the files alone, with no knowledge of the commit log."""
    files = list((store / "data" / table).glob("**/*.parquet"))
    if not files:
        return pl.DataFrame()
    df = pl.scan_parquet(f"{store}/data/{table}/**/*.parquet", hive_partitioning=True).collect()
    return df.drop("day").sort(df.columns[:-1])


def assert_plain_equals_ours(store: Path) -> None:
    """Issue 20's promise of the store at rest: `data/` holds exactly the live files, and Polars and pyarrow
    reading them as a hive-partitioned dataset, without the commit log, get exactly the rows our reader gets."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    from attribution import layout
    from attribution.store import Store

    snap = Store.open(store).snapshot()
    on_disk = {p.relative_to(store).as_posix() for p in (store / "data").rglob("*.parquet")}
    assert on_disk == set(snap.data), "data/ holds exactly the live files"
    for table in {e["table"] for e in snap.data.values()}:
        a, b = ours(store, table), plain(store, table)
        assert a.height == b.height and a.equals(b.select(a.columns)), table
        # pyarrow's dataset reader too (told the key's type: a table of the null partition alone has no value
        # to infer it from)
        part = pads.partitioning(pa.schema([("day", pa.string())]), flavor="hive")
        assert pads.dataset(store / "data" / table, format="parquet", partitioning=part).count_rows() == a.height
    # each file sits in the partition of its rows' day
    for rel, e in snap.data.items():
        assert layout.days(e["table"], pl.read_parquet(store / rel)) in ([layout.day_of(rel)], [])
def computed_once(monkeypatch, module, name: str, key) -> list:
    """Replace `module.name` for one test by a memo: calls with an equal `key(*args, **kwargs)` run it once and
    each gets a deep copy of that one result (a caller that changes its copy changes nobody else's). Returns
    the keys of the calls in order: a test asserts that two front ends (the CLI, a dashboard page, its own
    library call) asked the same question, and then compares their answers without computing it again."""
    import copy

    fn, results, keys = getattr(module, name), {}, []

    def call(*args, **kwargs):
        k = key(*args, **kwargs)
        keys.append(k)
        if k not in results:
            results[k] = fn(*args, **kwargs)
        return copy.deepcopy(results[k])

    monkeypatch.setattr(module, name, call)
    return keys


def settings_key(st) -> str:
    """What an answer depends on in a Settings: all of it but the store's path (a flag in one front end, the
    environment in another; the window, computed from the store's newest request, stands for the store)."""
    import dataclasses

    return repr(dataclasses.replace(st, store=None, sources={}))


_SESSION_RESULTS: dict = {}


def once_per_session(monkeypatch, module, name: str, key) -> None:
    """Replace `module.name` for one test by a memo kept for this process's whole session (every module): calls
    with an equal `key(*args, **kwargs)` run it once, each gets a deep copy of that result. The progress steps
    it reported (a `progress` keyword, as the report, compare and memsplit take) are recorded and told again to
    every later caller that shows progress, so a command's stderr is the same whether it computed or not."""
    import copy

    fn = getattr(module, name)

    def call(*args, **kwargs):
        k = (module.__name__, name, key(*args, **kwargs))
        shown = kwargs.get("progress")
        if k not in _SESSION_RESULTS:
            steps: list = []
            if "progress" in kwargs:
                kwargs["progress"] = lambda step: (steps.append(step), shown and shown(step))
            _SESSION_RESULTS[k] = (fn(*args, **kwargs), steps)
        elif shown is not None:
            for step in _SESSION_RESULTS[k][1]:
                shown(step)
        return copy.deepcopy(_SESSION_RESULTS[k][0])

    monkeypatch.setattr(module, name, call)


def report_key(store, settings, **kwargs) -> tuple:
    """The question a build_report call asks (not how it shows progress)."""
    return str(store.root), settings_key(settings), repr(sorted((k, v) for k, v in kwargs.items() if k != "progress"))


def session_root(tmp_path_factory) -> Path:
    """The directory every xdist worker of this session shares (the parent of their base temporary
    directories); the base temporary directory itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def across_workers(root: Path, name: str, fn):
    """fn() computed once per test session for `name`, whichever xdist worker asks first (under a file lock;
    the others wait), and pickled under `root`: every caller gets its own unpickled copy. Only for results
    that do not depend on which worker computed them (each worker has its own copy of the sample store)."""
    import fcntl
    import pickle

    path = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(fn()))
            tmp.rename(path)
    return pickle.loads(path.read_bytes())


# One Spark session for the whole test session, shared by test_spark.py and test_spark_ingest.py (under
# `-n 2` both files go to one worker, see pytest_xdist_make_scheduler: one JVM). Tuned for tiny
# inputs: one shuffle partition, and a JVM that compiles little (C1 only, serial GC): over a few MB, JIT and
# GC threads cost more CPU than they save (about 40% of the JVM's CPU in the four analyses). Nor does Spark
# compile each query to Java (Janino): whole-stage codegen off and expressions interpreted (factoryMode
# NO_CODEGEN, the mode Spark's own suites check its expressions in, same answers), and no adaptive
# re-planning between stages: over a few hundred rows compiling and re-planning cost more than running
# (about a quarter of the JVM's CPU in the analyses). Tests only; the product's defaults are
# attribution.spark.session's, made for data that does not fit on one machine.
SPARK_MASTER = "local[2]"
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}

# The flags that ask a command run in the test process for the session above: without them the command's own
# settings (attribution.spark.session.DEFAULT_CONF) are applied to the one session, as getOrCreate does, and
# stay for every later test (8 shuffle partitions: 8 tasks a shuffle stage on a few hundred rows)
SPARK_ARGS = ("--spark-master", SPARK_MASTER, *(f"--spark-conf={k}={v}" for k, v in SPARK_CONF.items()))


@pytest.fixture(scope="session")
def spark_session():
    """The process's SparkSession (SPARK_MASTER, SPARK_CONF); skipped without pyspark or Java, except in CI,
    where that fails (.ci/run installs both)."""
    from attribution.errors import UsageError
    from attribution.spark.session import get_session, require

    try:
        require()
    except UsageError as exc:
        if in_ci():
            pytest.fail(f"{exc} (CI installs both: .ci/run)")
        pytest.skip(str(exc))
    return get_session(SPARK_MASTER, SPARK_CONF)


SPARK_FILES = ("test_spark.py", "test_spark_ingest.py", "test_spark_pruning.py")
# Tests of the Spark files that start no Spark (DuckDB runs of the Spark texts) and take seconds: units of their
# own (a module fixture's tests share one), run by the other worker meanwhile instead of lengthening the Spark
# unit, the longest of the suite. A test here that asks for the spark_session is a collection error (it would
# start a second JVM on its worker).
SPARK_FREE = {
    "test_spark.py::test_the_range_join_form_of_memsplit_binding_finds_the_same_episode_requests": "memsplit_con",
    "test_spark.py::test_every_query_of_the_analyses_transpiles": "memsplit_con",
    "test_spark_pruning.py::test_the_cost_form_of_the_join_gives_the_files_rows": "cost_form",
}
# Files whose module fixture is dear (a local S3 server; a dashboard server and a Chromium tab on a simulated
# store): all their tests on one worker, which starts it once. Spread as single tests, each worker that got one
# started its own (two servers, two browsers, every page's first analysis twice). The others: a module fixture
# of 0.5-2 CPU s (memsplit of the sample store; a store ingested or simulated for the module) that both workers
# built under `-n 2`, in files of 3-26 CPU s (bench/suite/suite30.md).
ONE_WORKER_FILES = ("test_store_remote.py", "test_dashboard_browser.py", "test_memsplit_sample.py",
                    "test_cli_conventions.py", "test_memsplit.py", "test_prometheus_scrapes.py", "test_lengths.py",
                    "test_compare.py")
# Tests that ask the question of a golden command (once_per_session, keyed by the command line) run on the
# worker that runs that command, which computes it once for both.
WITH_GOLDEN = {"test_report.py::test_an_early_cohort_of_8_requests_is_not_judged": "report3d"}


def work_unit(nodeid: str) -> str:
    """The unit of work (xdist scope) of a test: the Spark files; a file of ONE_WORKER_FILES; the forms of one
    golden command line (test_golden_commands ids `<line>.<format>`: json, table and csv, the report's json and
    md) with the tests of WITH_GOLDEN, whose library answer the first of them computes and the others render
    (once_per_session is per process); else the test alone."""
    file, _, test = nodeid.rsplit("/", 1)[-1].partition("::")
    if file in SPARK_FILES:
        free = SPARK_FREE.get(f"{file}::{test.split('[', 1)[0]}")
        return f"spark-free:{free}" if free else "spark"
    if file in ONE_WORKER_FILES:
        return file
    golden = WITH_GOLDEN.get(f"{file}::{test}")
    if file == "test_golden_commands.py" and test.endswith("]"):
        golden = test[test.index("[") + 1:-1]
        golden = golden.rsplit(".", 1)[0] if golden.rsplit(".", 1)[-1] in ("json", "table", "csv", "md") else golden
    return f"golden:{golden}" if golden else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's load scheduling, but the Spark test files are one unit of work, sent first to one worker (each
    worker would start a JVM of its own), and so are the other groups of work_unit. Every other test is a unit
    by itself, as under `--dist load`. (`xdist_group` marks would say the same, but xdist 3.8 groups by
    renaming the node id, which pytest 9.2's structured node ids ignore.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SharedWorkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SharedWorkTogether(config, log)
