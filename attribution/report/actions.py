"""The few lines at the top of a report: what to act on (a latency regression, a pod at its limit, an SLO
missed, a memory split that no longer fits), what to watch (drift, queueing, log problems) and what
changed (new versions, improvements). Picked by fixed rules from the analyses' tables, strongest first."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from attribution.db import as_time
from attribution.report.arrivals_section import burstiness_actions
from attribution.report.cache_section import cache_actions
from attribution.report.drift import ALARMS as DRIFT_ALARMS
from attribution.report.fmt import num, pct
from attribution.report.health import UNMATCHED_SHARE, gap_text
from attribution.report.model import SEVERITIES, Action, present
from attribution.report.review_sections import ratio_text

if TYPE_CHECKING:
    from attribution.report.build import Inputs

MAX_ACTIONS = 8
# The finding kinds (analyses.summary.findings), and how urgent each is in a weekly report; `change` is left
# to the what-changed lines, which have intervals.
FINDING_SEVERITY = {"ceiling": "act", "slo": "act", "queueing": "watch", "utilization": "watch",
                    "long_prompts": "info"}
FINDING_SECTION = {"ceiling": "concurrency", "slo": "latency", "queueing": "concurrency", "utilization": "capacity",
                   "long_prompts": "lengths"}


def pick_actions(inp: Inputs) -> list[Action]:
    """Every candidate line, `act` first, then `watch`, then `info`; the report shows the first MAX_ACTIONS."""
    found: list[Action] = []
    if not inp.requests:
        found.append(Action("act", "empty", "traffic", "No requests in this window: check that the logs are "
                            "still being collected and ingested."))
    found += _changes(inp)
    found += burstiness_actions(inp)
    if inp.findings is not None:
        for kind, text in inp.findings.iter_rows():
            if kind in FINDING_SEVERITY:
                found.append(Action(FINDING_SEVERITY[kind], kind, FINDING_SECTION[kind], text
                                    + "."))
    found += _memsplit(inp)
    found += cache_actions(inp)
    found += _health(inp)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    # stable: within one severity the order above (changes, findings, memory, health) stands
    return sorted(found, key=lambda a: rank[a.severity])


def _changes(inp: Inputs) -> list[Action]:
    a = inp.changes
    if a is None:
        return []
    out: list[Action] = []
    t = a.tables
    reg = t.get("week_regressions")
    if reg is not None and reg.height:
        for r in reg.filter(pl.col("direction") == "regression").head(3).iter_rows(named=True):
            who = "overall" if r["workload"] == "all" else f"for {r['workload']}"
            out.append(Action("act", "regression", "changes",
                              f"Latency regression against the previous window {who}: {ratio_text(r)}."))
    drift = t.get("drift")
    if drift is not None:
        gcol = drift.columns[0]
        for r in drift.filter(pl.col("status") == "drift").sort("distance", descending=True).head(2).iter_rows(
                named=True):
            out.append(Action("watch", "drift", "changes",
                              f"{r[gcol]}: {r['metric'].replace('_', ' ')} drifted (distance {r['distance']:.2f}; "
                              f"p50 {num(r['p50_before'])} -> {num(r['p50_now'])}, p90 {num(r['p90_before'])} -> "
                              f"{num(r['p90_now'])})."))
    out += _traffic(t.get("traffic"))
    cohorts = a.params.get("cohorts")
    if cohorts and "upgrade_summary" in t:
        up = t["upgrade_summary"].filter(pl.col("changed"))
        worse = up.filter(pl.col("ratio") > 1)
        better = up.filter(pl.col("ratio") < 1)
        pair = f"{cohorts['after']} vs {cohorts['before']}"
        for r in worse.head(2).iter_rows(named=True):
            out.append(Action("act", "regression", "changes", f"Slower after the change inside this window "
                              f"({pair}): {ratio_text(r)}."))
        if better.height:
            best = better.filter(pl.col("percentile").is_in(["p50", "p99"])).head(2)
            texts = [ratio_text(r) for r in best.iter_rows(named=True)]
            out.append(Action("info", "improvement", "changes", f"Faster after the change inside this window ({pair}): "
                              + "; ".join(texts) + "."))
    ver = t.get("versions")
    if ver is not None:
        moved = ver.filter(pl.col("change") == "new version")
        for (engine, version, previous), part in moved.group_by("engine", "version", "previous_version",
                                                                maintain_order=True):
            deps = ", ".join(sorted(set(part["deployment"])))
            out.append(Action("info", "version", "changes", f"{deps}: {engine} {previous} -> {version} from "
                              f"{as_time(part['started'].min()):%a %d %b %H:%M} UTC."))
        new = ver.filter(pl.col("change") == "new deployment")
        if new.height:
            out.append(Action("info", "deployment", "changes",
                              f"New deployments: {', '.join(sorted(set(new['deployment'])))}."))
    return out


def _traffic(traffic: pl.DataFrame | None) -> list[Action]:
    """Drift lines for groups that appeared, vanished or changed share, and for the arrival rate."""
    if traffic is None or not traffic.height:
        return []
    gcol = traffic.columns[0]
    out = []
    for r in traffic.filter(pl.col("status").is_in(list(DRIFT_ALARMS))).iter_rows(named=True):
        if r["status"] == "new":
            text = f"New {gcol} {r[gcol]}: {r['requests_now']:,} requests, {pct(r['share_now'])} of this window's."
        elif r["status"] == "gone":
            text = f"{gcol.capitalize()} {r[gcol]} is gone: it had {r['requests_before']:,} requests " \
                   f"({pct(r['share_before'])}) in the previous window."
        elif r["status"] == "share change":
            text = f"{r[gcol]}: share of requests {pct(r['share_before'])} -> {pct(r['share_now'])}."
        else:
            text = f"Arrival rate x{r['rate_ratio']:.2f} against the previous window " \
                   f"({num(r['per_hour_before'])} -> {num(r['per_hour_now'])} requests per hour)."
        out.append(Action("watch", "drift", "changes", text))
    return out


def _memsplit(inp: Inputs) -> list[Action]:
    """Engine starts still running at the end of the window whose memory split does not hold the demand."""
    a = inp.memsplit
    if a is None or not a.tables["current"].height:
        return []
    live = set(a.tables["current"].filter(pl.col("until").is_null())["start_id"].to_list())
    rec = a.tables["recommendation"]
    out = []
    summary = {(r["deployment"], r["started"]): r for r in a.tables["summary"].iter_rows(named=True)}
    cur = a.tables["current"].select("start_id", "deployment", "started")
    for r in rec.join(cur, on=["start_id", "deployment"]).filter(pl.col("start_id").is_in(list(live))
                                                                   & pl.col("status").is_in(["resize", "short"])
                                                                   ).iter_rows(named=True):
        s = summary.get((r["deployment"], r["started"]), {})
        out.append(Action("act", "memsplit", "memsplit",
                          f"{r['deployment']} ({s.get('engine', r['engine'])}): the memory split is {r['status']} "
                          f"for its traffic; recommended {s.get('recommended', '?')} (see the flags)."))
    return out


def _health(inp: Inputs) -> list[Action]:
    a = present(inp.health, "health")
    out = []
    ingest = a.params.get("ingest")
    if ingest and ingest.get("skipped"):
        out.append(Action("watch", "health", "health", ingest["text"]))
    n = a.params["error_count"]
    if n:
        top = a.tables["errors"].row(0, named=True) if a.tables["errors"].height else None
        out.append(Action("watch", "health", "health", f"{n:,} log lines could not be parsed"
                          + (f" (most: {top['reason']}, {top['count']:,} in {top['file']})" if top else "") + "."))
    joins = a.tables["joins"]
    if joins.height:
        bad = joins.filter(pl.col("matched_share").is_not_null() & (pl.col("matched_share") < 1 - UNMATCHED_SHARE))
        for r in bad.iter_rows(named=True):
            out.append(Action("watch", "health", "health",
                              f"Only {pct(r['matched_share'])} of {r['source']} {r['side']} rows matched the other "
                              f"side ({r['unmatched']:,} unmatched): a log may be missing or not ingested."))
    # a stream that starts late or stops early is usually a pod that came or went (see `what changed`); a
    # silence between two of its events is what a broken log shipper looks like
    gaps = a.tables["gaps"].filter(pl.col("edge") == "inside") if a.tables["gaps"].height else a.tables["gaps"]
    if gaps.height:
        out.append(Action("watch", "health", "health", f"{gaps.height} log gaps over {a.params['gap_minutes']:g} "
                          f"minutes; the longest: {gap_text(gaps.row(0, named=True))}."))
    return out

