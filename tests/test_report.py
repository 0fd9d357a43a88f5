"""The weekly report. On sample_logs/: the JSON form against tests/golden/report_sample_logs.json, and the
figures a reader acts on against ground_truth.json (what the simulator knows, computed without this code).
On two weeks of LiteLLM lines written here: week-over-week drift and regression found and turned into exit
code 5 by --fail-on, reruns byte for byte the same, names by ISO week, a locked store, and the exit codes of
every failure. Plus the pieces: drift distance, windows and weeks, log gaps, formats.

Regenerate the golden file after a deliberate change: ATTRIBUTION_UPDATE_GOLDEN=1 pytest tests/test_report.py
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import (
    REPO,
    SAMPLE,
    across_workers,
    once_per_session,
    report_key,
    run_cli,
    session_root,
    settings_key,
)

from attribution.analyses import Window
from attribution.config import load_settings
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.report import assemble, iso_week, log_gaps, previous_window, run_analyses, write
from attribution.report.build import parse_week
from attribution.report.changes import changes
from attribution.report.drift import lengths as drift_lengths
from attribution.report.output import FailOn, ReportFormat, format_of, triggered
from attribution.store import Store

GOLDEN = REPO / "tests" / "golden" / "report_sample_logs.json"
TRUTH = json.loads((SAMPLE / "ground_truth.json").read_text())
_BUILT: dict[str, tuple] = {}


def sample_report(store: Path, root: Path) -> tuple:
    """The sample report (analyses, report, {format: path}), built once per session for every module and every
    xdist worker (conftest.across_workers) from the asking worker's copy of the sample store, written to
    `<root>/sample-report` (root: conftest.session_root)."""
    return _sample(store, root)[:3]


def _sample(store: Path, root: Path) -> tuple:
    """sample_report's tuple and the progress steps its analyses reported."""
    def build() -> tuple:
        out_dir = root / "sample-report"
        out_dir.mkdir(parents=True, exist_ok=True)
        empty = out_dir / "attribution.toml"
        empty.write_text("")
        settings = load_settings({"gpu_hour_cost": 2.0}, config=empty, env={})
        steps: list[str] = []
        inp = run_analyses(Store.open(store), settings, since=SAMPLE_SINCE, progress=steps.append)
        report = assemble(inp, Store.open(store))
        paths = write(report, out_dir=out_dir)
        return inp, report, {p.suffix[1:]: p for p in paths}, steps

    if "sample" not in _BUILT:
        _BUILT["sample"] = across_workers(root, "sample-report", build)
    return _BUILT["sample"]


SAMPLE_SINCE = "7d"


def serve_sample_analyses(monkeypatch, store: Path, root: Path) -> None:
    """Replace attribution.report.build_report, for one test, by the sample report's analyses (run once per
    session, sample_report) assembled for the caller's store and settings: the golden report lines of
    test_golden_commands ask the sample report's question (`--since 7d --gpu-hour-cost 2.0`), and their output
    is what `attribution report` writes from those analyses. Any other question fails the test: it would need
    analyses of its own. The progress steps the analyses reported are told again."""
    import copy
    import dataclasses

    import attribution.report

    inp, _, _, steps = _sample(store, root)

    def question(settings) -> str:  # (the sample's settings file is empty: where they came from is no answer)
        return settings_key(dataclasses.replace(settings, config_file=None))

    def build(st: Store, settings, *, since=None, until=None, week=None, ingest=None, progress=None):
        asked = (Path(st.root).resolve(), question(settings), since, until, week, ingest)
        assert asked == (store.resolve(), question(inp.settings), SAMPLE_SINCE, None, None, None), (
            "this report line does not ask the sample report's question (test_report.sample_report)")
        for step in steps if progress else ():
            progress(step)
        mine = copy.deepcopy(inp)
        mine.settings = settings
        return assemble(mine, st)

    monkeypatch.setattr(attribution.report, "build_report", build)


def _built_once(monkeypatch) -> None:
    """Each distinct question (store, settings, window) built once per session: the golden report3d and the
    early cohort ask one, the reruns test asks the drift test's week 2025-W07 again (its own two reruns are
    built each time: that is what it checks)."""
    import attribution.report

    once_per_session(monkeypatch, attribution.report, "build_report", report_key)


@pytest.fixture(scope="module")
def sample(sample_store, tmp_path_factory):
    return sample_report(sample_store, session_root(tmp_path_factory))


def rows(doc: dict, section: str, table: str) -> list[dict]:
    sec = next(s for s in doc["sections"] if s["id"] == section)
    return sec["tables"][table]["rows"]


def assert_close(got, want, where="$"):
    if isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-9), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {len(got)} items, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


# -- sample_logs ------------------------------------------------------------------------------------------------

def test_json_matches_the_golden_file(sample):
    _, _, paths = sample
    assert sorted(p.name for p in paths.values()) == [f"attribution-report-2026-W19.{x}" for x in ("html", "json", "md")]
    got = json.loads(paths["json"].read_text())
    got["source"].pop("store")  # a temporary directory
    if os.environ.get("ATTRIBUTION_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=2) + "\n")
        pytest.skip("golden file rewritten")
    assert_close(got, json.loads(GOLDEN.read_text()))


def test_the_figures_a_reader_acts_on_match_the_ground_truth(sample):
    doc = json.loads(sample[2]["json"].read_text())
    totals = TRUTH["totals"]
    assert doc["week"] == "2026-W19"  # the window's middle is Wed 6 May 2026
    assert doc["window"]["requests"] == totals["requests"]
    # workloads: requests, prompt token sums, mean, p99 and max (linear quantiles, as the simulator computes them)
    traffic = {r["workload"]: r for r in rows(doc, "traffic", "workloads")}
    stats = {(r["workload"], r["metric"]): r for r in rows(doc, "lengths", "stats")}
    for w in TRUTH["workloads"]:
        t, s = traffic[w["key_alias"]], stats[(w["key_alias"], "prompt_tokens")]
        assert (t["requests"], t["prompt_tokens"]) == (w["requests"], w["prompt_tokens_sum"])
        assert s["mean"] == pytest.approx(w["prompt_tokens_mean"], rel=1e-5)
        assert s["p99"] == pytest.approx(w["prompt_tokens"]["p99"], rel=1e-5)
        assert s["max"] == w["prompt_tokens"]["max"]
    # the long tail: prompts over 95,000 tokens
    feats = {r["feature"]: r for r in rows(doc, "thresholds", "requests")}
    assert feats["writeup.sparse_prefill_95k"]["crossed"] == totals["kv_len_over_threshold"]
    # ten-second stats lines at the running cap, per pod, on the old engine (the new one never reaches it)
    before = {d["deployment"]: d for d in TRUTH["deployments"] if d.get("engine_version") == "0.15.1"}
    steps = {(r["feature"], r["deployment"]): r for r in rows(doc, "thresholds", "steps")}
    for dep, d in before.items():
        assert steps[("vllm.max_num_seqs", dep)]["crossed_rows"] == d["stats"]["intervals_at_cap"]
        assert float(steps[("vllm.max_num_seqs", dep)]["threshold"]) == d["max_running_requests"]
    pods = {(r["deployment"], r["metric"]): r for r in rows(doc, "concurrency", "pods")}
    for dep, d in before.items():
        assert pods[(dep, "waiting")]["peak"] == d["stats"]["peak_waiting"]
        assert pods[(dep, "running")]["peak"] == d["max_running_requests"]
        assert pods[(dep, "in_system")]["peak"] == d["peak_in_flight"]
    # the SGLang pod: its pools, its running cap reached, and the state pool (not KV) holding requests back
    sg = next(d for d in TRUTH["deployments"] if d["engine"] == "sglang")
    assert pods[(sg["deployment"], "running")]["peak"] == sg["peak_running"] == sg["max_running_requests"]
    assert pods[(sg["deployment"], "in_system")]["peak"] == sg["peak_in_flight"]
    ms = {r["deployment"]: r for r in rows(doc, "memsplit", "summary")}[sg["deployment"]]
    assert ms["current"] == (f"{sg['max_running_requests']} running, {sg['state_pool_slots']} slots + "
                             f"{sg['kv_pool_tokens']:,} KV tokens") and ms["limit"] == "state_pool"


def test_the_upgrade_inside_the_week_matches_the_ground_truth(sample):
    doc = json.loads(sample[2]["json"].read_text())
    cohorts = {c["engine_version"]: c for c in TRUTH["cohorts"] if c["engine"] == "vllm"}
    got = {r["cohort"]: r for r in rows(doc, "changes", "upgrade_cohorts")}
    assert (got["before"]["requests"], got["after"]["requests"]) == (cohorts["0.15.1"]["requests"],
                                                                     cohorts["0.20.1"]["requests"])
    summary = {(r["metric"], r["percentile"]): r for r in rows(doc, "changes", "upgrade_summary")}
    for metric in ("ttft_s", "e2e_s"):
        for p in ("p50", "p90", "p99"):
            r = summary[(metric, p)]
            # the gateway measures a few milliseconds more than the simulator (proxy overhead)
            assert r["before"] == pytest.approx(cohorts["0.15.1"][metric][p], rel=0.01, abs=0.02)
            assert r["after"] == pytest.approx(cohorts["0.20.1"][metric][p], rel=0.01, abs=0.02)
            assert r["verdict"] == "improvement" and r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"] < 1
    versions = [(r["deployment"], r["previous_version"], r["version"]) for r in rows(doc, "changes", "versions")
                if r["change"] == "new version"]
    assert versions == [("qwen35-vllm-0", "0.15.1", "0.20.1"), ("qwen35-vllm-1", "0.15.1", "0.20.1")]
    assert any(a["kind"] == "version" and "0.15.1 -> 0.20.1" in a["text"] for a in doc["actions"])
    assert not any(a["kind"] == "regression" for a in doc["actions"])


def test_ingest_health_of_the_sample_is_clean(sample):
    doc = json.loads(sample[2]["json"].read_text())
    joins = rows(doc, "health", "joins")
    assert {(r["source"], r["matched_share"]) for r in joins} == {("litellm", 1.0), ("vllm_log", 1.0),
                                                                 ("sglang_log", 1.0)}
    assert "errors" not in next(s for s in doc["sections"] if s["id"] == "health")["tables"]


def test_markdown_and_html_carry_the_same_sections(sample):
    _, report, paths = sample
    md = paths["md"].read_text()
    html = paths["html"].read_text()
    titles = [s.title for s in report.sections]
    assert titles[0] == "What changed" and titles[-1] == "Ingest health"
    positions = [md.index(f"## {t}") for t in titles]
    assert positions == sorted(positions) and md.index("## At a glance") < positions[0]
    for a in report.actions:
        assert a.text in md
    assert "nan" not in md.lower().replace("nanos", "")
    # self-contained: plotly.js inline once, no external script, stylesheet or image (plotly.js itself names
    # URLs it would fetch only for maps and MathJax, which no chart here uses; the browser test blocks them)
    assert html.count("<script>") == 1 + sum(len(s.charts) for s in report.sections)
    for bad in ("<script src", 'src="http', "src='http", "<link", "@import"):
        assert bad not in html
    for s in report.sections:
        for c in s.charts:
            assert f'id="{c.id}"' in html


def test_charts_are_built_only_for_the_renderings_that_read_them(sample, sample_store):
    """A report's charts are built when a rendering reads them: Markdown draws none and builds none; the JSON
    names each chart by its figure's title, the HTML draws it (the sample report's own files, test above)."""
    import copy

    from attribution.report.output import render

    inp, built, _ = sample
    report = assemble(copy.deepcopy(inp), Store.open(sample_store))
    charts = [c for s in report.sections for c in s.charts]
    assert len(charts) == sum(len(s.charts) for s in built.sections) > 10
    assert render(report, ReportFormat.md) and all(c.built is None for c in charts)
    doc = json.loads(render(report, ReportFormat.json))
    assert all(c.built is not None for c in charts)
    titles = [c["title"] for s in doc["sections"] for c in s["charts"]]
    assert titles == [c.figure.layout.title.text or c.name for c in charts]
    assert titles == [c.title for s in built.sections for c in s.charts]


def test_week_over_week_on_the_sample(sample_store):
    """This window = the three days after the upgrade; the previous one = the three days before it."""
    con = Store.open(sample_store).connect()
    window = Window(datetime(2026, 5, 7, tzinfo=UTC), datetime(2026, 5, 10, tzinfo=UTC))
    res = changes(con, window, resamples=50)
    assert res.params["previous"]["since"] == datetime(2026, 5, 4, tzinfo=UTC)
    before = next(c for c in TRUTH["cohorts"] if c["engine_version"] == "0.15.1")
    assert res.params["previous_requests"] == before["requests"]
    d = {(r["workload"], r["metric"]): r["status"] for r in res.tables["drift"].iter_rows(named=True)}
    # the SGLang pod serves key-agents-dev on Fri 8 May only; the other workloads keep their distributions
    assert d[("key-agents-dev", "prompt_tokens")] == "new"
    assert {v for (w, _), v in d.items() if w != "key-agents-dev"} == {"stable"}
    week = res.tables["week_regressions"].filter((pl.col("workload") == "all") & (pl.col("metric") == "ttft_s")
                                                 & (pl.col("percentile") == "p50")).row(0, named=True)
    after = next(c for c in TRUTH["cohorts"] if c["engine_version"] == "0.20.1")
    assert week["direction"] == "improvement"
    assert week["ratio"] == pytest.approx(after["ttft_s"]["p50"] / before["ttft_s"]["p50"], rel=0.05)


def test_an_early_cohort_of_8_requests_is_not_judged(sample_store, tmp_path, capsys, monkeypatch):
    """The issue's story: --since 3d starts minutes before the upgrade, so the old engine's cohort holds 8
    requests. The report says why it did not judge them, and --fail-on regression holds nothing. (The golden
    report3d asks the same question: the report is built once per session.)"""
    _built_once(monkeypatch)
    out = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "report", "--store", str(sample_store), "--since", "3d", "--out", str(out), "-q",
                           "--fail-on", "regression")
    assert code == 0, err
    doc = json.loads(out.read_text())
    summary = rows(doc, "changes", "upgrade_summary")
    assert {r["n_before"] for r in summary} == {8} and {r["verdict"] for r in summary} == {"too few requests"}
    assert all(r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"] for r in summary)
    lines = next(s for s in doc["sections"] if s["id"] == "changes")["lines"]
    assert any("Not judged inside this window" in x and "8 requests before" in x for x in lines), lines
    assert "regression" not in doc["found"]


# -- two weeks of LiteLLM lines ---------------------------------------------------------------------------------

WEEK_A = datetime(2025, 2, 4, 10, tzinfo=UTC)   # Tue of 2025-W06
WEEK_B = datetime(2025, 2, 11, 10, tzinfo=UTC)  # Tue of 2025-W07
N = 60


def _line(i: int, start: datetime, prompt: int, ttft: float) -> str:
    t = start.timestamp()
    return json.dumps({
        "id": f"chatcmpl-{i:032x}", "call_type": "acompletion", "stream": True, "status": "success",
        "startTime": t, "completionStartTime": t + ttft, "endTime": t + ttft + 1.0,
        "model": "hosted_vllm/Qwen/Qwen3-8B", "model_group": "qwen", "api_base": "http://10.0.0.5:8000/v1",
        "prompt_tokens": prompt, "completion_tokens": 21, "metadata": {"user_api_key_alias": "chat-web"},
    })


def two_weeks(d: Path) -> Path:
    """60 requests a minute apart in each week: prompts of 1,100 + i then 3,500 + i tokens (one prompt-length
    bucket, 1024-4095, but disjoint log bins: distance 1), TTFT 0.2 + i ms then 0.8 + i ms."""
    d.mkdir(parents=True, exist_ok=True)
    lines = [_line(i, WEEK_A + timedelta(minutes=i), 1100 + i, 0.2 + i / 1000) for i in range(N)]
    lines += [_line(N + i, WEEK_B + timedelta(minutes=i), 3500 + i, 0.8 + i / 1000) for i in range(N)]
    (d / "litellm.jsonl").write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture(scope="module")
def weeks(tmp_path_factory):
    """The two weeks ingested once for the module (the tests only read the store) and a config file."""
    d = tmp_path_factory.mktemp("weeks")
    ingest([str(two_weeks(d / "logs"))], d / "store")
    (d / "attribution.toml").write_text("resamples = 50\n")
    return d / "store", d / "attribution.toml"


def test_drift_and_regression_are_found_and_fail_on_exits_5(weeks, tmp_path, capsys, monkeypatch):
    store, cfg = weeks
    _built_once(monkeypatch)
    out = tmp_path / "out"
    base = ["report", "--store", str(store), "--config", str(cfg), "--week", "2025-W07", "--out-dir", str(out), "-q"]
    code, stdout, err = run_cli(capsys, *base, "--fail-on", "regression", "--fail-on", "drift", "--fail-on", "empty")
    # written first, then exit 5 for the conditions that held
    assert code == 5 and stdout == "" and "found: regression, drift (exit 5)" in err, err
    doc = json.loads((out / "attribution-report-2025-W07.json").read_text())
    assert doc["window"]["since"] == "2025-02-10T00:00:00+00:00" and doc["window"]["requests"] == N
    assert doc["window"]["previous"]["requests"] == N
    drifted = [r for r in rows(doc, "changes", "drift") if r["metric"] == "prompt_tokens"]
    assert [(r["status"], r["distance"]) for r in drifted] == [("drift", 1.0)]
    reg = {(r["workload"], r["metric"], r["percentile"]): r for r in rows(doc, "changes", "week_regressions")}
    p50 = reg[("all", "ttft_s", "p50")]
    # the inverted-CDF p50 of 0.2 + i ms over i = 0..59 is the 30th value, 0.229 s; of 0.8 + i ms, 0.829 s
    assert p50["direction"] == "regression"
    assert (p50["before"], p50["after"]) == (pytest.approx(0.229), pytest.approx(0.829))
    # 60 requests a side: a p50 is judged (20 needed), a p90 (100) and a p99 (1,000) are not
    assert {k[2] for k in reg} == {"p50"}
    assert doc["actions"][0]["kind"] == "regression" and doc["actions"][0]["severity"] == "act"
    # the week before has no week before it: nothing to regress against, nothing to fail on
    code, _, _ = run_cli(capsys, *base[:5], "--week", "2025-W06", "--out-dir", str(out), "-q", "--fail-on", "regression",
                     "--fail-on", "drift")
    assert code == 0


def test_reruns_give_the_same_bytes_and_files_are_named_by_iso_week(weeks, tmp_path, capsys, monkeypatch):
    store, cfg = weeks
    a, b = tmp_path / "a", tmp_path / "b"
    for d, more in ((a, []), (b, ["--out", str(tmp_path / "week.html")])):
        code, _, err = run_cli(capsys, "report", "--store", str(store), "--config", str(cfg), "--since", "7d",
                           "--out-dir", str(d), "-q", *more)
        assert code == 0, err
    names = sorted(p.name for p in a.iterdir())
    # --since 7d counts back from the newest request (Tue 11 Feb 2025 10:59): the window's middle, Fri 7 Feb
    # 22:59, is in W06
    assert names == ["attribution-report-2025-W06.html", "attribution-report-2025-W06.json",
                     "attribution-report-2025-W06.md"]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (tmp_path / "week.html").read_bytes() == (b / names[0]).read_bytes()
    _built_once(monkeypatch)
    code, stdout, _ = run_cli(capsys, "report", "--store", str(store), "--config", str(cfg), "--week", "2025-W07",
                          "--out", "-", "--format", "md", "-q")
    assert code == 0 and stdout.startswith("# LLM serving report, week 2025-W07")


def test_an_empty_window_is_reported_and_can_fail(weeks, tmp_path, capsys, monkeypatch):
    store, cfg = weeks
    _built_once(monkeypatch)
    args = ["report", "--store", str(store), "--config", str(cfg), "--week", "2025-W01", "--out",
            str(tmp_path / "r.md"), "-q"]
    assert run_cli(capsys, *args)[0] == 0
    assert "No requests in this window" in (tmp_path / "r.md").read_text()
    code, _, err = run_cli(capsys, *args, "--fail-on", "empty")
    assert code == 5 and "empty" in err


def test_a_locked_store_skips_the_ingest_and_still_reports(weeks, tmp_path, capsys):
    store, cfg = weeks
    more = two_weeks(tmp_path / "more")
    args = ["report", "--store", str(store), "--config", str(cfg), "--week", "2025-W07", "--ingest", str(more),
            "--out", str(tmp_path / "r.json"), "-q"]
    with Store.open(store).writer():  # another ingest is writing
        code, _, err = run_cli(capsys, *args, "--fail-on", "health")
    assert code == 5 and "another ingest is writing" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert any(a["kind"] == "health" and "skipped" in a["text"] for a in doc["actions"])
    assert doc["window"]["requests"] == N


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--store", "{tmp}/nowhere"], 4, "no store here"),
    (["--week", "2025-W99"], 2, "ISO week"),
    (["--week", "last", "--since", "7d"], 2, "not both"),
    (["--ingest", "{tmp}/missing.log"], 3, "missing.log"),
    (["--out", "{tmp}/r.txt"], 2, "--format"),
    (["--out-dir", None], 2, "--out FILE"),
])
def test_failures_exit_with_documented_codes(weeks, tmp_path, capsys, args, code, message):
    store, cfg = weeks
    base = {"--store": str(store), "--config": str(cfg), "--out-dir": str(tmp_path / "out")}
    for i in range(0, len(args), 2):
        if args[i + 1] is None:
            base.pop(args[i])
        else:
            base[args[i]] = args[i + 1].replace("{tmp}", str(tmp_path))
    flat = [x for kv in base.items() for x in kv]
    got, _, err = run_cli(capsys, "report", *flat, "-q")
    assert got == code and message in err, err


def test_a_store_without_requests_is_an_input_error(tmp_path, capsys):
    Store.open(tmp_path / "empty", create=True)
    code, _, err = run_cli(capsys, "report", "--store", str(tmp_path / "empty"), "--out", str(tmp_path / "r.md"))
    assert code == 3 and "no requests" in err and not (tmp_path / "r.md").exists()


# -- pieces -----------------------------------------------------------------------------------------------------

def test_drift_distance_is_the_largest_gap_between_cumulative_distributions():
    # a: before 10, 20 (CDF 0.5 at 10); now 10, 15, 15, 20, 20 -> CDF at 10: 0.2, at 15: 0.6 -> |0.5-0.2| and
    # |0.5-0.6|: the largest gap is 0.3. b: identical -> 0. c: only now.
    before = pl.DataFrame({"grp": ["a"] * 2 + ["b"], "prompt_tokens": [10, 20, 3], "output_tokens": [1, 1, 1]})
    now = pl.DataFrame({"grp": ["a"] * 5 + ["b", "c"], "prompt_tokens": [10, 15, 15, 20, 20, 3, 5],
                        "output_tokens": [1] * 7})
    d = {r["grp"]: r for r in drift_lengths(before, now).filter(pl.col("metric") == "prompt_tokens")
         .iter_rows(named=True)}
    assert d["a"]["distance"] == pytest.approx(0.3) and d["a"]["distance_lo"] == 0 and d["a"]["status"] == "too few"
    assert d["b"]["distance"] == 0 and d["c"]["status"] == "new"


def test_windows_weeks_and_names():
    w = Window(datetime(2026, 5, 2, 23, 59, tzinfo=UTC), None, datetime(2026, 5, 9, 23, 59, tzinfo=UTC))
    assert previous_window(w) == Window(datetime(2026, 4, 25, 23, 59, tzinfo=UTC), w.since, w.newest)
    assert iso_week(w) == "2026-W19"
    # 2026-01-01 is a Thursday: ISO week 1 of 2026 starts Mon 29 Dec 2025
    assert parse_week("2026-W01", None).since == datetime(2025, 12, 29, tzinfo=UTC)
    last = parse_week("last", datetime(2026, 5, 13, 8, tzinfo=UTC))  # a Wednesday in W20
    assert (last.since, last.until) == (datetime(2026, 5, 4, tzinfo=UTC), datetime(2026, 5, 11, tzinfo=UTC))
    with pytest.raises(UsageError):
        parse_week("2026-19", None)
    assert previous_window(Window(None, None, None)) is None


def test_log_gaps_inside_and_at_the_edges():
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    t = datetime(2025, 1, 1, tzinfo=UTC)
    # pod a: requests at 0, 10 min, 3 h 10 min, 4 h; pod b: step lines at 0 and 2 h 30 min (then stops)
    req = pl.DataFrame({"deployment": ["a"] * 4, "source": ["vllm_log"] * 4,
                        "arrival": [t + timedelta(minutes=m) for m in (0, 10, 190, 240)], "finished": [None] * 4},
                       schema_overrides={"finished": pl.Datetime("us", "UTC")})
    steps = pl.DataFrame({"deployment": ["b", "b"], "source": ["sglang_log"] * 2,
                          "ts": [t, t + timedelta(minutes=150)]})
    con.register("requests", req.to_arrow())
    con.register("engine_steps", steps.to_arrow())
    gaps = log_gaps(con, Window(None, None), 60 * 60).select("deployment", "kind", "gap_s", "edge").rows()
    # b also fell silent between its two lines (2 h 30 min); the last event of all is a's at 4 h
    assert gaps == [("a", "requests", 3 * 3600.0, "inside"), ("b", "steps", 150 * 60.0, "inside"),
                    ("b", "steps", 90 * 60.0, "end")]
    assert log_gaps(con, Window(None, None), 4 * 3600).height == 0


def test_formats_and_fail_on_conditions():
    assert format_of("week.HTML", None) == ReportFormat.html and format_of("x", ReportFormat.md) == ReportFormat.md
    with pytest.raises(UsageError):
        format_of("week.pdf", None)
    found = type("R", (), {"found": ["drift", "health"], "severities": ["watch"]})()
    assert triggered(found, [FailOn.drift, FailOn.regression, FailOn.action]) == ["drift"]
    assert triggered(found, None) == []
