"""Running the analyses and the ingest on Spark (`--engine spark`): the same questions as the embedded DuckDB
path, over the same store, for data that does not fit on one machine. Optional: needs `pip install
'attribution[spark]'` and a Java runtime (17 or later)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attribution.config import Settings


def duckdb_only_note(settings: Settings, what: str) -> str | None:
    """One line for a reader that always runs on DuckDB (the dashboard) when the settings ask for Spark: it
    says so rather than silently using DuckDB."""
    if settings.engine != "spark":
        return None
    where = settings.sources.get("engine", "setting")
    return f"engine = spark (from {where}): {what} does not run on Spark; it reads the store with DuckDB"
