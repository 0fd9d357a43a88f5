"""A real browser: the command `attribution dashboard` runs (attribution.dashboard_launch.command) serves a small
simulated store, and headless Chromium (Debian's, driven by Playwright; never a downloaded browser) loads
every page: its heading, a drawn Plotly chart, no exception or error element, no empty state. Screenshots
go to artifacts/dashboard-<page>.png, which CI keeps."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, need_chromium

from attribution import dashboard_launch
from attribution.ingest import ingest
from attribution.simulate.output import simulate_to_dir

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "artifacts"
TIMEOUT_MS = 180_000  # a loaded CI machine: a page's first analysis can take a while
PAGES = {  # url path -> heading
    "": "Overview",
    "lengths": "Workloads and lengths",
    "concurrency": "Concurrency and live tokens",
    "arrivals": "Arrivals and burstiness",
    "latency": "Latency and goodput",
    "capacity": "Capacity and cost",
    "thresholds": "Feature thresholds",
    "cache": "Prompt cache",
    "memsplit": "Memory split",
    "compare": "Compare two cohorts",
    "changes": "What changed",
    "health": "Ingest health",
}
TABLES_ONLY = {"health"}  # pages of tables, no chart (files, problems, joins, gaps)
# pages that draw more than one chart on the sample (the others draw one): arrivals per minute, by hour of
# day and burstiness; capacity's utilisation and billed-vs-GPU cost; the cache's measured shares and reuse curve
CHARTS = {"arrivals": 3, "capacity": 2, "cache": 2}



@pytest.fixture(scope="module", autouse=True)
def _chromium():
    need_chromium(CHROMIUM)  # before the module's server starts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the dashboard exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"the dashboard did not answer {url} within {timeout_s:.0f} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Two vLLM pods upgraded midway, an SGLang pod and the gateway (the sample scenario, a few hours),
    served on a free port of 127.0.0.1; stopped at the end whatever happens."""
    root = tmp_path_factory.mktemp("dashboard_browser")
    truth = simulate_to_dir("sample", root / "logs", requests=3000, seed=3)
    ingest([str(root / "logs")], root / "store", year=truth["year"], tz=truth["tz"])
    port = _free_port()
    cmd, env = dashboard_launch.command(root / "store", port=port)
    # the filtered lengths page merges the per-day counts here too (a store this small computes otherwise)
    env["ATTRIBUTION_PREPARE_PAGES_MIN"] = "0"
    log = root / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def app(server):
    """One browser tab on the app, as a user keeps it: the first page loads Streamlit's scripts and
    Plotly once; the others are reached through the sidebar."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1800})
            tab.goto(server + "/", timeout=TIMEOUT_MS)
            yield tab
        finally:
            browser.close()


@pytest.mark.parametrize("path", list(PAGES), ids=lambda p: p or "overview")
def test_every_page_renders_in_chromium(server, app, path):
    title = PAGES[path]
    app.locator("[data-testid=stSidebarNav] a", has_text=title).click(timeout=TIMEOUT_MS)
    app.get_by_role("heading", level=1, name=title).wait_for(timeout=TIMEOUT_MS)
    # the run is over (stale elements of the previous page are gone), then Plotly draws
    app.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(timeout=TIMEOUT_MS)
    if path not in TABLES_ONLY:
        app.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=TIMEOUT_MS)
    # every page has a table; it can draw after the run ends (seen on CI for the overview)
    app.locator("[data-testid=stDataFrame]").first.wait_for(timeout=TIMEOUT_MS)
    app.wait_for_timeout(500)  # let the tables draw before the screenshot
    ARTIFACTS.mkdir(exist_ok=True)
    app.screenshot(path=str(ARTIFACTS / f"dashboard-{path or 'overview'}.png"), full_page=True)
    assert app.url.rstrip("/") == f"{server}/{path}".rstrip("/")
    assert app.locator("[data-testid=stException]").count() == 0
    assert app.locator("[data-testid=stAlertContentError]").count() == 0
    assert app.locator("[data-testid=stAlertContentInfo]").count() == 0, "the page shows an empty state"
    assert app.locator(".js-plotly-plot").count() == (0 if path in TABLES_ONLY else CHARTS.get(path, 1))
    assert app.locator("[data-testid=stDataFrame]").count() >= 1
    nav = app.locator("[data-testid=stSidebarNav] a").all_inner_texts()
    assert [n.strip().splitlines()[-1] for n in nav] == list(PAGES.values())  # after the icon's name


def test_a_workload_filter_redraws_the_lengths_page(server, app):
    """A workload picked in the sidebar: the lengths page answers for it (from the per-day counts) and says so
    under its title; the tables and chart are drawn, no error. Screenshot: dashboard-lengths-filtered.png."""
    app.locator("[data-testid=stSidebarNav] a", has_text=PAGES["lengths"]).click(timeout=TIMEOUT_MS)
    app.get_by_role("heading", level=1, name=PAGES["lengths"]).wait_for(timeout=TIMEOUT_MS)
    app.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(timeout=TIMEOUT_MS)
    box = app.locator("[data-testid=stSidebar] [data-testid=stMultiSelect]").nth(1)  # deployment, workload, ...
    box.click(timeout=TIMEOUT_MS)
    option = app.locator("[role=option]").filter(has_not_text="Select all").first
    workload = option.inner_text().strip()
    option.click(timeout=TIMEOUT_MS)
    app.keyboard.press("Escape")
    app.get_by_text(f"workload = {workload}").first.wait_for(timeout=TIMEOUT_MS)
    app.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(timeout=TIMEOUT_MS)
    app.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=TIMEOUT_MS)
    app.wait_for_timeout(500)
    ARTIFACTS.mkdir(exist_ok=True)
    app.screenshot(path=str(ARTIFACTS / "dashboard-lengths-filtered.png"), full_page=True)
    assert app.locator("[data-testid=stException]").count() == 0
    assert app.locator("[data-testid=stAlertContentError]").count() == 0
    assert app.locator("[data-testid=stDataFrame]").count() >= 1
    app.goto(server + "/", timeout=TIMEOUT_MS)  # a new session: every filter back to all for what follows


def test_the_browser_tests_are_one_unit_of_work():
    """Under xdist every test of this file runs on one worker (conftest.ONE_WORKER_FILES), which starts the
    server and the browser once; the unit starts first (conftest.LONG), being a minute long."""
    from conftest import LONG, work_unit

    ids = [f"tests/{Path(__file__).name}::{t}" for t in (
        "test_every_page_renders_in_chromium[overview]", "test_every_page_renders_in_chromium[health]",
        "test_a_workload_filter_redraws_the_lengths_page", test_the_browser_tests_are_one_unit_of_work.__name__)]
    assert len({work_unit(i) for i in ids}) == 1
    assert all(any(k in i for k in LONG) for i in ids)
