"""The report's charts: every builder (attribution.charts, shared with the dashboard) on the sample's analyses
and on an analysis without tables; then the sample report's HTML in headless Chromium (Debian's
/usr/bin/chromium, driven by Playwright; no browser is downloaded): opened from file:// with every other
request blocked, it logs no console error, draws every Plotly chart, and leaves a full-page screenshot in
artifacts/report.png for a person to look at."""

from __future__ import annotations

import operator
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, need_chromium, session_root
from test_report import sample_report

from attribution.analyses import Analysis

CHROMIUM = os.environ.get("ATTRIBUTION_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "artifacts"
# every chart div has been laid out by Plotly: its SVG exists, and a chart with traces has drawn them
ALL_DRAWN = """() => {
  const divs = [...document.querySelectorAll('.plotly-graph-div')];
  return divs.length > 0 && divs.every(d => d._fullLayout && d.querySelector('.main-svg')
      && (d.data.length === 0 || d.querySelectorAll('g.trace').length > 0));
}"""


@pytest.fixture(scope="module")
def sample(sample_store, tmp_path_factory):
    return sample_report(sample_store, session_root(tmp_path_factory))


@pytest.fixture(scope="module")
def html(sample) -> tuple[Path, int]:
    _, report, paths = sample
    return paths["html"], sum(len(s.charts) for s in report.sections)


def test_every_chart_builder_draws_the_sample_analyses(sample):
    import plotly.graph_objects as go

    from attribution import charts

    inp = sample[0]
    figures = [
        charts.lengths.histogram(inp.lengths, weight="tokens"), charts.lengths.count_vs_tokens(inp.lengths),
        charts.lengths.percentiles(inp.lengths), charts.concurrency.over_time(inp.concurrency),
        charts.concurrency.peaks(inp.concurrency), charts.latency.percentiles(inp.latency),
        charts.latency.by_bucket(inp.latency), charts.latency.goodput(inp.latency),
        charts.latency.percentiles(inp.cohort_latency), charts.capacity.utilization(inp.capacity),
        charts.capacity.cost(inp.capacity), charts.thresholds.crossings(inp.thresholds),
        charts.thresholds.by_day(inp.thresholds), charts.thresholds.steps(inp.thresholds),
        charts.memsplit.pools(inp.memsplit), charts.changes.ratios(inp.changes, which="upgrade"),
    ]
    for fig in figures:
        assert isinstance(fig, go.Figure) and len(fig.data) > 0 and fig.layout.title.text, fig.layout.title.text
    # four workloads, one line each, in both panels of the histogram pair
    assert len(charts.lengths.count_vs_tokens(inp.lengths).data) == 2 * 4


# by name: plotly (through attribution.charts) is imported by the workers that run these tests, not at collection
@pytest.mark.parametrize("builder", [
    "lengths.histogram", "lengths.count_vs_tokens", "lengths.percentiles", "concurrency.over_time",
    "concurrency.peaks", "latency.percentiles", "latency.by_bucket", "latency.goodput", "capacity.utilization",
    "capacity.cost", "thresholds.crossings", "thresholds.by_day", "thresholds.steps", "compare.ratios",
    "compare.by_group", "compare.attribution", "memsplit.pools", "memsplit.whatif", "changes.drift", "changes.ratios",
])
def test_a_chart_of_a_missing_table_says_so(builder):
    from attribution import charts

    fig = operator.attrgetter(builder)(charts)(Analysis("empty", {}, {}))
    assert len(fig.data) == 0 and len(fig.layout.annotations) == 1 and fig.layout.title.text


def test_the_report_opens_offline_and_draws_every_chart(html):
    path, charts = html
    need_chromium(CHROMIUM)
    errors: list[str] = []
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("**/*", route)
            page.goto(path.as_uri())
            page.wait_for_function(ALL_DRAWN, timeout=90_000)
            state = page.evaluate("""() => [...document.querySelectorAll('.plotly-graph-div')].map(d => ({
                id: d.id, traces: d.data.length, drawn: d.querySelectorAll('g.trace').length,
                width: d.getBoundingClientRect().width, height: d.getBoundingClientRect().height}))""")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert errors == [] and blocked == []
    assert len(state) == charts
    for c in state:
        assert c["traces"] > 0 and c["drawn"] > 0 and c["width"] > 300 and c["height"] > 200, c
    assert (ARTIFACTS / "report.png").stat().st_size > 100_000
