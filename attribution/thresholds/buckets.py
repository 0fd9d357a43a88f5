"""Request-scoped threshold crossings from the engines' token histograms (`vllm:request_prompt_tokens`,
`vllm:request_generation_tokens`, SGLang's equivalents) for a window without per-request rows: exact where
the threshold is a bucket edge, else a bound (at least / at most) naming the enclosing edges; labelled
bucket-derived, per deployment, model and window, in a table of its own beside the (empty) exact ones."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import polars as pl

from attribution.analyses.common import Selection
from attribution.histograms.analysis import has_histograms, increases
from attribution.histograms.catalogue import LENGTHS
from attribution.histograms.kernels import CountBound, count_above
from attribution.histograms.tables import Hist, histograms

LABEL = "bucket-derived"
# request quantities a token histogram observes once per request: the prompt is the KV length at prefill
QUANTITY_KIND = {"prompt_tokens": "prompt", "kv_len_at_prefill": "prompt", "output_tokens": "output"}
DEFINITIONS = {
    "histogram_requests": f"{LABEL}: requests over a request-scoped threshold counted from the engine's token "
    "histogram over the window (its increase, counter resets handled as PromQL increase() does), used only "
    "when the window has no per-request rows. Exact (crossed_at_least = crossed_at_most) when the threshold "
    "is a bucket edge; otherwise the true count lies between them and edge_below / edge_above are the bucket "
    "edges around the threshold. Token counts are whole numbers: `>= T` is read as `> ceil(T) - 1`",
}
SCHEMA = {
    "feature": pl.Utf8, "title": pl.Utf8, "deployment": pl.Utf8, "model": pl.Utf8, "engine": pl.Utf8,
    "metric": pl.Utf8, "quantity": pl.Utf8, "op": pl.Utf8, "threshold": pl.Float64, "requests": pl.Float64,
    "crossed_at_least": pl.Float64, "crossed_at_most": pl.Float64, "share_at_least": pl.Float64,
    "share_at_most": pl.Float64, "exact": pl.Boolean, "edge_below": pl.Float64, "edge_above": pl.Float64,
    "answer": pl.Utf8, "threshold_source": pl.Utf8, "label": pl.Utf8,
}  # fmt: skip


def crossed(op: str, threshold: float, h: Hist) -> CountBound | None:
    """Requests whose count `op threshold` from one token histogram, as a CountBound (at_least..at_most).
    `count_above` gives `> T`; the other operators are that count or its complement on whole tokens."""
    above_t = {">": threshold, ">=": math.ceil(threshold) - 1, "<": math.ceil(threshold) - 1,
               "<=": math.floor(threshold)}[op]
    b = count_above(above_t, h.les, h.counts)
    if b is None or op in (">", ">="):
        return b
    return CountBound(threshold, b.total, b.total - b.at_most, b.total - b.at_least, b.edge_below, b.edge_above)


def _answer(b: CountBound, op: str, t: float) -> str:
    if b.exact and b.edge_below == b.edge_above:
        return f"exactly {b.at_least:,.0f} ({op} {t:g}: {b.edge_above:g} is a bucket edge)"
    if b.exact:
        return (f"exactly {b.at_least:,.0f} ({t:g} is not a bucket edge, but no request lies between the edges "
                f"{b.edge_below:g} and {b.edge_above:g} around it)")
    return (f"at least {b.at_least:,.0f}, at most {b.at_most:,.0f}: {t:g} is not a bucket edge, the nearest are "
            f"{b.edge_below:g} and {b.edge_above:g}")


def _config(starts: pl.DataFrame, deployment: str | None, engine: str | None, until: datetime | None) -> str:
    """The engine start whose settings hold for the window: the deployment's last start before its end (else
    its first), or the engine's defaults when the store has no start of it."""
    mine = starts.filter(pl.col("deployment") == deployment)
    if engine is not None:
        mine = mine.filter(pl.col("engine") == engine)
    if mine.height:
        before = mine.filter(pl.col("ts") < until) if until is not None else mine
        pick = before.sort("ts").tail(1) if before.height else mine.sort("ts").head(1)
        return str(pick["config_id"][0])
    return f"default:{engine if engine in ('vllm', 'sglang') else 'unknown'}"


def bucket_crossings(sel: Selection, settings: pl.DataFrame, starts: pl.DataFrame
                     ) -> tuple[pl.DataFrame, list[str]]:
    """Per token histogram of the window and request-scoped feature whose quantity it observes: requests over
    the threshold effective for that deployment (exact or a bound), and the features it cannot count."""
    if not has_histograms(sel.con):
        return pl.DataFrame(schema=SCHEMA), []
    hists = histograms(increases(sel.con, sel.window), LENGTHS)
    rows: list[dict[str, Any]] = []
    uncountable: set[str] = set()
    for h in hists:
        cfg = _config(starts, h.deployment, h.engine, sel.window.until)
        feats = settings.filter((pl.col("config_id") == cfg) & (pl.col("scope") == "request") & pl.col("evaluate"))
        for f in feats.iter_rows(named=True):
            if QUANTITY_KIND.get(f["quantity"]) != h.kind:
                if f["quantity"] not in QUANTITY_KIND:
                    uncountable.add(f"{f['feature']} ({f['quantity']})")
                continue
            b = crossed(f["op"], f["threshold"], h)
            if b is None:
                continue
            rows.append({
                "feature": f["feature"], "title": f["title"], **h.key(), "metric": h.metric,
                "quantity": f["quantity"], "op": f["op"], "threshold": f["threshold"], "requests": b.total,
                "crossed_at_least": b.at_least, "crossed_at_most": b.at_most, "share_at_least": b.at_least / b.total,
                "share_at_most": b.at_most / b.total, "exact": b.exact, "edge_below": b.edge_below,
                "edge_above": b.edge_above, "answer": _answer(b, f["op"], f["threshold"]),
                "threshold_source": f["threshold_source"], "label": LABEL,
            })  # fmt: skip
    notes = []
    if hists:
        notes.append("no per-request rows in this window: request-scoped features are counted from the engines' "
                     f"token histograms (histogram_requests, {LABEL}: exact where the threshold is a bucket edge, "
                     "else at least / at most with the nearest edges named), per deployment and model")
    if uncountable:
        notes.append("not countable from token histograms (they see prompt and output lengths only, never a "
                     "request's cached tokens or prompt + output together): " + ", ".join(sorted(uncountable)))
    frame = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    return frame.sort("feature", "deployment", "model", "metric", nulls_last=True), notes
