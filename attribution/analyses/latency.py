"""Latency per group: exact percentiles of queue, TTFT, TPOT and end-to-end time, per group and per prompt-length
bucket; goodput for a joint SLO (`ttft=0.5 tpot=0.05`: requests per second and share meeting every term);
per-request scores from named presets (presets.toml, e.g. the contest score ERS)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from attribution.analyses.common import (
    PERCENTILE_METHOD,
    Analysis,
    Selection,
    base_params,
    empty_note,
    name_groups,
    percentile_list,
    spread_percentiles,
)
from attribution.config import env
from attribution.errors import UsageError

SLO_METRICS = ("queue", "ttft", "tpot", "e2e")
DEFAULT_BUCKETS = (256, 1024, 4096, 16384, 65536)
DEFAULT_SLO = "chat"
_TERM_RE = re.compile(r"^\s*([a-z0-9_]+)\s*(?:<=|=)\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1.0, "ms": 1e-3}


@dataclass(frozen=True)
class Slo:
    """A joint SLO: every (metric, limit in seconds) term must hold at once."""

    terms: tuple[tuple[str, float], ...]
    name: str | None = None

    def describe(self) -> str:
        return " and ".join(f"{m} <= {v:g} s" for m, v in self.terms)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "terms": dict(self.terms)}


@dataclass(frozen=True)
class ScoreTerm:
    metric: str
    best_s: float
    worst_s: float
    weight: float
    power: float


@dataclass(frozen=True)
class Score:
    name: str
    description: str
    scale: float
    terms: tuple[ScoreTerm, ...]


def presets_files() -> list[Path | Any]:
    """The packaged presets.toml, then $ATTRIBUTION_PRESETS (its entries win)."""
    files: list[Any] = [resources.files("attribution.analyses") / "presets.toml"]
    if extra := env("ATTRIBUTION_PRESETS"):
        files.append(Path(extra))
    return files


def load_presets() -> tuple[dict[str, Slo], dict[str, Score]]:
    slos: dict[str, Slo] = {}
    scores: dict[str, Score] = {}
    for f in presets_files():
        try:
            doc = tomllib.loads(f.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"{f}: not a readable presets file ({exc})") from exc
        for name, d in doc.get("slo", {}).items():
            terms = tuple((m, float(v)) for m, v in d.items() if m != "description")
            slos[name] = Slo(_checked(terms, f"{f} [slo.{name}]"), name)
        for name, d in doc.get("score", {}).items():
            scores[name] = _score(name, d, f"{f} [score.{name}]")
    return slos, scores


def _checked(terms: tuple[tuple[str, float], ...], where: str) -> tuple[tuple[str, float], ...]:
    for m, v in terms:
        if m not in SLO_METRICS:
            raise UsageError(f"{where}: unknown SLO term {m!r} (use {', '.join(SLO_METRICS)})")
        if not v > 0:
            raise UsageError(f"{where}: the limit of {m} must be a positive number of seconds")
    if not terms:
        raise UsageError(f"{where}: an SLO needs at least one term")
    return terms


def _score(name: str, d: dict[str, Any], where: str) -> Score:
    unit = _UNIT_S.get(d.get("unit", "s"))
    if unit is None:
        raise UsageError(f"{where}: unit must be s or ms")
    try:
        terms = tuple(
            ScoreTerm(t["metric"], float(t["best"]) * unit, float(t["worst"]) * unit, float(t.get("weight", 1.0)),
                      float(t.get("power", 1.0)))
            for t in d["terms"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: each term needs metric, best, worst (and optional weight, power): {exc}") from None
    for t in terms:
        if t.metric not in SLO_METRICS or t.best_s == t.worst_s:
            raise UsageError(f"{where}: term {t.metric!r} needs a metric in {SLO_METRICS} and best != worst")
    return Score(name, d.get("description", ""), float(d.get("scale", 1.0)), terms)


def parse_slo(terms: list[str] | None = None, preset: str | None = None) -> Slo:
    """`--slo ttft=0.5 --slo tpot=50ms` (seconds unless `ms`), else `--preset NAME`, else the `chat` preset."""
    slos, _ = load_presets()
    if terms:
        parsed = []
        for text in terms:
            m = _TERM_RE.match(text)
            if not m:
                raise UsageError(f"--slo {text!r}: write METRIC=SECONDS, e.g. ttft=0.5 or tpot=50ms")
            parsed.append((m.group(1).lower(), float(m.group(2)) * _UNIT_S[(m.group(3) or "s").lower()]))
        return Slo(_checked(tuple(parsed), "--slo"), preset)
    name = preset or DEFAULT_SLO
    if name not in slos:
        raise UsageError(f"no SLO preset {name!r} (known: {', '.join(sorted(slos))})")
    return slos[name]


def score_presets(names: list[str] | None = None) -> list[Score]:
    """The named score presets (default: all of them)."""
    _, scores = load_presets()
    names = list(scores) if names is None else names
    unknown = [n for n in names if n not in scores]
    if unknown:
        raise UsageError(f"no score preset {', '.join(unknown)} (known: {', '.join(sorted(scores))})")
    return [scores[n] for n in names]


DEFINITIONS = {
    "percentiles": PERCENTILE_METHOD,
    "requests": "completed requests (status not error, failed or aborted) arriving in the window whose source "
    "gave that phase",
    "queue_s": "arrival to admission (engine's queue time)",
    "ttft_s": "arrival to first token (first_token - arrival where the source has only timestamps)",
    "tpot_s": "time per output token after the first: (e2e_s - ttft_s) / (output_tokens - 1) where the source has "
    "no TPOT; none for one-token answers",
    "e2e_s": "arrival to the last token",
    "bucket": "prompt-length bucket: prompt_tokens in [bucket_lo, bucket_hi)",
    "goodput": "a request is good when it completed and met every SLO term at once; good_share_of_judged_requests = "
    "good / judged, judged = requests - unmeasured (unmeasured: completed, but the source lacks a term's phase, "
    "so it can be judged neither good nor bad; failed requests are judged, never good); goodput_per_s = good / span_s, span_s = "
    "first to last arrival of the whole selection; a one-token answer has no TPOT and meets a TPOT term",
    "score": "per-request score averaged over requests (failed = 0): scale * sum(weight * clip((worst - x) / "
    "(worst - best), 0, 1) ^ power); ERS: TTFT clipped to [10, 400] ms, TPOT to [1, 10] ms, so each term is in "
    "[0, 1] and the score in [0, 100]",
}


GOODPUT_COLUMNS = ("grp", "requests", "failed", "unmeasured", "judged", "good", "good_share_of_judged_requests",
                   "span_s", "requests_per_s", "goodput_per_s")
SLO_TERMS_COLUMNS = ("grp", "term", "limit_s", "measured", "met", "met_share")


def latency(sel: Selection, *, slo: Slo | None = None, scores: list[Score] | None = None,
            bucket_edges: tuple[int, ...] | list[int] = DEFAULT_BUCKETS,
            percentiles: Iterable[float] | None = None) -> Analysis:
    """Percentiles per group (`percentiles`) and per prompt-length bucket (`buckets`), goodput for `slo`
    (`goodput`, and `slo_terms`: the share meeting each term alone), and one row per group and score preset
    (`scores`). `percentiles` adds to p50, p90 and p99 (default: the `percentiles` setting's default)."""
    slo = slo or parse_slo()
    scores = score_presets() if scores is None else scores
    edges = sorted({int(e) for e in bucket_edges})
    if not edges or edges[0] <= 0:
        raise UsageError("prompt buckets need positive edges, e.g. 256,1024,4096")
    metrics, limits = [m for m, _ in slo.terms], [v for _, v in slo.terms]
    pcts = percentile_list(percentiles)
    qs = [q / 100 for q in pcts]
    # the percentiles per group and per group and prompt bucket in one pass over the selection, the goodput and
    # each SLO term's share in another (a query each, not four: on Spark each query costs its plan and job), each
    # split by level
    both = sel.run("latency_by_group_and_prompt_bucket", bucket_edges=edges, quantiles=qs)
    judged = sel.run("goodput_and_slo_terms_by_group", slo_metrics=metrics, slo_limits=limits)
    per_group = both.filter(pl.col("level") == "group").select("grp", "metric", "requests", "mean", "q", "max")
    per_bucket = both.filter(pl.col("level") == "bucket").drop("level")
    tables = {
        "percentiles": spread_percentiles(per_group, pcts),
        "buckets": spread_percentiles(per_bucket, pcts),
        "goodput": judged.filter(pl.col("level") == "group").select(*GOODPUT_COLUMNS),
        "slo_terms": judged.filter(pl.col("level") == "term").select(*SLO_TERMS_COLUMNS),
    }
    score_frames = []
    for s in scores:
        t = s.terms
        score_frames.append(sel.run(
            "score_by_group", score_metrics=[x.metric for x in t], score_best=[x.best_s for x in t],
            score_worst=[x.worst_s for x in t], score_weights=[x.weight for x in t],
            score_powers=[x.power for x in t], score_scale=s.scale,
        ).with_columns(score=pl.lit(s.name)).select("score", "grp", "requests", "scored", "mean", "p10", "p50", "p90",
                                                  "zero_share"))
    if score_frames:
        tables["scores"] = pl.concat(score_frames)
    by = sel.by.value
    notes = empty_note(sel, tables["percentiles"], "a known queue, TTFT, TPOT or end-to-end time (e.g. arrival-only "
                       "lines): no latency percentiles, and no request judged against the SLO")
    res = Analysis(
        name="latency",
        params={**base_params(sel), "slo": slo.to_dict(), "scores": [s.name for s in scores], "bucket_edges": edges,
                "percentiles": pcts},
        tables={k: name_groups(v, sel.by) for k, v in tables.items()},
        titles={
            "percentiles": f"latency by {by} (seconds)",
            "buckets": f"latency by {by} and prompt length (seconds)",
            "goodput": f"goodput for {slo.describe()}",
            "slo_terms": "share meeting each SLO term alone",
            "scores": "scores: " + "; ".join(f"{s.name} = {s.description}" for s in scores),
        },
        definitions=DEFINITIONS,
        notes=notes,
    )
    from attribution.histograms.analysis import add_to_latency  # imports this module's package: late

    return add_to_latency(res, sel, pcts)

