"""The weekly report: one file that stands alone (HTML with its charts inlined, or Markdown, or JSON) and
says what the week looked like and what changed. `build_report` runs the library's analyses on one store
snapshot; `output.write` renders and writes the result; `changes` and `health` are the two analyses that
only the report needed (week-over-week drift and regressions, ingest health and log gaps).

    report = build_report(Store.open(path), load_settings(), since="7d")
    write(report, out_dir=Path("reports"))     # attribution-report-2026-W19.{html,md,json}
"""

from attribution.choices import FailOn, ReportFormat
from attribution.report.build import Inputs, assemble, build_report, report_window, run_analyses
from attribution.report.changes import changes, iso_week, previous_window
from attribution.report.health import health, log_gaps
from attribution.report.model import Action, Report, Section
from attribution.report.output import EXIT_FOUND, file_name, render, triggered, write

__all__ = [
    "EXIT_FOUND", "Action", "FailOn", "Inputs", "Report", "ReportFormat", "Section", "assemble", "build_report",
    "changes",
    "file_name", "health", "iso_week", "log_gaps", "previous_window", "render", "report_window", "run_analyses",
    "triggered", "write",
]
