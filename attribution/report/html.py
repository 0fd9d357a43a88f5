"""The report as one self-contained HTML file: the plotly.js bundle inlined once, each chart a Plotly div with
a fixed id (so the same report gives the same bytes), tables and notes as plain HTML, no request to the
network when it is opened. Text from the logs is escaped; the page works offline and prints."""

from __future__ import annotations

import re
from html import escape
from string import Template

from plotly.offline import get_plotlyjs

from attribution.report.fmt import cell, header
from attribution.report.model import SIGNIFICANT, Chart, Report, Section, Table
from attribution.report.page import PAGE

NOWRAP = 44  # text cells up to this many characters do not wrap
OPEN_ROWS = 12  # tables up to this many rows are shown open; longer ones start folded
LONG_FLOAT = re.compile(r"(?<![\w.\\])-?\d+\.\d{7,}(?:[eE][-+]?\d+)?(?![\w.])")  # in a chart's JSON
WIDE = {"over_time", "pools", "whatif", "percentiles", "cohorts", "prompt", "output", "crossings"}
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True,
                 "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def _template() -> Template:
    return Template(PAGE)


def _td(text: str, numeric: bool) -> str:
    # short text stays on one line; sentences (explanations, flag meanings) wrap
    cls = "num" if numeric else ("nw" if len(text) <= NOWRAP else "")
    return f'<td class="{cls}">{escape(text)}</td>'


def table(t: Table) -> str:
    df = t.frame
    numeric = {c for c in df.columns if df.schema[c].is_numeric()}
    head = "".join(f'<th class="{"num" if c in numeric else ""}">{escape(header(c))}</th>' for c in df.columns)
    body = "\n".join("<tr>" + "".join(_td(cell(v, c), c in numeric) for v, c in zip(row, df.columns, strict=True))
                     + "</tr>" for row in df.iter_rows())
    rows = f"{df.height} row{'s' if df.height != 1 else ''}"
    return (f'<details class="table" {"open" if df.height <= OPEN_ROWS else ""}><summary>{escape(t.title)} '
            f'<span class="muted">({rows})</span></summary><div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div></details>")


def _rounded(match: re.Match[str]) -> str:
    return f"{float(match.group(0)):.{SIGNIFICANT}g}"


def chart(c: Chart, wide: bool) -> str:
    div = c.figure.to_html(full_html=False, include_plotlyjs=False, div_id=c.id, config=PLOTLY_CONFIG)
    # floats to 6 significant digits, as in the JSON: the last bits of a parallel sum differ between runs
    div = LONG_FLOAT.sub(_rounded, div)
    return f'<figure class="chart{" wide" if wide else ""}">{div}</figure>'


def charts(cs: list[Chart]) -> str:
    """Two charts a row; a wide one (or one left without a partner) takes the whole row."""
    wide = [c.id.rsplit("-", 1)[-1] in WIDE for c in cs]
    run = 0
    for i in range(len(cs) + 1):
        if i == len(cs) or wide[i]:
            if run % 2:
                wide[i - 1] = True
            run = 0
        else:
            run += 1
    return '<div class="charts">' + "".join(chart(c, w) for c, w in zip(cs, wide, strict=True)) + "</div>"


def section(s: Section) -> str:
    parts = [f'<section id="{escape(s.id)}"><h2>{escape(s.title)}</h2>']
    if s.lines:
        items: list[str] = []
        sub: list[str] = []
        for line in s.lines:
            if line.startswith("- ") and items:
                sub.append(f"<li>{escape(line[2:])}</li>")
                continue
            if sub:
                items[-1] = items[-1][:-5] + f"<ul>{''.join(sub)}</ul></li>"
                sub = []
            items.append(f"<li>{escape(line)}</li>")
        if sub:
            items[-1] = items[-1][:-5] + f"<ul>{''.join(sub)}</ul></li>"
        parts.append(f'<ul class="lines">{"".join(items)}</ul>')
    if s.charts:
        parts.append(charts(s.charts))
    parts += [table(t) for t in s.tables]
    if s.notes:
        parts.append('<aside class="notes"><ul>' + "".join(f"<li>{escape(n)}</li>" for n in s.notes)
                     + "</ul></aside>")
    if s.definitions:
        defs = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in s.definitions.items())
        parts.append(f'<details class="defs"><summary>definitions</summary><dl>{defs}</dl></details>')
    return "\n".join(parts) + "</section>"


def render(report: Report) -> str:
    w = report.window
    since, end = cell(w["since"]) or "the start", cell(w["end"] or w["until"]) or "the end"
    prev = w.get("previous")
    compared = (f"compared with {cell(prev['since'])} to {cell(prev['until'])} ({prev['requests'] or 0:,} requests)"
                if prev else "no previous window")
    actions = "".join(
        f'<li class="{a.severity}"><span class="badge {a.severity}">{a.severity}</span> '
        f'<a href="#{escape(a.section)}">{escape(a.text)}</a></li>' for a in report.actions)
    settings = report.settings
    slo = " and ".join(f"{m} &le; {v:g} s" for m, v in (settings.get("slo", {}).get("terms") or {}).items())
    cost = settings.get("gpu_hour_cost")
    return _template().substitute(
        title=escape(report.title),
        plotlyjs=get_plotlyjs(),
        week=escape(report.week),
        window=escape(f"{since} to {end} UTC"),
        requests=f"{w['requests']:,}",
        compared=escape(compared),
        commit=escape(str(report.source.get("commit"))),
        store=escape(str(report.source.get("store"))),
        slo=slo or "none",
        cost=escape(f"${cost:g} per GPU-hour" if cost is not None else "no GPU-hour cost set"),
        nav="".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in report.sections),
        actions=f'<ul class="actions">{actions}</ul>' if actions else '<p class="muted">Nothing stands out.</p>',
        sections="\n".join(section(s) for s in report.sections),
    )
