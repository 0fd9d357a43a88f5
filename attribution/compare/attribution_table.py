"""The attribution table of a comparison: for each feature, the share of each cohort's requests that
crossed it and the change among requests that crossed it versus those that did not, with a plain verdict.

A feature gets one threshold for both cohorts (the one in effect after the change, else before), so the
same requests are "crossing" on both sides. Step-scoped features mark the requests that arrived while their
deployment's latest step line was over the threshold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from attribution import queries
from attribution.thresholds import steps
from attribution.thresholds.crossings import mark_requests, register

MIN_CROSSING = 20  # fewer crossing requests on a side than this: no estimate of their change

VERDICT_RULES = (
    "A change is material when its 95% interval excludes no change and it is larger than the tolerance "
    "(default 5%). The change to explain is the metric's largest material change over p50/p90/p99. Per "
    "feature, the attribution percentile (default p50) is compared within the requests that crossed it and "
    "within the others, fewer than 20 on a side being too few to estimate: no material change -> no change; "
    "never fired -> cannot explain; on every request -> consistent but not separable from anything else "
    "that touches every request; requests that never crossed it changed materially and those that crossed "
    "changed about as much (overlapping intervals, or within the tolerance of each other) or less, or were "
    "too few -> cannot explain; crossing requests "
    "changed materially and the others did not (their interval excludes the crossing change) -> explains; "
    "both changed, crossing ones clearly more (disjoint intervals, beyond the tolerance) -> at most part; "
    "otherwise inconclusive."
)


@dataclass
class Group:
    """One feature's compare setting and the requests that crossed it."""

    feature: str
    title: str
    scope: str
    quantity: str
    op: str
    threshold: float | None
    status_before: str
    status_after: str
    crossed: np.ndarray  # bool per compare row


def _status(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return "absent"
    counts = Counter(rows["status"].to_list())
    return ", ".join(s for s, _ in counts.most_common())


def _mode(values: list[float]) -> float | None:
    return Counter(values).most_common(1)[0][0] if values else None


def compare_settings(settings: pl.DataFrame, before_cfg: set[str], after_cfg: set[str]
                     ) -> tuple[pl.DataFrame, dict[str, dict[str, Any]]]:
    """Settings with one threshold per feature for every config in either cohort, and per feature what
    each cohort had (status, thresholds)."""
    used = before_cfg | after_cfg
    s = settings.filter(pl.col("config_id").is_in(list(used)))
    info: dict[str, dict[str, Any]] = {}
    keep = []
    for part in s.partition_by("feature", maintain_order=True):
        fid = part["feature"][0]
        b = part.filter(pl.col("config_id").is_in(list(before_cfg)))
        a = part.filter(pl.col("config_id").is_in(list(after_cfg)))
        thr_a = _mode(a.filter("evaluate")["threshold"].to_list())
        thr_b = _mode(b.filter("evaluate")["threshold"].to_list())
        thr = thr_a if thr_a is not None else thr_b
        if thr is None:
            continue
        info[fid] = {"title": part["title"][0], "scope": part["scope"][0], "quantity": part["quantity"][0],
                     "op": part["op"][0], "threshold": thr, "status_before": _status(b),
                     "status_after": _status(a), "threshold_before": thr_b, "threshold_after": thr_a}
        keep.append(part.with_columns(pl.lit(thr).alias("threshold"), pl.lit(True).alias("evaluate")))
    out = pl.concat(keep) if keep else settings.clear()
    # A deployment-scoped feature crosses per configuration, as each start had it.
    out = out.with_columns(pl.when(pl.col("scope") == "deployment").then(pl.col("deployment_crossed"))
                           .otherwise(None).alias("deployment_crossed"))
    return out, info


def crossing_groups(con: Any, starts: pl.DataFrame, settings: pl.DataFrame, rows: pl.DataFrame,
                    max_gap_s: float) -> list[Group]:
    """Evaluate every feature that has a threshold in either cohort on the compare rows."""
    before_cfg = set(rows.filter(pl.col("cohort") == "before")["config_id"].to_list())
    after_cfg = set(rows.filter(pl.col("cohort") == "after")["config_id"].to_list())
    cmp, info = compare_settings(settings, before_cfg, after_cfg)
    register(con, starts, cmp)
    mark_requests(con, requests=False)
    # which requests arrived while their deployment was over a step feature's threshold (steps.ARRIVAL_TIE_RULE)
    arrivals = steps.arrival_flags(con, steps.step_rows(con), float(max_gap_s))
    con.register("thr_arrival_flags", arrivals.to_arrow())
    flags = queries.run(con, "compare_crossed_requests")
    rid = rows["rid"].to_numpy()
    groups = []
    by_feature = {f: df["rid"].to_numpy() for f, df in
                  ((p["feature"][0], p) for p in flags.partition_by("feature"))} if flags.height else {}
    for fid, d in info.items():
        crossed = np.isin(rid, by_feature.get(fid, np.empty(0, np.int64)))
        groups.append(Group(fid, d["title"], d["scope"], d["quantity"], d["op"], d["threshold"],
                            d["status_before"], d["status_after"], crossed))
    return groups


def _fmt_ratio(r: float, lo: float, hi: float) -> str:
    return f"x{r:.3g} [{lo:.3g}, {hi:.3g}]"


def _pct(x: float) -> str:
    if x == 0 or x >= 0.01:
        return f"{x:.1%}" if x else "0%"
    return f"{x * 100:.2g}%"


def material(r: float, lo: float, hi: float, tolerance: float) -> bool:
    """The change's interval excludes 1 and the ratio is beyond the tolerance."""
    if not all(np.isfinite([r, lo, hi])):
        return False
    return (hi < 1 or lo > 1) and abs(np.log(r)) >= np.log1p(tolerance)


NAMES = {"queue_s": "queue time", "ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "end-to-end latency"}


def verdict(*, metric: str, overall: tuple[float, float, float], at: str = "", share_before: float,
            share_after: float,
            crossing: tuple[float, float, float], other: tuple[float, float, float], n_cross: tuple[int, int],
            n_other: tuple[int, int], tolerance: float, min_crossing: int = MIN_CROSSING) -> tuple[str, str]:
    """(short verdict, sentence) for one feature and metric; see VERDICT_RULES."""
    name = NAMES.get(metric, metric)
    change = f"{name} {at} change".replace("  ", " ")
    fired = f"fired on {_pct(share_before)} of requests before and {_pct(share_after)} after"
    if not material(*overall, tolerance):
        return "no change", f"{fired}; {name} did not change materially ({at} {_fmt_ratio(*overall)})"
    if sum(n_cross) == 0:
        return "cannot explain", f"never fired in either cohort; it cannot explain the {change}"
    if min(n_other) == 0:
        return ("not separable", f"on the path of every request ({fired}); consistent with the {change} "
                f"({_fmt_ratio(*overall)}) but not separable from anything else that touches every request")
    few_cross, few_other = min(n_cross) < min_crossing, min(n_other) < min_crossing
    cross_moved = not few_cross and material(*crossing, tolerance)
    other_moved = not few_other and material(*other, tolerance)
    as_much = _same(crossing, other, tolerance) or (
        np.sign(np.log(crossing[0])) == np.sign(np.log(other[0])) and abs(np.log(other[0])) >= abs(np.log(crossing[0])))
    if other_moved and (few_cross or as_much):
        word = "improved" if other[0] < 1 else "got worse"
        tail = f"requests that never crossed it {word} as much or more ({_fmt_ratio(*other)}; crossing " \
               f"{_fmt_ratio(*crossing)})" if not few_cross else \
               f"requests that never crossed it {word} just as much ({_fmt_ratio(*other)})"
        if min(n_cross) == 0:
            tail += f"; it fired only {'before' if n_cross[0] else 'after'}, so its own requests cannot be compared"
        elif few_cross:
            tail += f"; too few crossed it ({n_cross[0]} before, {n_cross[1]} after) to estimate their own change"
        return "cannot explain", f"{fired}; {tail}; it cannot explain the {change}"
    if cross_moved and not other_moved and not few_other and not (other[1] <= crossing[0] <= other[2]):
        return ("explains", f"{fired}; only requests that crossed it changed ({_fmt_ratio(*crossing)}; others "
                f"{_fmt_ratio(*other)}); it can explain the {change}")
    if cross_moved and other_moved and not _same(crossing, other, tolerance) \
            and abs(np.log(crossing[0])) > abs(np.log(other[0])) \
            and np.sign(np.log(crossing[0])) == np.sign(np.log(other[0])):
        return ("at most part", f"{fired}; requests that never crossed it changed too ({_fmt_ratio(*other)}), "
                f"so something else changed; those that crossed it changed more ({_fmt_ratio(*crossing)}): it "
                "can explain at most that extra change")
    if not few_cross and not few_other and not cross_moved and not other_moved:
        return ("inconclusive", f"{fired}; the {change} is not in the typical request: neither the requests that "
                f"crossed it ({_fmt_ratio(*crossing)}) nor the others ({_fmt_ratio(*other)}) changed materially")
    if few_other:
        return ("not separable", f"{fired}; too few requests did not cross it ({n_other[0]} before, "
                f"{n_other[1]} after) to separate it from anything else that changed")
    if few_cross:
        return ("inconclusive", f"{fired}; too few crossing requests ({n_cross[0]} before, {n_cross[1]} after) "
                f"to tell, and the others did not change materially ({_fmt_ratio(*other)})")
    return ("inconclusive", f"{fired}; crossing {_fmt_ratio(*crossing)}, others {_fmt_ratio(*other)}: the "
            "data cannot tell whether it explains the change")


def _overlap(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    if not all(np.isfinite([a[1], a[2]])):
        return True
    return a[1] <= b[2] and b[1] <= a[2]


def _same(a: tuple[float, float, float], b: tuple[float, float, float], tolerance: float) -> bool:
    """Two changes are the same when their intervals overlap or they differ by less than the tolerance."""
    close = all(np.isfinite([a[0], b[0]])) and a[0] > 0 and b[0] > 0 and abs(np.log(a[0] / b[0])) < np.log1p(tolerance)
    return close or _overlap(a, b)


def sharpest(att: pl.DataFrame) -> list[str]:
    """Where several features could explain one metric's change (their crossing sets overlap), name the one
    whose crossing and other requests differ most: the likelier of them."""
    if att.is_empty():
        return []
    out = []
    for (m,), part in att.filter(pl.col("verdict") == "explains").group_by("metric", maintain_order=True):
        if part.height < 2:
            continue
        part = part.with_columns((pl.col("crossing_ratio") / pl.col("other_ratio")).log().abs().alias("_c"))
        best = part.sort("_c", descending=True).row(0, named=True)
        out.append(f"{part.height} features could explain the {m} change ({', '.join(part['feature'])}): their "
                   f"crossing requests overlap; the sharpest contrast is {best['feature']} (crossing "
                   f"x{best['crossing_ratio']:.3g}, others x{best['other_ratio']:.3g})")
    return out
