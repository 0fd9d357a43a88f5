"""Answers from Prometheus histograms and counters written straight into a store: the window's increase (SQL)
equals the kernel's, resets included; percentiles with bucket edges; thresholds and goodput exact on an edge
and bounded off one; prefix-cache hit rate; exact and histogram figures side by side in `latency`; two windows
compared with "cannot tell" when the buckets overlap; the `metrics` command."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from conftest import REPO, app_test, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from attribution.analyses import latency, lengths, select
from attribution.analyses.common import Window
from attribution.histograms import compare_windows, increase, metrics
from attribution.histograms.analysis import increases
from attribution.schema import conform
from attribution.store import Store

T0 = datetime(2026, 1, 5, tzinfo=UTC)
INF = math.inf
TTFT = "vllm:time_to_first_token_seconds"
PROMPT = "vllm:request_prompt_tokens"
PROMPT_EDGES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, INF]


def write(root, **tables: list[dict]) -> Store:
    store = Store.open(root, create=True)
    with store.writer() as w:
        add = [w.write(t, conform(t, pl.DataFrame(rows)), file_key=None, sealed=True) for t, rows in tables.items()
               if rows]
        w.commit(add, [], {})
    return store


def hist_rows(metric: str, minute: float, cum: dict[float, float], total_sum: float, pod: str = "pod-a",
              series: str = "engine=0") -> list[dict]:
    """One scrape of a histogram: its buckets (cumulative), _sum and _count."""
    base = {"ts": T0 + timedelta(minutes=minute), "deployment": pod, "model": "m", "engine": metric.split(":")[0],
            "metric": metric, "series": series}
    rows = [{**base, "part": "bucket", "le": le, "value": float(c)} for le, c in cum.items()]
    rows += [{**base, "part": "count", "le": None, "value": float(cum[INF])},
             {**base, "part": "sum", "le": None, "value": total_sum}]
    return rows


def counter_rows(metric: str, values: list[float], pod: str = "pod-a", engine: str = "vllm") -> list[dict]:
    return [{"ts": T0 + timedelta(minutes=i), "deployment": pod, "model": "m", "engine": engine, "metric": metric,
             "series": "engine=0", "value": v} for i, v in enumerate(values)]


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.integers(0, 50).map(float), min_size=1, max_size=12), cut=st.integers(0, 12))
def test_window_increase_is_the_kernels_from_the_sample_before_the_window(tmp_path_factory, values, cut):
    store = write(tmp_path_factory.mktemp("s") / "store", metric_counters=counter_rows("vllm:x_total", values))
    since = T0 + timedelta(minutes=cut)
    got = increases(store.connect(), Window(since, None), "counter")
    before = [v for i, v in enumerate(values) if i < cut][-1:]
    inside = [v for i, v in enumerate(values) if i >= cut]
    if not inside:
        assert got.is_empty()
        return
    assert got["increase"].item() == increase(before + inside)
    assert got["resets"].item() == sum(b < a for a, b in zip(before + inside, (before + inside)[1:], strict=False))


def test_increase_rows_keep_each_series_labels_and_their_nulls(tmp_path):
    """One row per deployment, model, engine, metric, part and le, labels as stored: _sum and _count have no le
    (not 0), a series without a model stays apart from one with a model (queries/int_metric_series.sql numbers
    the series; queries/metric_increase.sql joins the samples to it on their labels, NULL matching NULL)."""
    cum0, cum1 = {1.0: 0, INF: 0}, {1.0: 2, INF: 3}
    rows = hist_rows(TTFT, 0, cum0, 0.0) + hist_rows(TTFT, 10, cum1, 4.0)
    rows += [{**r, "model": None, "value": 2 * r["value"]} for r in rows]
    got = increases(write(tmp_path / "store", metric_histograms=rows).connect(), Window(None, None))
    key = ("model", "part", "le", "increase", "series", "samples")
    assert sorted(got.select(key).iter_rows(), key=str) == sorted([
        ("m", "bucket", 1.0, 2.0, 1, 2), ("m", "bucket", INF, 3.0, 1, 2), ("m", "count", None, 3.0, 1, 2),
        ("m", "sum", None, 4.0, 1, 2), (None, "bucket", 1.0, 4.0, 1, 2), (None, "bucket", INF, 6.0, 1, 2),
        (None, "count", None, 6.0, 1, 2), (None, "sum", None, 8.0, 1, 2)], key=str)
    assert set(got["deployment"]) == {"pod-a"} and set(got["engine"]) == {"vllm"} and set(got["metric"]) == {TTFT}


def ttft_store(root, reset: bool = False) -> Store:
    # scrapes at minutes 0, 10, 20; with `reset`, the pod restarts between 10 and 20 (counts start again)
    s0 = {0.1: 0, 0.25: 0, 0.5: 0, 1.0: 0, INF: 0}
    s1 = {0.1: 2, 0.25: 5, 0.5: 8, 1.0: 9, INF: 10}
    s2 = {0.1: 1, 0.25: 3, 0.5: 5, 1.0: 6, INF: 7} if reset else {0.1: 3, 0.25: 10, 0.5: 16, 1.0: 18, INF: 20}
    rows = hist_rows(TTFT, 0, s0, 0.0) + hist_rows(TTFT, 10, s1, 3.0) + hist_rows(TTFT, 20, s2, 1.5 if reset else 6.0)
    return write(root, metric_histograms=rows)


def test_percentiles_carry_the_bucket_edges_and_survive_a_reset(tmp_path):
    res = metrics(ttft_store(tmp_path / "store", reset=True).connect(), percentiles=[50])
    p = res.tables["latency"].filter(pl.col("percentile") == 50).row(0, named=True)
    # increase: s1 (2,5,8,9,10) + s2 counted whole after the reset (1,3,5,6,7) = (3,8,13,15,17)
    assert p["observations"] == 17 and p["mean"] == pytest.approx((3.0 + 1.5) / 17)
    assert (p["lo"], p["hi"]) == (0.25, 0.5) and p["value"] == pytest.approx(0.25 + 0.25 * 0.5 / 5)  # rank 8.5
    assert p["label"] == "bucket-interpolated" and any("reset" in n for n in res.notes)
    p99 = res.tables["latency"].filter(pl.col("percentile") == 99).row(0, named=True)
    assert (p99["value"], p99["lo"], p99["hi"]) == (1.0, 1.0, INF)  # the +Inf bucket: last finite bound


def test_a_window_without_samples_answers_nothing(tmp_path):
    res = metrics(ttft_store(tmp_path / "store").connect(), since=T0 + timedelta(hours=1))
    assert res.tables["latency"].is_empty() and res.notes


def test_relative_since_counts_back_from_the_newest_sample(tmp_path):
    con = ttft_store(tmp_path / "store").connect()
    res = metrics(con, since="5m", percentiles=[50])  # only the 20-minute scrape, measured from the 10-minute one
    assert set(res.tables["latency"]["observations"]) == {10.0}


def prompt_store(root) -> Store:
    start = dict.fromkeys(PROMPT_EDGES, 0)
    cum = {le: (0 if le < 20000 else 60 if le == 20000 else 70 if le == 50000 else 95 if le == 100000 else 100)
           for le in PROMPT_EDGES}
    return write(root, metric_histograms=hist_rows(PROMPT, 0, start, 0) + hist_rows(PROMPT, 5, cum, 3e6))


def test_thresholds_exact_on_an_edge_and_bounded_between_edges(tmp_path):
    res = metrics(prompt_store(tmp_path / "store").connect(), thresholds=[100000, 95000])
    t = {r["threshold"]: r for r in res.tables["thresholds"].iter_rows(named=True)}
    assert t[100000]["exact"] and t[100000]["above_at_least"] == 5
    off = t[95000]
    assert not off["exact"] and (off["above_at_least"], off["above_at_most"]) == (5, 30)
    assert (off["edge_below"], off["edge_above"]) == (50000, 100000) and "not a bucket edge" in off["answer"]
    lengths = res.tables["lengths"].filter(pl.col("percentile") == 50).row(0, named=True)
    assert lengths["counts"] == "prompt" and lengths["lo"] == 10000 and lengths["hi"] == 20000


def test_goodput_exact_on_an_edge_and_a_bound_off_it(tmp_path):
    con = ttft_store(tmp_path / "store").connect()
    on = metrics(con, slo=[("ttft", 0.5)]).tables["goodput"].row(0, named=True)
    assert on["exact"] and on["good_at_least"] == 16 and on["share_at_most"] == pytest.approx(0.8)
    off = metrics(con, slo=[("ttft", 0.3)]).tables["goodput"].row(0, named=True)
    assert not off["exact"] and (off["good_at_least"], off["good_at_most"]) == (10, 16)
    assert metrics(con, slo=[("ttft", 0.5), ("tpot", 0.05)]).tables["goodput"].is_empty()  # no TPOT histogram


def test_prefix_cache_hit_rate_with_a_reset_and_an_alias_not_added(tmp_path):
    rows = (counter_rows("vllm:prefix_cache_hits_total", [0, 30, 10]) +
            counter_rows("vllm:prefix_cache_queries_total", [0, 100, 20]) +
            counter_rows("vllm:gpu_prefix_cache_hits_total", [0, 30, 10]) +
            counter_rows("sglang:cached_tokens_total", [0, 5], pod="pod-s", engine="sglang") +
            counter_rows("sglang:prompt_tokens_total", [0, 50], pod="pod-s", engine="sglang"))
    res = metrics(write(tmp_path / "store", metric_counters=rows).connect())
    pc = {r["deployment"]: r for r in res.tables["prefix_cache"].iter_rows(named=True)}
    assert (pc["pod-a"]["hit_tokens"], pc["pod-a"]["queried_tokens"]) == (40, 120)
    assert pc["pod-a"]["hit_rate"] == pytest.approx(40 / 120) and pc["pod-a"]["resets"] == 2
    assert pc["pod-s"]["hit_rate"] == pytest.approx(0.1)


def test_latency_puts_exact_and_histogram_figures_side_by_side(tmp_path):
    ttft_store(tmp_path / "store")
    store = Store.open(tmp_path / "store")
    reqs = [{"request_id": f"r{i}", "deployment": "pod-a", "model": "m", "source": "vllm_bench", "source_kind": "bench",
             "arrival": T0 + timedelta(minutes=1, seconds=i), "ttft_s": 0.05 + 0.04 * i, "e2e_s": 2.0,
             "status": "ok"} for i in range(20)]
    with store.writer() as w:
        w.commit([w.write("requests", conform("requests", pl.DataFrame(reqs)), file_key=None, sealed=True)], [], {})
    res = latency(select(store.connect(), by="deployment"), percentiles=[50])
    hist = res.tables["histogram_percentiles"]
    assert set(hist["label"]) == {"bucket-interpolated"} and "q" not in hist.columns
    both = res.tables["exact_vs_histogram"].filter(pl.col("percentile") == 50).row(0, named=True)
    assert both["phase"] == "ttft" and both["exact_requests"] == 20
    assert both["exact"] == pytest.approx(0.05 + 0.04 * 9.5) and both["interpolated"] == 0.25
    assert "seconds" in res.titles["percentiles"]  # the exact table keeps its own name, never mixed


def test_latency_without_histograms_is_unchanged(tmp_path):
    reqs = [{"request_id": "r1", "source_kind": "bench", "deployment": "pod-a", "arrival": T0, "ttft_s": 0.1, "status": "ok"}]
    res = latency(select(write(tmp_path / "store", requests=reqs).connect()))
    assert "histogram_percentiles" not in res.tables and "exact_vs_histogram" not in res.tables


def test_compare_says_cannot_tell_when_the_buckets_overlap(tmp_path):
    base = {0.1: 0, 0.25: 0, 0.5: 0, 1.0: 0, INF: 0}
    fast = {0.1: 8, 0.25: 10, 0.5: 10, 1.0: 10, INF: 10}
    slow = {0.1: 8, 0.25: 10, 0.5: 12, 1.0: 30, INF: 30}  # adds 20 slow requests in (0.5, 1]
    rows = hist_rows(TTFT, 0, base, 0) + hist_rows(TTFT, 10, fast, 1) + hist_rows(TTFT, 20, slow, 20)
    con = write(tmp_path / "store", metric_histograms=rows).connect()
    a, b = Window(None, T0 + timedelta(minutes=15)), Window(T0 + timedelta(minutes=15), None)
    cmp = compare_windows(con, a, b, [50]).tables["compare"]
    p50 = cmp.filter(pl.col("percentile") == 50).row(0, named=True)
    assert p50["verdict"] == "higher" and p50["ratio"] == pytest.approx(p50["b"] / p50["a"])
    assert p50["ratio_lo"] == pytest.approx(p50["b_lo"] / p50["a_hi"])
    same = compare_windows(con, a, a, [50]).tables["compare"]
    assert set(same["verdict"]) == {"cannot tell"}


def test_metrics_command_json(tmp_path, capsys):
    ttft_store(tmp_path / "store")
    code, out, _ = run_cli(capsys, "metrics", "--store", str(tmp_path / "store"), "--format", "json",
                           "--threshold", "95000", "--slo", "ttft=0.5", "--baseline-until", "2026-01-05T00:15")
    assert code == 0
    doc = json.loads(out)
    assert doc["analysis"] == "metrics" and doc["tables"]["goodput"][0]["good_at_least"] == 16
    assert {r["label"] for r in doc["tables"]["latency"]} == {"bucket-interpolated"}
    assert doc["tables"]["compare"] and doc["params"]["baseline"]["until"]


def test_compare_by_window_on_histograms_alone(tmp_path, capsys):
    base = {0.1: 0, 0.25: 0, 0.5: 0, 1.0: 0, INF: 0}
    fast = {0.1: 8, 0.25: 10, 0.5: 10, 1.0: 10, INF: 10}
    slow = {0.1: 8, 0.25: 10, 0.5: 12, 1.0: 30, INF: 30}
    rows = hist_rows(TTFT, 0, base, 0) + hist_rows(TTFT, 10, fast, 1) + hist_rows(TTFT, 20, slow, 20)
    write(tmp_path / "store", metric_histograms=rows)
    code, out, err = run_cli(capsys, "compare", "--store", str(tmp_path / "store"), "--format", "json",
                             "--cohort-by", "window", "--before", "2026-01-05T00:00..2026-01-05T00:15",
                             "--after", "2026-01-05T00:15..2026-01-05T01:00")
    assert code == 0, err
    doc = json.loads(out)
    p50 = next(r for r in doc["tables"]["histograms"] if r["percentile"] == 50)
    assert p50["verdict"] == "higher" and p50["label"] == "bucket-interpolated" and doc["notes"]


def test_a_report_reads_each_windows_increases_once(tmp_path, monkeypatch):
    """Inside shared_increases (a report's analyses) the same connection, window and table run the query once
    and give the same rows; another window or table runs it again; outside, what the commit kept on disk
    (attribution.kept), else the query again."""
    from attribution import queries
    from attribution.histograms.analysis import shared_increases
    from attribution.joincache import cache_dir

    con = ttft_store(tmp_path / "store").connect()
    ran: list[tuple] = []
    real = queries.run

    def run(c, name, **kw):
        if name == "metric_increase":
            ran.append((kw["kind"], kw["since"]))
        return real(c, name, **kw)
    monkeypatch.setattr(queries, "run", run)
    later = Window(T0 + timedelta(minutes=5), None)
    with shared_increases():
        first = increases(con, Window(T0, None))
        assert increases(con, Window(T0, None)).equals(first) and len(ran) == 1
        increases(con, later)
        increases(con, Window(T0, None), "counter")
        assert len(ran) == 3
    assert increases(con, Window(T0, None)).equals(first)  # outside: the file the commit kept (attribution.kept)
    assert len(ran) == 3
    for kept in cache_dir(tmp_path / "store").glob("metric_increase-*"):
        kept.unlink()
    increases(con, Window(T0, None))  # without the file: computed again
    assert len(ran) == 4 and first["increase"].sum() > 0
    # a report on this store: every analysis asking the window's histogram increases shares one read
    ran.clear()
    from attribution.config import load_settings
    from attribution.report import run_analyses

    inp = run_analyses(Store.open(tmp_path / "store"), load_settings())
    assert inp.metrics is not None and not inp.metrics.tables["latency"].is_empty()
    assert len(ran) == len(set(ran)) and ("histogram", inp.window.since) in ran


def test_report_of_a_store_of_prometheus_samples_alone(tmp_path, capsys):
    ttft_store(tmp_path / "store")
    out = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "report", "--store", str(tmp_path / "store"), "--format", "json", "--out",
                           str(out), "-q")
    assert code == 0, err
    sections = {s["id"]: s for s in json.loads(out.read_text())["sections"]}
    lat = sections["metrics"]["tables"]["latency"]
    assert "bucket-interpolated" in sections["metrics"]["title"]
    assert "(0.1, 0.25]" in json.dumps(lat) and "+Inf" in json.dumps(lat)


def test_dashboard_latency_page_shows_the_histogram_tables(tmp_path, monkeypatch):
    ttft_store(tmp_path / "store")
    reqs = [{"request_id": f"r{i}", "source_kind": "bench", "deployment": "pod-a", "model": "m",
             "arrival": T0 + timedelta(minutes=1, seconds=i), "ttft_s": 0.2, "status": "ok"} for i in range(5)]
    store = Store.open(tmp_path / "store")
    with store.writer() as w:
        w.commit([w.write("requests", conform("requests", pl.DataFrame(reqs)), file_key=None, sealed=True)], [], {})
    monkeypatch.setenv("ATTRIBUTION_STORE", str(tmp_path / "store"))
    at = app_test(REPO / "dashboards" / "app.py", default_timeout=240)
    at.switch_page("app_pages/latency.py")
    at.run()
    assert not at.exception, at.exception[0].message
    heads = [el.value for el in at.main if type(el).__name__ == "Subheader"]
    assert any("bucket-interpolated" in h for h in heads) and any(h.startswith("Exact") for h in heads)


def test_lengths_adds_the_token_histograms_when_no_per_request_rows_exist(tmp_path):
    res = lengths(select(prompt_store(tmp_path / "store").connect(), since=T0, until=T0 + timedelta(hours=1)))
    assert res.tables["stats"].is_empty()
    p50 = res.tables["histogram_lengths"].filter(pl.col("percentile") == 50).row(0, named=True)
    assert (p50["counts"], p50["lo"], p50["hi"]) == ("prompt", 10000, 20000) and p50["observations"] == 100


def _day_store_rows(days: range) -> tuple[list[dict], list[dict]]:
    """Scrapes every 7 hours over `days` (so one lands on a midnight now and then): two series of one pod's TTFT
    histogram, one of them restarting (its counts drop) on the second day and absent on the third, a series with
    no name, a scrape read twice with two values, and a counter; fractional sums (days summed in another order
    than the samples differ in the last bits)."""
    hist, counter = [], []
    for i, minute in enumerate(range(days.start * 1440, days.stop * 1440, 7 * 60)):
        k = i + 1
        for series, scale in (("engine=0", 1.0), ("engine=1", 0.3), (None, 2.0)):
            if series == "engine=1" and minute // 1440 == 2:
                continue
            n = k if series != "engine=1" or minute < 1440 + 600 else k - 6
            cum = {0.1: n * scale // 1, 0.5: 2 * n * scale // 1, INF: 3 * n * scale // 1}
            rows = hist_rows(TTFT, minute, cum, n * scale * 0.173, series=series)
            hist += [{**r, "series": series} for r in rows]
        counter += [{**r, "ts": T0 + timedelta(minutes=minute)} for r in counter_rows("vllm:y_total", [k * 1.1])]
    dup = hist_rows(TTFT, 1440 + 7 * 60 * 3, {0.1: 99, 0.5: 99, INF: 99}, 1.0)  # (a second read, another value)
    return hist + dup, counter


def test_a_dashboards_whole_day_windows_sum_the_days_increases_equal_to_the_samples(tmp_path, monkeypatch):
    """On a dashboard's connection (share_samples) the whole store's increases also keep each series' increase per
    UTC day (queries/metric_increase_days.sql), and a window of whole days (an end may be open) is their sum
    (metric_increase_from_days.sql) instead of a scan of every sample: the rows metric_increase.sql gives, the
    counts exact, the increases to 1e-12 relative; on the next commit (a later day, and a scrape added to an earlier
    day) too. A window not of whole days reads the samples."""
    from polars.testing import assert_frame_equal

    from attribution import queries
    from attribution.histograms.analysis import share_samples

    real, ran = queries.run, []
    monkeypatch.setattr(queries, "run", lambda c, name, **kw: ran.append(name) or real(c, name, **kw))
    hist, counter = _day_store_rows(range(0, 4))
    store = write(tmp_path / "store", metric_histograms=hist, metric_counters=counter)
    for commit, days in enumerate((4, 6)):
        if commit:  # the next commit: two more days, and a scrape of the first day that the first one lacked
            hist, counter = _day_store_rows(range(4, 6))
            late = hist_rows(TTFT, 13, {0.1: 0, 0.5: 1, INF: 5}, 0.5)
            write(tmp_path / "store", metric_histograms=hist + late, metric_counters=counter)
        for table in ("histogram", "counter"):
            con = store.connect()
            share_samples(con, (str(store.root), store.snapshot().version))
            ran.clear()
            increases(con, Window(), table)
            assert ran == ["metric_increase", "metric_increase_days"]
            windows = [(a, b) for a in [None, *range(days)] for b in [*range(1, days + 1), None] if a is None or
                       b is None or a < b]
            for a, b in windows:
                w = Window(None if a is None else T0 + timedelta(days=a), None if b is None else T0 + timedelta(days=b))
                ran.clear()
                got = increases(con, w, table)
                want = real(con, "metric_increase", kind=table, since=w.since, until=w.until)
                assert ran == ([] if a is None and b is None else ["metric_increase_from_days"]), (a, b)
                assert got.height and got.schema == want.schema and got.drop("increase").equals(want.drop("increase"))
                assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12, abs_tol=0)
            ran.clear()
            w = Window(T0 + timedelta(hours=30), T0 + timedelta(days=3))
            assert increases(con, w, table).equals(real(con, "metric_increase", kind=table, since=w.since,
                                                        until=w.until))
            assert ran == ["metric_increase"]
