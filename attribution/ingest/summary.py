"""What an ingest reports: one FileReport per input (its status, rows, errors and line census) and the
IngestSummary over all of them; PROBLEMS names the statuses of inputs not (fully) read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attribution import census


@dataclass
class FileReport:
    path: str
    status: str  # read / unchanged / unrecognised / failed / skipped / vanished (see PROBLEMS)
    format: str | None = None
    rows: int = 0
    errors: int = 0
    bytes: int = 0
    message: str | None = None
    kind: str | None = None  # the source's kind (engine / gateway / trace / bench)
    census: dict[str, int] = field(default_factory=lambda: dict.fromkeys(census.CLASSES, 0))  # lines per class
    unknown: dict[str, int] = field(default_factory=dict)  # unrecognised shape -> lines (the largest few)

    @property
    def lines(self) -> int:
        return sum(self.census.values())

    @property
    def silent(self) -> bool:
        """Read, with lines, and neither a row nor a problem: the loss the census exists to show."""
        return self.status == "read" and self.rows == 0 and self.errors == 0 and self.lines > 0


@dataclass
class IngestSummary:
    files: list[FileReport] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    bytes: int = 0
    seconds: float = 0.0
    store: str = ""

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def problems(self) -> list[FileReport]:
        """Inputs that could not be read (in whole or from some point on): the CLI's exit code says so."""
        return [f for f in self.files if f.status in PROBLEMS]


# Statuses of an input not (fully) read: `failed` (reading it broke off), `skipped` (not a regular file, a
# dangling symlink or loop, unreadable, nested too deep), `vanished` (deleted before or while it was read).
PROBLEMS = ("failed", "skipped", "vanished")


Progress = Callable[[str, dict[str, Any]], None]
