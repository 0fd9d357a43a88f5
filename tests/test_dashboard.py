"""The dashboard: the launcher's command line, the filters (hand-made rows), and every page under Streamlit's
AppTest on sample_logs/: no exception, one chart, and the numbers shown equal the library's (computed here
with the plain library calls the CLI makes) or the simulator's ground truth; every page's empty state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest
from conftest import REPO, app_test, computed_once, settings_key
from polars.testing import assert_frame_equal
from test_thresholds import SAMPLE, sample_store
from typer.testing import CliRunner

import attribution
from attribution import analyses, dashboard, dashboard_launch
from attribution.analyses.common import frames_connection
from attribution.cli import app
from attribution.config import load_settings
from attribution.dashboard import Filters
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.simulate.output import simulate_to_dir
from attribution.store import Store

if TYPE_CHECKING:  # streamlit is imported by the tests that run a page, not by every worker collecting
    from streamlit.testing.v1 import AppTest

APP = REPO / "dashboards" / "app.py"
PAGES = ["overview", "lengths", "concurrency", "arrivals", "latency", "capacity", "thresholds", "memsplit", "compare",
         "changes", "health", "cache"]
TRUTH = json.loads((SAMPLE / "ground_truth.json").read_text())


# -- launcher ------------------------------------------------------------------------------------------------
def test_command_binds_this_machine_only_headless_and_quiet(tmp_path):
    cmd, env = dashboard_launch.command(tmp_path / "s", port=8123)
    opts = dict(zip(cmd[6::2], cmd[7::2], strict=True))
    assert cmd[1:6] == ["-P", "-m", "streamlit", "run", str(dashboard_launch.app_path())]
    assert opts["--server.address"] == "127.0.0.1" and opts["--server.port"] == "8123"
    assert opts["--server.headless"] == "true" and opts["--browser.gatherUsageStats"] == "false"
    assert env["ATTRIBUTION_STORE"] == str((tmp_path / "s").resolve())
    cmd, _ = dashboard_launch.command(tmp_path, host="0.0.0.0")
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"


def test_cli_passes_store_port_and_host(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(dashboard_launch, "launch", lambda store, **kw: calls.append((store, kw)))
    r = CliRunner().invoke(app, ["dashboard", "--store", str(tmp_path / "x"), "--port", "9001"])
    assert r.exit_code == 0, r.output
    assert calls == [(tmp_path / "x", {"host": "127.0.0.1", "port": 9001, "config": None})]
    r = CliRunner().invoke(app, ["dashboard", "--host", "0.0.0.0"])
    assert r.exit_code == 0 and calls[-1][1]["host"] == "0.0.0.0"
    # the settings file reaches the app as $ATTRIBUTION_CONFIG; a bad one stops here, as a usage error
    cfg = tmp_path / "attribution.toml"
    cfg.write_text("gpu_hour_cost = 2.5\n")
    r = CliRunner().invoke(app, ["dashboard", "--config", str(cfg)])
    assert r.exit_code == 0 and calls[-1][1]["config"] == cfg
    assert dashboard_launch.command(tmp_path, config=cfg)[1]["ATTRIBUTION_CONFIG"] == str(cfg.resolve())
    cfg.write_text("gpu_hour_cost = -1\n")
    r = CliRunner().invoke(app, ["dashboard", "--config", str(cfg)])
    assert r.exit_code != 0 and len(calls) == 3


def test_the_app_ships_inside_the_package():
    shipped = Path(attribution.__file__).parent / "dashboards"
    assert dashboard_launch.app_path() == shipped / "app.py"
    # setuptools packages folders with an __init__.py (like attribution/sql -> ../queries)
    assert (shipped / "__init__.py").is_file() and (shipped / "app_pages" / "__init__.py").is_file()
    listed = APP.read_text()
    for page in PAGES:
        assert (shipped / "app_pages" / f"{page}.py").is_file() and f'"app_pages/{page}.py"' in listed


def test_localized_numbers_get_a_column_wide_enough_for_their_separators():
    """Streamlit sizes a column by its raw values; shown localized, 31772.767 became `31,772.767` and its
    first digit was cut (the concurrency page read `1,772.767`): the width counts the separators."""
    df = pl.DataFrame({"peak": [6.0, 31_772.767], "n": [3, 1_234_567], "change": [-2_000.5, 1.0],
                       "ratio": [float("inf"), 1_500.0], "a_long_column_name": [1_000.0, 2_000.0]})
    px = {c: dashboard.localized_width(df[c]) for c in df.columns}
    pad = 16  # a cell's padding, both sides; 8 px a character at the table's font size
    assert px["peak"] >= 8 * len("31,772.767") + pad and px["n"] >= 8 * len("1,234,567") + pad
    assert px["change"] >= 8 * len("-2,000.500") + pad
    assert px["ratio"] >= 8 * len("1,500.000") + pad  # inf printed short, not an error
    assert px["a_long_column_name"] >= 8 * len("a_long_column_name") > px["ratio"]


# -- filters -------------------------------------------------------------------------------------------------
def _t(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 1, h, m, tzinfo=UTC)


def _frames_con():
    """Pod a: vllm 0.1 started 00:00, 0.2 at 02:00 (one line logged before either start); pod b: sglang (no
    version) at 00:00."""
    requests = pl.DataFrame({
        "request_id": ["r1", "r2", "r3", "r4", "r5"],
        "deployment": ["a", "a", "a", "b", None],
        "workload": ["x", "y", "x", "x", "x"],
        "label": ["before", "before", "after", None, None],
        "engine": ["vllm", "vllm", "vllm", "sglang", None],
        "engine_version": ["0.1", "0.1", "0.2", None, None],
        "arrival": [_t(0, 30), _t(1), _t(3), _t(1), _t(1)],
    })
    steps = pl.DataFrame({"deployment": ["a", "a", "a", "a", "b", "a"],
                          "label": ["before"] * 2 + ["after"] * 2 + [None, "before"],
                          "ts": [_t(0, 10), _t(1, 50), _t(2, 0), _t(3), _t(1), _t(0) - timedelta(minutes=5)],
                          "running": [1, 2, 3, 4, 5, 6]})
    config = pl.DataFrame({"deployment": ["a", "a", "b"], "engine": ["vllm", "vllm", "sglang"],
                           "version": ["0.1", "0.2", None], "ts": [_t(0), _t(2), _t(0)],
                           "start_line": [1, 1, 1], "file": ["a1", "a2", "b"]})
    return frames_connection(requests, steps, config)


def _narrowed(flt: Filters) -> tuple[list[str], list[int], list[str]]:
    con = dashboard.narrow(_frames_con(), flt)
    req = fetch(con, "select request_id from joined_requests order by 1")["request_id"].to_list()
    steps = fetch(con, "select running from engine_steps order by 1")["running"].to_list()
    starts = fetch(con, "select file from engine_config order by 1")["file"].to_list()
    return req, steps, starts


def test_filters_narrow_requests_engine_lines_and_starts():
    assert _narrowed(Filters()) == (["r1", "r2", "r3", "r4", "r5"], [1, 2, 3, 4, 5, 6], ["a1", "a2", "b"])
    assert _narrowed(Filters(deployments=("a",))) == (["r1", "r2", "r3"], [1, 2, 3, 4, 6], ["a1", "a2"])
    # engine lines carry no workload: they stay whole
    assert _narrowed(Filters(workloads=("y",))) == (["r2"], [1, 2, 3, 4, 5, 6], ["a1", "a2", "b"])
    assert _narrowed(Filters(labels=("after",))) == (["r3"], [3, 4], [])
    # `(none)` is what the analyses call a missing value; a request without a deployment is still selectable
    assert _narrowed(Filters(labels=("(none)",)))[0] == ["r4", "r5"]
    assert _narrowed(Filters(deployments=("(none)",)))[0] == ["r5"]
    # a version keeps the lines logged from a start of that version until the pod's next start (a line at a
    # start is that start's; one logged before the pod's first start has no version)
    assert _narrowed(Filters(versions=("vllm 0.1",))) == (["r1", "r2"], [1, 2], ["a1"])
    assert _narrowed(Filters(versions=("vllm 0.2", "sglang"))) == (["r3", "r4"], [3, 4, 5], ["a2", "b"])
    assert _narrowed(Filters(deployments=("b",), versions=("vllm 0.2",))) == ([], [], [])


def test_choices_offer_every_value_once_and_missing_ones_last(tmp_path):
    ch = dashboard.choices(_frames_con())
    assert (ch.requests, ch.first, ch.last) == (5, _t(0, 30), _t(3))
    assert ch.deployments == ("a", "b", "(none)") and ch.workloads == ("x", "y")
    assert ch.labels == ("after", "before", "(none)")
    assert ch.versions == ("sglang", "vllm 0.1", "vllm 0.2", "(none)")
    assert dashboard_launch.store_version(tmp_path / "nothing") is None
    Store.open(tmp_path / "empty", create=True)
    assert dashboard_launch.store_version(tmp_path / "empty") == 0
    assert dashboard.choices(Store.open(tmp_path / "empty").connect()) == dashboard.Choices()


def test_every_offered_choice_selects_its_requests():
    """The choices (queries/dashboard_filter_choices.sql) and the filters (dashboard.narrow) compute a
    request's value the same way: each value offered selects requests, and a dimension's values split them."""
    ch = dashboard.choices(_frames_con())
    for field in ("deployments", "workloads", "labels", "versions"):
        counts = [len(_narrowed(Filters(**{field: (v,)}))[0]) for v in getattr(ch, field)]
        assert min(counts) > 0 and sum(counts) == ch.requests, field


# -- pages on sample_logs/ -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return sample_store(tmp_path_factory)


def page(name: str, store: Path, monkeypatch, **state) -> AppTest:
    """Run one page; `state` presets widgets (sidebar filters, page options) by key before the first run."""
    import streamlit as st

    monkeypatch.setenv("ATTRIBUTION_STORE", str(store))
    # the app keeps its settings for 15 s (_data.REFRESH_S) across sessions: each test's page starts from the
    # settings its own environment gives, as a dashboard does once those 15 s have passed
    st.cache_resource.clear()
    at = app_test(APP, default_timeout=240)
    at.switch_page(f"app_pages/{name}.py")
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception[0].message
    assert [t.value for t in at.title] == [next(p for p in PAGE_TITLES if PAGE_TITLES[p] == name)]
    return at


PAGE_TITLES = {"Overview": "overview", "Workloads and lengths": "lengths", "Concurrency and live tokens": "concurrency",
               "Arrivals and burstiness": "arrivals", "Latency and goodput": "latency", "Capacity and cost": "capacity",
               "Feature thresholds": "thresholds", "Memory split": "memsplit",
               "Compare two cohorts": "compare", "What changed": "changes", "Ingest health": "health",
               "Prompt cache": "cache"}


def shown(at: AppTest) -> dict[str, pl.DataFrame]:
    """The page's tables by the subheader above each."""
    out, title = {}, None
    for el in at.main:
        kind = type(el).__name__
        if kind == "Subheader":
            title = el.value
        elif kind == "Dataframe":
            out[title] = pl.from_pandas(el.value)
    return out


def _heading(title: str) -> str:
    return title[:1].upper() + title[1:]


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.main if getattr(el, "type", None) == "plotly_chart"]


def rows(df: pl.DataFrame, **eq) -> list[dict]:
    return df.filter(**eq).to_dicts()


def _caption(at: AppTest) -> str:
    return at.main.caption[0].value


def library_once(monkeypatch, name: str) -> list:
    """analyses.<name> computed once per question for one test (conftest.computed_once): the test asks the
    library the page's question first, and the page gets that answer instead of computing it again. Returns
    the questions asked (selection window, grouping and requests; the keywords): the test asserts the page's
    was the test's."""
    return computed_once(monkeypatch, analyses, name, lambda sel, **kw: (
        repr(sel.window), str(sel.by), sel.requests, repr(sorted(kw.items()))))


def test_overview_one_day(store, monkeypatch):
    day = (datetime(2026, 5, 5), datetime(2026, 5, 6))
    at = page("overview", store, monkeypatch, time_range=day)
    con = Store.open(store).connect()
    n = analyses.select(con, since=day[0], until=day[1]).requests
    assert n > 15_000 and _caption(at) == f"{n:,} requests · 2026-05-05 00:00 to 2026-05-06 00:00 UTC"
    # 5 May is before the upgrade: both vLLM pods sit at their running cap (max_num_seqs 13) at the daily peak
    cap = {d["max_running_requests"] for d in TRUTH["deployments"] if d["engine_version"] == "0.15.1"}
    assert any(f"ran at its running limit of {cap.pop()} (configured)" in m.value for m in at.markdown)
    (fig,) = charts(at)
    assert {t["name"] for t in fig["data"]} == {"completed per day", "busiest hour x 24", "capacity per day"}


def test_lengths_equal_the_library_and_the_ground_truth(store, monkeypatch):
    asked = library_once(monkeypatch, "lengths")
    lib = analyses.lengths(analyses.select(Store.open(store).connect(), by="workload"), bins_per_decade=10,
                           percentiles=load_settings().percentiles)
    at = page("lengths", store, monkeypatch, lengths_by="workload")
    assert len(asked) == 2 and len(set(asked)) == 1  # the page asked what the test asked
    got = shown(at)[_heading(lib.titles["stats"])]
    assert_frame_equal(got, lib.tables["stats"], check_dtypes=False)
    for w in TRUTH["workloads"]:
        (r,) = rows(got, workload=w["key_alias"], metric="prompt_tokens")
        assert r["requests"] == w["requests"] and r["mean"] == pytest.approx(w["prompt_tokens_mean"], rel=1e-12)
        assert r["p99"] == pytest.approx(w["prompt_tokens"]["p99"], rel=1e-9)
    (fig,) = charts(at)
    assert {t["name"] for t in fig["data"]} == {w["key_alias"] for w in TRUTH["workloads"]} | {"key-agents-dev"}


def test_arrivals_equal_the_library(store, monkeypatch):
    asked = library_once(monkeypatch, "arrivals")
    lib = analyses.arrivals(analyses.select(Store.open(store).connect(), by="workload"), tz="Europe/Berlin",
                            timeseries=True)
    at = page("arrivals", store, monkeypatch, arrivals_by="workload", arrivals_tz="Europe/Berlin")
    assert len(asked) == 2 and len(set(asked)) == 1  # the page asked what the test asked
    got = shown(at)[_heading(lib.titles["rates"])]
    assert_frame_equal(got, lib.tables["rates"], check_dtypes=False)
    assert set(got["workload"]) == {w["key_alias"] for w in TRUTH["workloads"]} | {"key-agents-dev", "(all)"}
    per_minute, hours, bursts = charts(at)
    assert {t["name"] for t in per_minute["data"]} == set(got["workload"]) - {"(all)"}
    assert "Europe/Berlin" in hours["layout"]["title"]["text"] and len(bursts["data"]) == 4
    bad = page("arrivals", store, monkeypatch, arrivals_tz="Mars/Olympus")
    assert "time zone" in bad.info[0].value


def test_the_by_setting_is_where_the_group_by_box_starts(store, tmp_path, monkeypatch):
    cfg = tmp_path / "attribution.toml"
    cfg.write_text('by = "deployment"\n')
    monkeypatch.setenv("ATTRIBUTION_CONFIG", str(cfg))
    import streamlit as st

    st.cache_resource.clear()  # the settings are cached per process for REFRESH_S seconds
    try:
        at = page("lengths", store, monkeypatch)
        assert at.selectbox(key="lengths_by").value == "deployment"
        lib = analyses.lengths(analyses.select(Store.open(store).connect(), by="deployment"))
        got = shown(at)[_heading(lib.titles["stats"])]
        assert_frame_equal(got, lib.tables["stats"], check_dtypes=False)
    finally:
        st.cache_resource.clear()


def test_lengths_of_one_pod_after_the_upgrade(store, monkeypatch):
    at = page("lengths", store, monkeypatch, deployments=["qwen35-vllm-0"], versions=["vllm 0.20.1"])
    (truth,) = [d for d in TRUTH["deployments"] if d["deployment"] == "qwen35-vllm-0" and d["label"] == "after"]
    assert _caption(at) == (f"{truth['requests']:,} requests · deployment = qwen35-vllm-0; "
                            "engine version = vllm 0.20.1")


def test_concurrency_of_one_pod(store, monkeypatch):
    at = page("concurrency", store, monkeypatch, deployments=["qwen35-vllm-1"], concurrency_by="all")
    pods = shown(at)["Concurrency per deployment"]
    assert set(pods["deployment"]) == {"qwen35-vllm-1"}
    starts = [d for d in TRUTH["deployments"] if d["deployment"] == "qwen35-vllm-1"]
    (in_flight,) = rows(pods, metric="in_system")
    assert in_flight["peak"] == max(d["peak_in_flight"] for d in starts) and in_flight["source"] == "exact"
    (running,) = rows(pods, metric="running")  # vLLM logs count running requests in their stats lines only
    assert running["peak"] == max(d["stats"]["peak_running"] for d in starts) and running["source"] == "sampled"
    (waiting,) = rows(pods, metric="waiting")
    assert waiting["peak"] == max(d["stats"]["peak_waiting"] for d in starts)
    (fig,) = charts(at)
    assert fig["data"] and all(t["name"].startswith("qwen35-vllm-1") for t in fig["data"])


def test_latency_by_version_equals_the_library(store, monkeypatch):
    asked = library_once(monkeypatch, "latency")
    st_ = load_settings()  # (the page's question: the settings' SLO and percentiles)
    lib = analyses.latency(analyses.select(Store.open(store).connect(), by="version"),
                           slo=analyses.parse_slo(list(st_.slo) or None, st_.slo_preset),
                           scores=analyses.score_presets(), percentiles=st_.percentiles)
    at = page("latency", store, monkeypatch, latency_by="version")
    assert len(asked) == 2 and len(set(asked)) == 1  # the page asked what the test asked
    got = shown(at)[_heading(lib.titles["percentiles"])]
    assert_frame_equal(got, lib.tables["percentiles"], check_dtypes=False)
    for c in [c for c in TRUTH["cohorts"] if c["engine"] == "vllm"]:
        (ttft,) = rows(got, version=f"vllm {c['engine_version']}", metric="ttft_s")
        # vLLM logs carry no timings: they come from the gateway, 6 ms slower (sample_logs/README.md)
        assert ttft["p50"] == pytest.approx(c["ttft_s"]["p50"] + 0.006, abs=2e-4)
    assert len(charts(at)) == 1


def test_latency_slo_preset_comes_from_the_presets_files(store, monkeypatch, tmp_path):
    """The page's SLO presets are those of presets.toml and $ATTRIBUTION_PRESETS (no SLO written in the page):
    picking one gives the goodput the library gives for that preset."""
    extra = tmp_path / "presets.toml"
    extra.write_text('[slo.strict]\ndescription = "tight"\nttft = 0.05\n')
    monkeypatch.setenv("ATTRIBUTION_PRESETS", str(extra))
    asked = library_once(monkeypatch, "latency")
    slo = analyses.parse_slo(None, "strict")
    lib = analyses.latency(analyses.select(Store.open(store).connect(), by="workload"), slo=slo,
                           scores=analyses.score_presets(), percentiles=load_settings().percentiles)
    at = page("latency", store, monkeypatch, latency_slo="", latency_preset="strict")
    assert at.selectbox(key="latency_preset").options == ["settings", "chat", "strict"]
    assert asked[0] in asked[1:]  # the page asked what the test asked (after its first run, of the settings' SLO)
    got = shown(at)[_heading(lib.titles["goodput"])]
    assert_frame_equal(got, lib.tables["goodput"], check_dtypes=False)


def test_capacity_page_shows_the_gateway_spend_next_to_the_gpu_cost(store, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_GPU_HOUR_COST", "2.0")
    asked = library_once(monkeypatch, "capacity")
    st_ = load_settings()  # (the page's question: gpu_hour_cost 2.0 from the environment, the settings' GPUs)
    assert st_.gpu_hour_cost == 2.0
    lib = analyses.capacity(analyses.select(Store.open(store).connect(), by="all"), gpu_hour_cost=2.0,
                            gpus_per_pod=st_.gpus_per_pod)
    at = page("capacity", store, monkeypatch, capacity_by="all")
    assert len(asked) == 2 and len(set(asked)) == 1  # the page asked what the test asked
    got = shown(at)
    for name in ("capacity", "cost", "spend"):
        assert_frame_equal(got[_heading(lib.titles[name])], lib.tables[name], check_dtypes=False)
    spend = lib.tables["spend"]
    assert spend["gateway_requests"].sum() == spend["requests"].sum()  # the sample's gateway saw every request
    assert {t["name"] for fig in charts(at) for t in fig["data"]} >= {"completed per day", "input tokens"}


def test_changes_and_health_pages_equal_the_library(store, monkeypatch):
    """The pages show what `attribution changes` / `attribution health` print: the library's answer for the
    report's default window (the `window` setting back from the newest request). The page asks the library
    the test's question (same window and settings), so that answer is computed once (conftest.computed_once)."""
    from attribution.report import build

    asked = [computed_once(monkeypatch, build, "window_changes",
                           lambda con, w, st, **kw: (repr(w), settings_key(st), repr(kw))),
             computed_once(monkeypatch, build, "window_health",
                           lambda s, con, w, st, **kw: (str(s.root), repr(w), settings_key(st), repr(kw)))]
    con = Store.open(store).connect()
    st_ = load_settings()
    w = build.report_window(con, default=st_.window)
    for (name, lib, main), calls in zip((
            ("changes", build.window_changes(con, w, st_), ("versions", "upgrade_regressions")),
            ("health", build.window_health(Store.open(store), con, w, st_), ("joins", "gaps"))), asked, strict=True):
        got = shown(page(name, store, monkeypatch))
        assert len(calls) == 2 and len(set(calls)) == 1, name  # the page asked what the test asked
        for table in main:
            # (as the dashboard lists it: p-values in the report's notation)
            assert_frame_equal(got[_heading(lib.titles[table])], dashboard.shown(lib.tables[table]),
                               check_dtypes=False)


def test_cache_page_equals_the_library(store, monkeypatch):
    """The page shows what `attribution cache` prints for the report's default window, and both charts. The
    page asks the library the test's question, so that answer is computed once (conftest.computed_once)."""
    from attribution.cache import analysis
    from attribution.report.build import report_window

    asked = computed_once(monkeypatch, analysis, "cache", lambda con, w, **kw: (repr(w), repr(sorted(kw.items()))))
    con = Store.open(store).connect()
    st_ = load_settings()
    lib = analysis.cache(con, report_window(con, default=st_.window), capacity_blocks=None,
                         econ=analysis.Economics.from_settings(st_))
    at = page("cache", store, monkeypatch)
    assert len(asked) == 2 and len(set(asked)) == 1  # the page asked what the test asked
    for table in ("measured", "savings"):
        assert_frame_equal(shown(at)[_heading(lib.titles[table])], lib.tables[table], check_dtypes=False)
    assert len(charts(at)) == 2


def test_thresholds_of_one_workload(store, monkeypatch):
    docs = "key-documents-prod"
    at = page("thresholds", store, monkeypatch, workloads=[docs],
              thresholds_spec="sparse_prefill: kv_len_at_prefill > 95000")
    (main,) = [df for title, df in shown(at).items() if title.startswith("Request-scoped")]
    (r,) = rows(main, feature="sparse_prefill")
    (w,) = [w for w in TRUTH["workloads"] if w["key_alias"] == docs]
    # every prompt over 95,000 tokens came from the documents workload
    assert r["crossed"] == TRUTH["totals"]["kv_len_over_threshold"] and r["requests"] == w["requests"]
    assert len(charts(at)) == 1


def test_memsplit_of_one_pod(store, monkeypatch):
    at = page("memsplit", store, monkeypatch, deployments=["qwen35-vllm-0"])
    tables = shown(at)
    truth = [d for d in TRUTH["deployments"] if d["deployment"] == "qwen35-vllm-0"]
    current = tables[next(t for t in tables if t.lower().startswith("current"))]
    assert sorted(current["version"]) == sorted(d["engine_version"] for d in truth)
    assert set(current["kv_pool_tokens"]) == {d["kv_pool_tokens"] for d in truth}
    assert set(current["state_slots"]) == {d["state_pool_slots"] for d in truth}
    assert len(charts(at)) == 1


def test_compare_versions_on_one_pod(store, monkeypatch):
    at = page("compare", store, monkeypatch, deployments=["qwen35-vllm-1"], compare_resamples=100)
    cohorts = shown(at)["Cohorts"]
    for cohort, version in (("before", "0.15.1"), ("after", "0.20.1")):
        (truth,) = [d for d in TRUTH["deployments"] if d["deployment"] == "qwen35-vllm-1"
                    and d["engine_version"] == version]
        (r,) = rows(cohorts, cohort=cohort)
        assert r["requests"] == truth["requests"] and r["definition"].endswith(version)
    (fig,) = charts(at)
    assert fig["data"]


# -- while an ingest runs -------------------------------------------------------------------------------------
def test_a_session_keeps_its_commit_until_the_reader_loads_newer_data(tmp_path, monkeypatch):
    """An ingest landing data does not recompute the pages under the reader: the sidebar offers it."""
    truth = simulate_to_dir("sample", tmp_path / "logs", requests=400, seed=5)
    per_label = {lb: sum(f["requests"] for f in truth["files"] if f.get("label") == lb and f["format"] == "vllm_log")
                 for lb in ("before", "after")}
    store = tmp_path / "store"
    ingest([str(tmp_path / "logs" / "vllm" / "before")], store, year=truth["year"], tz=truth["tz"])
    at = page("lengths", store, monkeypatch)
    assert _caption(at).startswith(f"{per_label['before']:,} requests") and not at.sidebar.button
    ingest([str(tmp_path / "logs" / "vllm" / "after")], store, year=truth["year"], tz=truth["tz"])
    import streamlit as st

    st.cache_data.clear()  # the newest commit is looked up every REFRESH_S seconds: do not wait for it
    at.run()
    assert _caption(at).startswith(f"{per_label['before']:,} requests")
    at.sidebar.button[0].click().run()
    assert _caption(at).startswith(f"{per_label['before'] + per_label['after']:,} requests")
    assert not at.sidebar.button


def test_views_of_a_commit_share_one_connection_each_narrowed_on_its_own(days_store):
    """A filter set's View is a cursor on its commit's connection (dashboard.Commit), its narrowed views under
    a schema of its own: views opened in turn, their pages asked in between, answer as connections of their own.
    (On conftest's days store: sample_logs' pods, versions and workloads at 600 requests a member; the whole
    sample store's concurrency, seven times, cost ten times as much for the same claim.)"""
    store = days_store
    pod = Filters(deployments=("qwen35-vllm-0",), versions=("vllm 0.20.1",))
    flts = [Filters(), pod, Filters(workloads=(dashboard.View(store, Filters()).choices().workloads[0],))]
    views = [dashboard.View(store, f) for f in flts]
    assert views[0].commit is views[1].commit is views[2].commit
    counts = [fetch(v.con, "select count(*) n from joined_requests")["n"].item() for v in views]
    assert 0 < counts[1] < counts[0] and 0 < counts[2] < counts[0]
    lib = {}  # the library's answer, once for each filter set (the pod's: a second View of it is asked too)
    for flt, view in [*zip(flts, views, strict=True), (pod, dashboard.View(store, pod))]:
        got = view.concurrency(by="all")
        if flt not in lib:
            lib[flt] = analyses.concurrency(analyses.select(dashboard.narrow(Store.open(store).connect(), flt),
                                                            by="all"),
                                            per_group=True, timeseries=True, percentiles=view.settings.percentiles)
        assert got.tables.keys() == lib[flt].tables.keys()
        for name, df in lib[flt].tables.items():
            assert_frame_equal(got.tables[name], df, check_exact=True)
    assert fetch(views[0].con, "select count(*) n from joined_requests")["n"].item() == counts[0]


# -- empty states --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PAGES)
def test_every_page_says_when_there_is_nothing_to_show(name, tmp_path, monkeypatch):
    for where, says in ((tmp_path / "missing", "No store at"), (tmp_path / "empty", None)):
        if says is None:
            Store.open(where, create=True)
            says = "no engine start" if name == "memsplit" else "holds no requests yet"
        at = page(name, where, monkeypatch)
        assert [i.value for i in at.info] and says in at.info[0].value
        assert not at.dataframe and not charts(at)


def test_a_store_of_engine_lines_without_request_lines_says_so_not_that_it_is_empty(tmp_path, monkeypatch):
    """A real vLLM console log of a pod run with the default logging (no request lines since 0.10): step and
    access lines only. The pages say what the store holds and which flag logs the request lines, not that
    nothing was ingested (which they said before)."""
    from conftest import shared

    log = shared("traces", "vllm_server_logs", "01_2026_05_09_vllm_log_dump.txt")
    ingest([str(log)], tmp_path / "store", year=2026, tz="UTC")
    at = page("overview", tmp_path / "store", monkeypatch)
    said = at.info[0].value
    assert "holds no requests yet" not in said
    assert "712 step lines" in said and "POST responses" in said and "--enable-log-requests" in said, said


def test_p_values_read_as_in_the_report():
    """The dashboard's tables write a p-value as the report's cells do (e-notation below 1e-4), not as a long
    decimal; other columns keep their numbers."""
    from attribution.report.fmt import cell

    ps = [9.0626e-20, 0.012345, 1.0, None, float("nan")]
    df = pl.DataFrame({"metric": ["ttft_s"] * 5, "p_adjusted": ps, "p_value": ps, "ratio": [0.5] * 5})
    out = dashboard.shown(df)
    assert out["p_adjusted"].to_list() == ["9.06e-20", "0.0123", "1", "", ""]
    assert out["p_value"].to_list() == out["p_adjusted"].to_list()
    assert out["p_adjusted"].to_list() == [cell(v, "p_adjusted") for v in ps]
    assert_frame_equal(out.select("metric", "ratio"), df.select("metric", "ratio"))
    assert dashboard.shown(df.drop("p_value", "p_adjusted")).equals(df.drop("p_value", "p_adjusted"))
