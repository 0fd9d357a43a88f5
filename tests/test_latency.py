"""Latency: exact percentiles (numpy's linear method), derived TTFT/TPOT, prompt-length buckets, goodput for a
joint SLO, the ERS score with its clipping, and SLO parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from attribution.analyses import latency, parse_slo, score_presets, select
from attribution.analyses.common import frames_connection
from attribution.analyses.latency import Slo
from attribution.errors import UsageError

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def _con(**cols):
    n = len(next(iter(cols.values())))
    cols.setdefault("arrival", [T0 + timedelta(seconds=i) for i in range(n)])
    cols.setdefault("deployment", ["pod-a"] * n)
    cols.setdefault("workload", ["w"] * n)
    return frames_connection(pl.DataFrame(cols, strict=False))


def _pick(df: pl.DataFrame, **match) -> dict:
    rows = df.filter(*[pl.col(k) == v for k, v in match.items()]).to_dicts()
    assert len(rows) == 1, (match, rows)
    return rows[0]


def test_percentiles_are_exact_linear_and_skip_failed_requests():
    ttft = [0.1, 0.2, 0.3, 0.4, 9.0]
    con = _con(ttft_s=ttft, e2e_s=[1.0] * 5, status=["ok", "ok", "ok", "received", "error"])
    pct = latency(select(con)).tables["percentiles"]
    t = _pick(pct, workload="w", metric="ttft_s")
    assert t["requests"] == 4  # the error is left out; vLLM's `received` rows count as completed
    assert t["p50"] == pytest.approx(0.25) and t["p90"] == pytest.approx(0.37) and t["max"] == 0.4
    rng = np.random.default_rng(1)
    x = rng.lognormal(0, 1, 2001)
    pct = latency(select(_con(e2e_s=x))).tables["percentiles"]
    e = _pick(pct, workload="w", metric="e2e_s")
    for col, q in (("p50", 50), ("p90", 90), ("p99", 99), ("p99_9", 99.9)):
        assert e[col] == pytest.approx(np.percentile(x, q, method="linear"), rel=1e-12)


def test_ttft_and_tpot_are_derived_from_timestamps_when_missing():
    con = _con(first_token=[T0 + timedelta(seconds=0.5), T0 + timedelta(seconds=1.25)],
               finished=[T0 + timedelta(seconds=2), T0 + timedelta(seconds=3)],
               arrival=[T0, T0 + timedelta(seconds=1)], output_tokens=[4, 1])
    pct = latency(select(con)).tables["percentiles"]
    assert _pick(pct, metric="ttft_s")["max"] == pytest.approx(0.5)  # 0.5 and 0.25
    assert _pick(pct, metric="e2e_s")["p50"] == pytest.approx(2.0)
    tpot = _pick(pct, metric="tpot_s")  # (2 - 0.5) / 3; a one-token answer has none
    assert tpot["requests"] == 1 and tpot["max"] == pytest.approx(0.5)


def test_prompt_length_buckets():
    con = _con(prompt_tokens=[100, 256, 1023, 1024, 70_000], e2e_s=[1.0, 2.0, 3.0, 4.0, 5.0])
    b = latency(select(con)).tables["buckets"].filter(pl.col("metric") == "e2e_s")
    assert b.select("bucket", "requests", "max").rows() == [("<256", 1, 1.0), ("256-1023", 2, 3.0),
                                                            ("1024-4095", 1, 4.0), ("65536+", 1, 5.0)]
    custom = latency(select(con), bucket_edges=[1000]).tables["buckets"].filter(pl.col("metric") == "e2e_s")
    assert custom.select("bucket", "bucket_lo", "bucket_hi", "requests").rows() == [
        ("<1000", 0, 1000, 2), ("1000+", 1000, None, 3)]
    # a request without a prompt length: in its group's percentiles, in no bucket (the two come from one query)
    res = latency(select(_con(prompt_tokens=[100, None], e2e_s=[1.0, 9.0])))
    assert _pick(res.tables["percentiles"], metric="e2e_s")["requests"] == 2
    assert res.tables["buckets"].filter(pl.col("metric") == "e2e_s").select("bucket", "requests", "max").rows() == [
        ("<256", 1, 1.0)]


def test_goodput_for_a_joint_slo():
    # 0: meets both; 1: misses TTFT; 2: failed; 3: TTFT unknown (unmeasured); 4: one token, no TPOT: meets
    con = _con(ttft_s=[0.2, 0.9, 0.1, None, 0.3], tpot_s=[0.01, 0.01, 0.01, 0.01, None],
               output_tokens=[10, 10, 10, 10, 1], status=["ok", "ok", "error", "ok", "ok"],
               arrival=[T0 + timedelta(seconds=s) for s in (0, 2, 4, 6, 10)])
    res = latency(select(con), slo=Slo((("ttft", 0.5), ("tpot", 0.05))))
    g = _pick(res.tables["goodput"], workload="w")
    assert (g["requests"], g["failed"], g["unmeasured"], g["good"]) == (5, 1, 1, 2)
    # the share names its population: the 4 judged requests (the failed one counts, the unmeasured one not)
    assert "good_share" not in res.tables["goodput"].columns and g["judged"] == 4
    assert g["good_share_of_judged_requests"] == pytest.approx(2 / 4) and g["span_s"] == 10
    assert "good_share_of_judged_requests = good / judged" in res.definitions["goodput"]
    assert g["requests_per_s"] == pytest.approx(0.5) and g["goodput_per_s"] == pytest.approx(0.2)
    terms = res.tables["slo_terms"]
    assert _pick(terms, term="ttft")["measured"] == 3 and _pick(terms, term="ttft")["met"] == 2
    assert _pick(terms, term="tpot")["met_share"] == 1.0
    assert res.params["slo"] == {"name": None, "terms": {"ttft": 0.5, "tpot": 0.05}}


def test_ers_score_with_clipping():
    ttft_ms = [10, 400, 205, 1000, 5]
    tpot_ms = [1, 10, 5.5, 0.5, 20]
    con = _con(ttft_s=[v / 1000 for v in ttft_ms], tpot_s=[v / 1000 for v in tpot_ms], output_tokens=[9] * 5)
    (ers,) = score_presets(["ers"])
    s = _pick(latency(select(con), scores=[ers]).tables["scores"], score="ers")
    # per request: 100; 0; 100 * (0.5 * 0.5^2 + 0.5 * 0.5^2) = 25; TTFT above 400 ms clipped to 0 and TPOT below
    # 1 ms to full marks: 50; TTFT below 10 ms full, TPOT above 10 ms nothing: 50
    expected = [100, 0, 25, 50, 50]
    assert s["scored"] == 5 and s["mean"] == pytest.approx(np.mean(expected))
    assert s["p50"] == pytest.approx(50) and s["zero_share"] == pytest.approx(0.2)
    failed = _con(ttft_s=[0.01, 0.01], tpot_s=[0.001, 0.001], status=["ok", "failed"], output_tokens=[9, 9])
    assert _pick(latency(select(failed), scores=[ers]).tables["scores"], score="ers")["mean"] == pytest.approx(50)


def test_parse_slo_terms_units_and_presets():
    assert parse_slo(["ttft=0.5", "tpot=50ms"]).terms == (("ttft", 0.5), ("tpot", 0.05))
    assert parse_slo(["e2e<=30"]).terms == (("e2e", 30.0),)
    assert parse_slo().terms == (("ttft", 0.5), ("tpot", 0.05))  # the chat preset
    with pytest.raises(UsageError, match="unknown SLO term"):
        parse_slo(["latency=1"])
    with pytest.raises(UsageError, match="METRIC=SECONDS"):
        parse_slo(["ttft"])
    with pytest.raises(UsageError, match="no SLO preset"):
        parse_slo(preset="nope")
    with pytest.raises(UsageError, match="no score preset"):
        score_presets(["nope"])
    with pytest.raises(UsageError, match="positive edges"):
        latency(select(_con(e2e_s=[1.0])), bucket_edges=[0])


def test_user_presets_file_extends_the_packaged_one(tmp_path, monkeypatch):
    extra = tmp_path / "presets.toml"
    extra.write_text('[slo.batch]\ne2e = 60\n\n[score.fast]\nunit = "s"\nterms = [{metric = "e2e", best = 0, '
                     'worst = 10}]\n')
    monkeypatch.setenv("ATTRIBUTION_PRESETS", str(extra))
    assert parse_slo(preset="batch").terms == (("e2e", 60.0),)
    fast = score_presets(["fast"])
    s = _pick(latency(select(_con(e2e_s=[2.5, 20.0])), scores=fast).tables["scores"], score="fast")
    assert s["mean"] == pytest.approx((0.75 + 0) / 2)
