"""Can the numbers be trusted: what the ingest read and failed to read (from `store_health`), how many
requests found their other half across engine and gateway logs, where a pod's logs fell silent inside the
window (`log_gaps`, the question in queries/log_gaps.sql), and what the engines' API servers answered
(`engine_responses`: uvicorn access lines, the only per-request record under vLLM's default logging, and the
only one of requests refused before the engine). One library function, `health`, returning an Analysis.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from attribution import queries
from attribution.analyses import Analysis, Window
from attribution.analyses.common import REQUEST_LINES, UNLOGGED_SHARE, post_calls
from attribution.status import store_health
from attribution.store import Store

UNMATCHED_SHARE = 0.01  # more unmatched engine or gateway rows than this share: worth a look
DEFINITIONS = {
    "errors": "lines of a recognised format that could not be parsed, per file and reason (the whole store)",
    "joins": "engine and gateway rows of the same request meet on its normalised id; unmatched rows are "
    "requests one side logged and the other did not (or a log that was not ingested)",
    "gaps": "silences longer than the gap setting in one stream (a deployment's request rows or step lines of "
    "one source) inside the window: inside = between two events; start / end = the stream began after, or "
    "stopped before, the first / last event of every stream in the window. A quiet hour without traffic "
    "is a gap too: compare with the gateway's rows for the same pod",
    "responses": "the engines' API servers' HTTP access lines (uvicorn) in the window, counted per deployment, "
    "method, path and status; a line's time is that of the nearest earlier timestamped line of its file. "
    "Error statuses (4xx, 5xx) here are requests refused or failed at the server, often before the engine saw "
    "them: they are in no request table",
}
RESPONSE_ROWS = 10  # (method, path, status) rows shown per deployment; the note says how many there are in all


def log_gaps(con: duckdb.DuckDBPyConnection, window: Window, min_gap_s: float) -> pl.DataFrame:
    """Silences longer than `min_gap_s` per (deployment, source, kind) inside the window (see queries/log_gaps.sql)."""
    return queries.run(con, "log_gaps", since=window.since, until=window.until, min_gap_s=float(min_gap_s))


def engine_responses(con: duckdb.DuckDBPyConnection, window: Window) -> pl.DataFrame:
    """HTTP responses of the engines' API servers per (deployment, method, path, status) in the window, most
    frequent first within a deployment (see queries/engine_responses.sql)."""
    df = queries.run(con, "engine_responses", since=window.since, until=window.until)
    return df.sort(["deployment", "responses", "http_status", "method", "path"],
                   descending=[False, True, False, False, False]) if df.height else df


def response_notes(responses: pl.DataFrame, logged: pl.DataFrame) -> list[str]:
    """Per deployment, the POST responses (the API's inference calls) with an error status, and the calls
    whose request lines the engine did not log (`logged`: engine request rows per deployment), in words."""
    if responses.is_empty():
        return []
    posts = responses.filter(pl.col("method") == "POST")
    rows_of = dict(logged.select("deployment", "requests").iter_rows()) if logged.height else {}
    notes, unlogged = [], []
    for (deployment,), rows in posts.group_by(["deployment"], maintain_order=True):
        ok = post_calls(rows.filter(pl.col("http_status") < 400))
        have = rows_of.get(deployment, 0)
        if ok and have < UNLOGGED_SHARE * ok:
            unlogged.append(f"{deployment} ({ok:,} calls, {have:,} request rows)")
        bad = rows.filter(pl.col("http_status") >= 400)
        if bad.is_empty():
            continue
        counts = bad.group_by("http_status").agg(pl.col("responses").sum()).sort(["responses", "http_status"],
                                                                                   descending=[True, False])
        each = ", ".join(f"{r['responses']:,} x {r['http_status']}" for r in counts.iter_rows(named=True))
        notes.append(f"{deployment}: {post_calls(bad):,} of {post_calls(rows):,} POST "
                     f"responses of its API server had an error status ({each}); a request refused before the "
                     "engine is in no request table")
    if unlogged:
        notes.insert(0, "API servers answered POST calls that their engines did not log as requests: "
                     + ", ".join(unlogged) + ". The lengths and engine timings of those calls are unknown unless "
                     "a gateway logged them: " + REQUEST_LINES)
    return notes


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def health(store: Store, con: duckdb.DuckDBPyConnection, window: Window, *, gap_minutes: float = 120.0,
           ingest: dict[str, Any] | None = None) -> Analysis:
    """Files by status, parse errors, join coverage per source, engine versions and log gaps in the window.
    `ingest` describes an ingest run just before (files read, or why it was skipped)."""
    st = store_health(store, queries.spark_connection(con))  # on the report's engine
    files = _frame(st["files"])
    if files.height and "bytes" in files.columns:
        files = files.with_columns(pl.col("bytes").cast(pl.Int64))
    joins = _frame(st["joins"])
    gaps = log_gaps(con, window, gap_minutes * 60)
    responses = engine_responses(con, window)
    logged = queries.run(con, "engine_request_rows_by_deployment", since=window.since, until=window.until)
    tables = {
        "files": files,
        "errors": _frame(st["errors"]),
        "joins": joins,
        "gaps": gaps,
        "coverage": _frame(st["deployments"]),
        "responses": responses.filter(pl.int_range(pl.len()).over("deployment") < RESPONSE_ROWS),
    }
    notes = response_notes(responses, logged)
    if responses.height > tables["responses"].height:
        notes.append(f"{responses.height:,} (deployment, method, path, status) rows of access lines in the window; "
                     f"the {RESPONSE_ROWS} most frequent of each deployment are shown")
    if st["error_count"] > len(st["errors"]):
        notes.append(f"{st['error_count']:,} problems in all; the 20 most frequent (file, reason) pairs are shown")
    if ingest:
        notes.append(ingest["text"])
    unmatched = joins.filter(pl.col("unmatched") > 0) if joins.height else joins
    return Analysis(
        "health",
        {**window.to_dict(), "gap_minutes": gap_minutes, "commit": st["commit"], "error_count": st["error_count"],
         "unmatched": int(unmatched["unmatched"].sum()) if unmatched.height else 0,
         "ingest": ingest},
        tables,
        {"files": "input files by status", "errors": "ingest problems (most frequent first)",
         "joins": "engine <-> gateway matches per source", "gaps": f"log gaps over {gap_minutes:g} minutes",
         "coverage": "rows and time span per deployment and table (whole store)",
         "responses": "HTTP responses of the engines' API servers (access lines)"},
        DEFINITIONS,
        notes,
    )


def gap_text(g: dict[str, Any]) -> str:
    """One gap of `log_gaps` in words."""
    who = f"{g['deployment']} ({g['source']} {g['kind']})"
    hours = f"{g['gap_s'] / 3600:.1f} h"
    if g["edge"] == "start":
        return f"{who} first logged at {g['gap_end']:%a %d %b %H:%M} UTC, {hours} after the window's first event"
    if g["edge"] == "end":
        return f"{who} last logged at {g['gap_start']:%a %d %b %H:%M} UTC, {hours} before the window's last event"
    return f"{who} silent for {hours} from {g['gap_start']:%a %d %b %H:%M} UTC"
