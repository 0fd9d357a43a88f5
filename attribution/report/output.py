"""Writing a report: its format from `--format` or the file's extension, names by ISO week in an output
directory (`attribution-report-2026-W19.html`), atomic replacement (a reader or a web server never sees half
a file; a rerun overwrites), and the `--fail-on` conditions a scheduler can alert on (exit code 5)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from attribution.choices import FailOn, ReportFormat
from attribution.errors import UsageError
from attribution.render import to_json
from attribution.report import html, markdown
from attribution.report.model import Report

EXIT_FOUND = 5  # the report was written and a --fail-on condition held
PREFIX = "attribution-report"


EXTENSIONS = {".html": ReportFormat.html, ".htm": ReportFormat.html, ".md": ReportFormat.md,
              ".markdown": ReportFormat.md, ".json": ReportFormat.json}


def render(report: Report, fmt: ReportFormat) -> str:
    if fmt == ReportFormat.html:
        return html.render(report)
    if fmt == ReportFormat.md:
        return markdown.render(report)
    return to_json(report.to_dict()) + "\n"


def format_of(path: str, fmt: ReportFormat | None) -> ReportFormat:
    if fmt is not None:
        return fmt
    ext = Path(path).suffix.lower()
    if ext not in EXTENSIONS:
        raise UsageError(f"--out {path}: say the format with --format html|md|json, or end the name in .html, .md "
                         "or .json")
    return EXTENSIONS[ext]


def file_name(week: str, fmt: ReportFormat) -> str:
    return f"{PREFIX}-{week}.{fmt.value}"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check(out: str | None, out_dir: Path | None, fmt: ReportFormat | None) -> None:
    """Raise the usage error `write` would raise, before any work is done."""
    if out is None and out_dir is None:
        raise UsageError("say where to write the report: --out FILE (.html, .md or .json) or --out-dir DIR")
    if out not in (None, "-"):
        format_of(out, fmt)


def write(report: Report, *, out: str | None = None, out_dir: Path | None = None,
          fmt: ReportFormat | None = None) -> list[Path]:
    """Write `out` (one file, `-` for stdout) and/or every format into `out_dir` named by ISO week (only
    `fmt` there when it is given). Returns the files written."""
    check(out, out_dir, fmt)
    written: list[Path] = []
    if out == "-":
        sys.stdout.write(render(report, fmt or ReportFormat.md))
    elif out is not None:
        path = Path(out)
        write_atomic(path, render(report, format_of(out, fmt)))
        written.append(path)
    if out_dir is not None:
        for f in ([fmt] if fmt else list(ReportFormat)):
            path = out_dir / file_name(report.week, f)
            write_atomic(path, render(report, f))
            written.append(path)
    return written


def triggered(report: Report, fail_on: list[FailOn] | None) -> list[str]:
    """The --fail-on conditions that hold for `report`."""
    kinds = set(report.found)
    held = []
    for cond in fail_on or []:
        if cond == FailOn.action:
            hit = "act" in report.severities
        else:
            hit = cond.value in kinds
        if hit:
            held.append(cond.value)
    return held
