"""The report's remaining sections: what changed (this window against the previous one, and any before/after
inside it), feature-threshold crossings, the memory split of hybrid models, and ingest health."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution import charts
from attribution.columns import view
from attribution.compare.attribution_table import NAMES
from attribution.labels import version_label
from attribution.report.fmt import num, pct, seconds
from attribution.report.health import gap_text
from attribution.report.model import Section, present

if TYPE_CHECKING:
    from attribution.report.build import Inputs

VERDICTS = ("explains", "at most part", "inconclusive")  # attribution verdicts worth a line


def ratio_text(r: dict[str, Any]) -> str:
    """`TTFT p50 6.2 s -> 223 ms (x0.0359, 95% 0.0354-0.0364)`."""
    return (f"{NAMES.get(r['metric'], r['metric'])} {r['percentile']} {seconds(r['before'])} -> {seconds(r['after'])} "
            f"(x{r['ratio']:.3g}, 95% {r['ratio_lo']:.3g}-{r['ratio_hi']:.3g})")


def _unjudged(r: dict[str, Any]) -> str:
    if r.get("verdict") == "too few requests":
        return f"too few requests to judge: {r['n_before']:,} before, {r['n_after']:,} after, {r['min_requests']:,} needed"
    return "not material"


def changes_section(inp: Inputs) -> Section:
    a = present(inp.changes, "changes")
    s = Section("changes", "What changed", definitions=a.definitions)
    t = a.tables
    prev = a.params.get("previous")
    if prev is None:
        s.lines.append("The window has no start, so there is no previous window to compare with.")
    elif not a.params.get("previous_requests"):
        s.lines.append("The previous window holds no requests, so nothing is compared with it (a first report).")
    ver = t["versions"]
    for r in ver.filter(pl.col("change").is_in(["new version", "new deployment"])).iter_rows(named=True):
        was = f" (was {r['previous_version']})" if r["change"] == "new version" else ""
        s.lines.append(f"{r['deployment']}: {r['change']} {version_label(r['engine'], r['version'])}{was} from "
                       f"{r['started']:%a %d %b %H:%M} UTC.")
    if "week_regressions" in t:
        reg = t["week_regressions"].filter(pl.col("workload") == "all") if t["week_regressions"].height else None
        if reg is None or not reg.height:
            s.lines.append("Latency against the previous window: no material change overall.")
        for r in (reg.iter_rows(named=True) if reg is not None else []):
            s.lines.append(f"Against the previous window, {r['direction']}: {ratio_text(r)}.")
    if "traffic" in t:
        moved = t["traffic"].filter(pl.col("status").is_in(["new", "gone", "share change", "rate change"]))
        gcol = t["traffic"].columns[0]
        if not moved.height:
            s.lines.append("Traffic: no group appeared, vanished or changed share, and the arrival rate held.")
        for r in moved.iter_rows(named=True):
            s.lines.append(f"Traffic {r[gcol]}: {r['status']} ({r['requests_before']:,} -> {r['requests_now']:,} "
                           f"requests, share {pct(r['share_before'])} -> {pct(r['share_now'])}).")
    if "drift" in t:
        drifted = t["drift"].filter(pl.col("status") == "drift")
        gcol = t["drift"].columns[0]
        if not drifted.height:
            s.lines.append("Length distributions: no group drifted beyond the threshold.")
        for r in drifted.iter_rows(named=True):
            s.lines.append(f"{r[gcol]} {r['metric'].replace('_', ' ')}: drift (distance {r['distance']:.2f}, "
                           f"interval {r['distance_lo']:.2f}-{r['distance_hi']:.2f}; p50 {num(r['p50_before'])} -> "
                           f"{num(r['p50_now'])}).")
    cohorts = a.params.get("cohorts")
    if cohorts:
        s.lines.append(f"Inside this window, {cohorts['after']} vs {cohorts['before']} (by {cohorts['by']}):")
        for r in t["upgrade_summary"].filter(pl.col("percentile").is_in(["p50", "p99"])).iter_rows(named=True):
            s.lines.append(f"- {ratio_text(r)}" + ("" if r["changed"] else f" ({_unjudged(r)})") + ".")
        att = t["upgrade_attribution"]
        if att.height:
            for r in att.filter(pl.col("verdict").is_in(list(VERDICTS))).iter_rows(named=True):
                s.lines.append(f"- {r['feature']} ({NAMES.get(r['metric'], r['metric'])}): {r['verdict']}.")
    s.lines += [f"{n[0].upper()}{n[1:]}." for n in a.notes if n.startswith("not judged")]
    s.table("versions", a.titles["versions"], ver)
    s.table("drift", a.titles.get("drift", ""), view(t.get("drift"), [
        t["drift"].columns[0] if "drift" in t else "", "metric", "status", "distance", "distance_lo",
        "distance_hi", "requests_before",
        "requests_now", "p50_before", "p50_now", "p50_ratio", "p90_ratio", "mean_ratio"]))
    s.table("traffic", a.titles.get("traffic", ""), t.get("traffic"))
    summary_cols = ["metric", "percentile", "before", "after", "ratio", "ratio_lo", "ratio_hi", "raw_ratio",
                    "verdict", "p_adjusted", "n_before", "n_after", "min_requests"]
    s.table("week_summary", a.titles.get("week_summary", ""), view(t.get("week_summary"), summary_cols))
    s.table("week_regressions", a.titles.get("week_regressions", ""), t.get("week_regressions"))
    s.table("upgrade_cohorts", a.titles.get("upgrade_cohorts", ""), view(t.get("upgrade_cohorts"), [
        "cohort", "definition", "requests", "deployments", "engines", "first_arrival", "last_arrival"]))
    s.table("upgrade_summary", a.titles.get("upgrade_summary", ""), view(t.get("upgrade_summary"), summary_cols))
    per_workload = t.get("upgrade_regressions")
    if per_workload is not None and per_workload.height:  # the overall rows are the summary above
        s.table("upgrade_regressions", "material latency changes inside this window, per workload",
                per_workload.filter(pl.col("workload") != "all"))
    found = t.get("upgrade_attribution")
    if found is not None and found.height:
        s.table("upgrade_attribution", a.titles["upgrade_attribution"], found.filter(
            pl.col("verdict").is_in(list(VERDICTS))).select("feature", "metric", "threshold", "share_before",
                                                            "share_after", "crossing_ratio", "other_ratio",
                                                            "verdict", "explanation"))
    if "upgrade_summary" in t:
        s.chart("upgrade", partial(charts.changes.ratios, a, which="upgrade"))
    if "week_summary" in t:
        s.chart("week", partial(charts.changes.ratios, a, which="week"))
    if "drift" in t:
        s.chart("drift", partial(charts.changes.drift, a))
    s.notes += a.notes
    return s


def thresholds_section(inp: Inputs) -> Section:
    a = present(inp.thresholds, "thresholds")
    s = Section("thresholds", "Feature-threshold crossings", definitions=a.definitions)
    req = a.tables["requests"]
    crossed = req.filter(pl.col("crossed") > 0).sort("share_of_engine_requests", descending=True)
    for r in crossed.filter(pl.col("share_of_engine_requests") < 1).head(5).iter_rows(named=True):
        s.lines.append(f"{r['feature']} ({r['quantity']} {r['op']} {r['threshold']}): {r['crossed']:,} requests "
                       f"({pct(r['share_of_engine_requests'])} of the {r['requests']:,} its engines served, "
                       f"{pct(r['share_of_all_requests'])} of all), {pct(r['prefill_token_share_of_all_requests'])} "
                       "of all prefill tokens.")
    always = crossed.filter(pl.col("share_of_engine_requests") >= 1)["feature"].to_list()
    if always:
        s.lines.append(f"On every evaluated request: {', '.join(always)}.")
    never = req.filter(pl.col("crossed") == 0)["feature"].to_list()
    if never:
        s.lines.append(f"Never crossed: {', '.join(never)}.")
    s.table("requests", a.titles["requests"], view(req, [
        "feature", "quantity", "op", "threshold", "status", "requests", "crossed", "share_of_engine_requests",
        "all_requests", "share_of_all_requests", "prefill_token_share_of_all_requests", "max_value", "method"]))
    s.table("steps", a.titles["steps"], view(a.tables["steps"], [
        "feature", "deployment", "quantity", "op", "threshold", "rows", "crossed_rows", "time_share", "episodes",
        "longest_episode_s", "max_value", "method"]))
    s.table("not_counted", a.titles["not_counted"], a.tables["not_counted"])
    s.chart("crossings", partial(charts.thresholds.crossings, a))
    s.chart("by_day", partial(charts.thresholds.by_day, a))
    if a.tables["steps"].height:
        s.chart("steps", partial(charts.thresholds.steps, a))
    s.notes += a.notes
    return s


def memsplit_section(inp: Inputs) -> Section:
    a = inp.memsplit
    if a is None:
        return Section("memsplit", "Memory split (hybrid models)",
                       [f"No memory-split answer: {inp.skipped.get('memsplit', 'not run')}."])
    s = Section("memsplit", "Memory split (hybrid models)", definitions=a.definitions)
    summary = a.tables["summary"]
    for r in summary.iter_rows(named=True):
        # a start whose first line had no time (admitted: engine_config.ts may be null) has none to show
        started = f"{r['started']:%d %b %H:%M}" if r["started"] is not None else "time unknown"
        text = f"{r['deployment']} ({r['engine']}, from {started}): {r['status']}"
        if r["status"] in ("resize", "short"):
            text += f"; now {r['current']}, recommended {r['recommended']}"
        if r["limit"] and r["limit"] != "none":
            text += f"; queueing limited by {r['limit'].replace('_', ' ')}"
        if r.get("scrape_interval_s") is not None:  # demand from Prometheus gauges, not the engine's step lines
            text += (f"; demand sampled at the scrape interval ({r['scrape_interval_s']:g} s): its peak is a lower "
                     "bound of the true peak")
        s.lines.append(text + ".")
    s.table("summary", a.titles["summary"], summary)
    s.table("flags", a.titles["flags"], view(a.tables["flags"], ["deployment", "flag", "value", "meaning"]))
    s.table("whatif", a.titles["whatif"], view(a.tables["whatif"], [
        "deployment", "split", "source", "requests", "cap", "kv_pool_tokens", "state_slots", "queue_p50", "queue_p99",
        "waited_share", "ttft_p99", "capacity_per_day"]))
    s.chart("pools", partial(charts.memsplit.pools, a))
    if a.tables["whatif"].height:
        s.chart("whatif", partial(charts.memsplit.whatif, a))
    s.notes += a.notes
    return s


def health_section(inp: Inputs) -> Section:
    a = present(inp.health, "health")
    s = Section("health", "Ingest health", definitions=a.definitions)
    t = a.tables
    files = t["files"]
    if files.height:
        s.lines.append("Files: " + ", ".join(f"{r['files']:,} {r['status']}" for r in files.iter_rows(named=True))
                       + f" (store commit {a.params['commit']}).")
    n = a.params["error_count"]
    s.lines.append(f"{n:,} lines could not be parsed." if n else "Every line of a recognised format was parsed.")
    joins = t["joins"]
    for r in joins.iter_rows(named=True):
        if r["matched_share"] is not None:
            s.lines.append(f"{r['side']} rows of {r['source']}: {pct(r['matched_share'])} of {r['requests']:,} found "
                           "their other half.")
    gaps = t["gaps"]
    minutes = a.params["gap_minutes"]
    inside = gaps.filter(pl.col("edge") == "inside") if gaps.height else gaps
    s.lines.append(f"{inside.height} log gaps over {minutes:g} minutes inside a stream in this window."
                   if inside.height else f"No log gaps over {minutes:g} minutes inside a stream in this window.")
    for g in gaps.filter(pl.col("edge") != "inside").iter_rows(named=True) if gaps.height else []:
        s.lines.append(f"{gap_text(g)}.")
    for name in ("files", "errors", "joins", "gaps", "coverage", "responses"):
        s.table(name, a.titles[name], t[name])
    s.notes += a.notes
    return s
