"""The dashboard's time range spans every row the pages read: on a store whose few requests sit in one hour
beside a real vLLM console log of two days (engine step lines, access lines, a start), the slider left whole
covers those lines too, and the pages, reading the whole store then, count what it shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import REPO, app_test, litellm_line, shared

from attribution import dashboard
from attribution.dashboard import Filters
from attribution.db import fetch
from attribution.ingest import ingest
from attribution.store import Store

APP = REPO / "dashboards" / "app.py"
VLLM_LOG = ("traces", "vllm_server_logs", "01_2026_05_09_vllm_log_dump.txt")
HOUR = datetime(2026, 5, 8, 10, 5, tzinfo=UTC)  # the requests' hour (the log runs 7 May 20:39 to 9 May 16:26)
SPANS = """select 'requests' as what, min(coalesce(arrival, finished)) as first, max(coalesce(arrival, finished))
    as last from joined_requests
    union all select 'engine_steps', min(ts), max(ts) from engine_steps
    union all select 'engine_config', min(ts), max(ts) from engine_config
    union all select 'access_log', min(ts), max(ts) from access_log"""


def _store(root: Path, requests: bool) -> Path:
    paths = [str(shared(*VLLM_LOG))]
    if requests:
        gateway = root / "gateway" / "litellm.jsonl"
        gateway.parent.mkdir(parents=True)
        rows = [litellm_line(i, "chat", 60.0 * i, 60.0 * i + 0.3, 60.0 * i + 2.0, 100 + i, 10, base=HOUR.timestamp())
                for i in range(5)]
        gateway.write_text("\n".join(rows) + "\n")
        paths.append(str(gateway))
    ingest(paths, root / "store", year=2026, tz="UTC", deployment="spark")
    return root / "store"


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("time_range")
    return {"requests": _store(root / "a", True), "lines only": _store(root / "b", False)}


def _hour(t: datetime, up: bool = False) -> datetime:
    floor = t.astimezone(UTC).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    return floor + timedelta(hours=1) if up and floor < t.astimezone(UTC).replace(tzinfo=None) else floor


@pytest.mark.parametrize("kind", ["requests", "lines only"])
def test_the_time_range_spans_every_row_the_pages_read(stores, kind, monkeypatch):
    store = stores[kind]
    spans = fetch(Store.open(store).connect(), SPANS).drop_nulls()
    assert set(spans["what"]) == ({"requests"} if kind == "requests" else set()) | {
        "engine_steps", "engine_config", "access_log"}
    ch = dashboard.View(store, Filters()).choices()
    assert (ch.begins, ch.ends) == (spans["first"].min(), spans["last"].max())
    if kind == "requests":  # the requests' own span, one hour, is still theirs
        assert (ch.requests, ch.first.hour, ch.last.hour) == (5, 10, 10)

    monkeypatch.setenv("ATTRIBUTION_STORE", str(store))
    at = app_test(APP, default_timeout=240)
    at.switch_page("app_pages/health.py")
    at.run()
    assert not at.exception, at.exception[0].message
    (rng,) = [s for s in at.sidebar.slider if s.key == "time_range"]
    lo, hi = _hour(spans["first"].min()), _hour(spans["last"].max(), up=True)
    micros = [t.replace(tzinfo=UTC).timestamp() * 1e6 for t in (lo, hi)]  # (the element's ends, as sent)
    assert ([rng.min, rng.max], rng.value) == (micros, (lo, hi))
    # left whole the range is no window (every row, as the page reads them); narrowed, a window
    assert at.session_state["filters"] == Filters()
    rng.set_range(lo + timedelta(hours=1), hi).run()
    assert not at.exception, at.exception[0].message
    assert at.session_state["filters"].since == (lo + timedelta(hours=1)).replace(tzinfo=UTC)
