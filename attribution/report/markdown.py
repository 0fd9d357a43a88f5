"""The report as Markdown, for chat messages and wikis: the action lines first, then every section's sentences,
tables (pipe tables, cells formatted as in the HTML) and notes. Charts are not drawn; the HTML has them."""

from __future__ import annotations

from attribution.report.fmt import cell, header
from attribution.report.model import Report, Table

MARK = {"act": "**act**", "watch": "watch", "info": "info"}


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(t: Table) -> list[str]:
    df = t.frame
    lines = [f"**{t.title}**", "", "| " + " | ".join(header(c) for c in df.columns) + " |",
             "|" + "|".join("---:" if df.schema[c].is_numeric() else "---" for c in df.columns) + "|"]
    for row in df.iter_rows():
        lines.append("| " + " | ".join(_escape(cell(v, c)) for v, c in zip(row, df.columns, strict=True)) + " |")
    return lines + [""]


def render(report: Report) -> str:
    w = report.window
    end = w["end"] or w["until"]
    out = [f"# {report.title}", "",
           f"Window: {cell(w['since']) or 'the start'} to {cell(end) or 'the end'} UTC, {w['requests']:,} requests "
           f"(store commit {report.source['commit']}).", ""]
    if report.actions:
        out += ["## At a glance", ""]
        out += [f"- {MARK[a.severity]}: {a.text}" for a in report.actions]
        out.append("")
    for s in report.sections:
        out += [f"## {s.title}", ""]
        if s.lines:
            out += [f"  {line}" if line.startswith("- ") else f"- {line}" for line in s.lines]
            out.append("")
        for t in s.tables:
            out += table(t)
        if s.notes:
            out += [f"> note: {n}" for n in s.notes]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
