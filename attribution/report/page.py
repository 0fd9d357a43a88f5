"""The page around the report: one HTML file with its style inline (string.Template; `$name` fields are
filled by html.py). Kept as Python, not a data file, so that every install carries it."""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
:root { --ink: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; --act: #c4320a; --watch: #b54708;
        --info: #175cd3; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 20px 32px 12px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
.meta { color: var(--muted); margin: 0; }
.meta b { color: var(--ink); font-weight: 600; }
nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav a { color: var(--info); text-decoration: none; font-size: 13px; }
main { max-width: 1400px; margin: 0 auto; padding: 16px 32px 40px; }
.glance { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 20px; margin-bottom: 18px; }
.glance h2 { margin: 0 0 8px; font-size: 17px; }
ul.actions { list-style: none; margin: 0; padding: 0; }
ul.actions li { padding: 5px 0; border-top: 1px solid var(--line); }
ul.actions li:first-child { border-top: 0; }
ul.actions a { color: var(--ink); text-decoration: none; }
ul.actions a:hover { text-decoration: underline; }
.badge { display: inline-block; min-width: 48px; text-align: center; border-radius: 10px; padding: 0 8px;
         margin-right: 6px; font-size: 11px; font-weight: 700; text-transform: uppercase; color: #fff; }
.badge.act { background: var(--act); } .badge.watch { background: var(--watch); } .badge.info { background: var(--info); }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 20px 16px;
          margin-bottom: 18px; }
section h2 { margin: 0 0 8px; font-size: 18px; }
ul.lines { margin: 0 0 10px; padding-left: 20px; }
ul.lines li { margin: 2px 0; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px; margin: 8px 0 12px; }
figure.chart { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px; min-width: 0; }
figure.chart.wide { grid-column: 1 / -1; }
details.table { margin: 8px 0; }
details summary { cursor: pointer; font-weight: 600; }
details.defs summary { font-weight: 400; color: var(--muted); }
.muted { color: var(--muted); font-weight: 400; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin-top: 6px; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top;
         max-width: 520px; }
th { background: var(--bg); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.nw { white-space: nowrap; }
aside.notes { background: #fffaeb; border-left: 3px solid var(--watch); padding: 6px 12px; margin: 10px 0;
              font-size: 13px; }
aside.notes ul { margin: 0; padding-left: 18px; }
dl { margin: 6px 0; font-size: 12.5px; } dt { font-weight: 600; margin-top: 4px; } dd { margin: 0 0 0 16px; color: #344054; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 0 0 24px; }
@media (max-width: 900px) { .charts { grid-template-columns: 1fr; } main, header { padding-left: 12px; padding-right: 12px; } }
@media print { details { display: block; } details > summary { list-style: none; } nav { display: none; }
               section, .glance { break-inside: avoid-page; } }
</style>
<script>$plotlyjs</script>
</head>
<body>
<header>
<h1>$title</h1>
<p class="meta"><b>$window</b> &middot; $requests requests &middot; $compared</p>
<p class="meta">SLO: $slo &middot; cost: $cost &middot; store commit $commit</p>
<nav>$nav</nav>
</header>
<main>
<div class="glance"><h2>At a glance</h2>$actions</div>
$sections
</main>
<footer>Made by attribution from $store (commit $commit). Every figure comes from the logs in that store; see
each section's definitions.</footer>
</body>
</html>
"""
