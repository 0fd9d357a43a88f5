"""The report as data: sections of summary lines, tables, charts and notes, plus the few action lines at the
top. HTML, Markdown and JSON are three renderings of one `Report`; its JSON form (`to_dict`) carries
everything but the figures, with floats rounded to 6 significant digits so that reruns on the same store
give the same bytes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypeVar

import plotly.graph_objects as go
import polars as pl

from attribution.errors import AttributionError

SIGNIFICANT = 6
SCHEMA_VERSION = 1
SEVERITIES = ("act", "watch", "info")  # act: do something; watch: worth a look; info: context
T = TypeVar("T")


def present(analysis: T | None, name: str) -> T:
    """An analysis a section reads; the report runs it whenever the section is built (a bug otherwise)."""
    if analysis is None:
        raise AttributionError(f"the report's {name} analysis did not run, yet a section reads it")
    return analysis


@dataclass
class Table:
    name: str
    title: str
    frame: pl.DataFrame

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": self.frame.columns,
                "rows": [{k: plain(v) for k, v in r.items()} for r in self.frame.iter_rows(named=True)]}


@dataclass
class Chart:
    """A chart of a section, built when first read: its figure for the HTML, its title (the figure's) for the
    HTML and the JSON. A report written as Markdown alone, which draws no charts, builds none."""

    id: str
    name: str  # the chart's name in its section (the title when the figure has none)
    make: Callable[[], go.Figure]
    built: go.Figure | None = field(default=None, repr=False)

    @property
    def figure(self) -> go.Figure:
        if self.built is None:
            self.built = self.make()
        return self.built

    @property
    def title(self) -> str:
        return str(self.figure.layout.title.text or self.name)


@dataclass
class Action:
    severity: str  # one of SEVERITIES
    kind: str      # regression, drift, version, ceiling, slo, memsplit, health, ...
    section: str   # id of the section that has the details
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "kind": self.kind, "section": self.section, "text": self.text}


@dataclass
class Section:
    id: str
    title: str
    lines: list[str] = field(default_factory=list)      # what the section says, in sentences
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)      # caveats from the analyses (sampled, estimate, ...)
    definitions: dict[str, str] = field(default_factory=dict)

    def table(self, name: str, title: str, frame: pl.DataFrame | None) -> None:
        if frame is not None and frame.height:
            self.tables.append(Table(name, title, frame))

    def chart(self, chart_id: str, make: Callable[[], go.Figure]) -> None:
        """A chart whose figure `make()` builds when a rendering first reads it (attribution.charts)."""
        self.charts.append(Chart(f"chart-{self.id}-{chart_id}", chart_id, make))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "lines": self.lines,
                "tables": {t.name: t.to_dict() for t in self.tables},
                "charts": [{"id": c.id, "title": c.title} for c in self.charts],
                "notes": self.notes, "definitions": self.definitions}


@dataclass
class Report:
    week: str                    # ISO week of the window's middle, e.g. 2026-W19
    window: dict[str, Any]       # since, until, newest, previous (since, until), requests
    source: dict[str, Any]       # store path and commit the report read
    settings: dict[str, Any]     # the settings used, and where each came from
    actions: list[Action] = field(default_factory=list)   # the lines shown at the top (the strongest)
    sections: list[Section] = field(default_factory=list)
    found: list[str] = field(default_factory=list)         # kinds of every candidate line, shown or not
    severities: list[str] = field(default_factory=list)    # severities of every candidate line

    @property
    def title(self) -> str:
        return f"LLM serving report, week {self.week}"

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.id == section_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "report": "attribution weekly report", "schema": SCHEMA_VERSION, "title": self.title, "week": self.week,
            "window": plain(self.window), "source": plain(self.source), "settings": plain(self.settings),
            "actions": [a.to_dict() for a in self.actions], "found": self.found,
            "sections": [s.to_dict() for s in self.sections],
        }


def plain(v: Any) -> Any:
    """JSON-ready: floats to 6 significant digits (NaN/inf -> None), times as ISO-8601, containers recursed."""
    if isinstance(v, bool) or v is None or isinstance(v, int | str):
        return v
    if isinstance(v, float):
        return float(f"{v:.{SIGNIFICANT}g}") if math.isfinite(v) else None
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, pl.Series):
        return [plain(x) for x in v.to_list()]
    return str(v)
