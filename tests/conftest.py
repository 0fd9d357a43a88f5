"""Shared fixtures: every test gets its own store directory and a pinned time zone."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTRIBUTION_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("ATTRIBUTION_CHUNK_BYTES", raising=False)


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


def shared(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.fail(f"{p} is missing: ../shared must be checked out beside the repository")
    return p


SAMPLE = REPO / "sample_logs"


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """sample_logs/ ingested once per test session (year and zone from its ground_truth.json); tests only read
    it. Returns the store directory."""
    import json

    from attribution.ingest import ingest

    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    store = tmp_path_factory.mktemp("sample") / "store"
    ingest([str(SAMPLE)], store, year=truth["year"], tz=truth.get("tz", "UTC"))
    return store
