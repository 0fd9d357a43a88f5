"""The `analyze` summary: every analysis on one selection, cut down to one screen (lengths per group,
concurrency and capacity per pod, latency per cohort, goodput), plus the two or three findings worth a look,
picked by simple rules from those same numbers."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from attribution.analyses.capacity import capacity
from attribution.analyses.common import Analysis, Selection, base_params, percentile_columns, select
from attribution.analyses.concurrency import concurrency
from attribution.analyses.exact import shared_sweeps
from attribution.analyses.latency import Slo, latency, parse_slo
from attribution.analyses.lengths import lengths
from attribution.choices import GroupBy
from attribution.db import as_float

CEILING_SHARE = 0.05  # default of the ceiling_share setting
FINDINGS = 5  # at most this many findings, one per kind: the same for `analyze`, the dashboard and the report

DEFINITIONS = {
    "lengths": "tokens per request, request-weighted; top1_share = share of the group's prompt tokens in its "
    "longest 1% of prompts",
    "concurrency": "per pod: time-weighted percentiles of running requests (in_system where the split is "
    "unknown), see `attribution concurrency`",
    "latency": "seconds, exact percentiles (linear interpolation); per cohort = label, else engine version, when "
    "the window holds more than one, else per group",
    "goodput": "good_share_of_judged_requests: share of the judged requests (failed ones and completed ones whose "
    "every SLO term is known) meeting every SLO term; goodput_per_s: good requests per second; ERS = mean "
    "contest score",
    "capacity": "completed requests per pod per day, and the capacity at its running limit (see `attribution "
    "capacity`)",
    "findings": "rules over the numbers above, strongest first: a pod at its running limit for a material "
    "share of its busy time (ceiling_share) or queueing, latency change between cohorts, low SLO attainment, "
    "long prompts dominating the prefill tokens, pods far below or near their capacity",
}


def cohort_of(sel: Selection) -> GroupBy | None:
    """Label, else engine version, when the window holds more than one of them (a before/after)."""
    n = sel.run("analysis_cohort_counts")
    if n["labels"].item() > 1:
        return GroupBy.label
    if n["versions"].item() > 1:
        return GroupBy.version
    return None


def analyze(con, *, since: Any = None, until: Any = None, by: GroupBy | str = GroupBy.workload,
            slo: Slo | None = None, gpu_hour_cost: float | None = None,
            ceiling_share: float = CEILING_SHARE, percentiles: Any = None,
            gpus_per_pod: int | None = None) -> Analysis:
    """Run lengths, concurrency, latency, goodput and capacity on one window and return the one-screen
    summary tables and `findings`."""
    sel = select(con, since=since, until=until, by=by)
    slo = slo or parse_slo()
    len_r = lengths(sel, percentiles=percentiles)
    with shared_sweeps(sel):  # capacity's estimates read the concurrency analysis' sweep of the window
        conc = concurrency(sel, per_group=False, percentiles=percentiles)  # the summary shows pods only
        cap = capacity(sel, gpu_hour_cost=gpu_hour_cost, gpus_per_pod=gpus_per_pod, per_group=False, conc=conc)
    lat = latency(sel, slo=slo, percentiles=percentiles)
    cohort, by_cohort = cohort_latency(sel, slo, percentiles)
    lat_cohort = by_cohort or lat
    gcol = "group" if sel.by == GroupBy.all else sel.by.value
    ccol = "group" if (cohort or sel.by) == GroupBy.all else (cohort or sel.by).value
    tables = {
        "lengths": lengths_table(len_r.tables["stats"], gcol),
        "concurrency": concurrency_table(conc.tables["pods"], conc.tables["deployments"], cap),
        "latency": lat_cohort.tables["percentiles"].filter(pl.col("metric") != "queue_s").select(
            ccol, "metric", "requests", *percentile_columns(lat_cohort.tables["percentiles"])),
        "goodput": goodput_table(lat.tables["goodput"], lat.tables.get("scores"), gcol),
        "capacity": capacity_table(cap),
    }
    found = findings(len_r, conc, cap, lat, slo, gcol, cohort=cohort, cohort_lat=by_cohort,
                     ceiling_share=ceiling_share)
    tables = {"findings": found, **tables}
    return Analysis(
        name="analyze",
        params={**base_params(sel), "cohort": cohort.value if cohort else None, "slo": slo.to_dict(),
                "gpu_hour_cost": gpu_hour_cost, "gpus_per_pod": gpus_per_pod, "ceiling_share": ceiling_share},
        tables=tables,
        titles={
            "findings": "worth a look",
            "lengths": f"token lengths by {gcol}",
            "concurrency": "concurrency per pod (time-weighted)",
            "latency": f"latency by {ccol} (seconds)",
            "goodput": f"goodput for {slo.describe()}",
            "capacity": "capacity per pod per day",
        },
        definitions=DEFINITIONS,
        notes=list(dict.fromkeys(len_r.notes + conc.notes + lat.notes + cap.notes)),
    )


def cohort_latency(sel: Selection, slo: Slo, percentiles: Any = None) -> tuple[GroupBy | None, Analysis | None]:
    """Latency per cohort (label, else engine version: `cohort_of`) when the window holds a before/after, the
    cohorts in time order (first arrival) so that a change reads from before to after; (None, None) when
    not. Regroups the connection's int_analysis_requests by the cohort."""
    cohort = cohort_of(sel)
    if cohort is None:
        return None, None
    csel = select(sel.con, since=sel.window, by=cohort)
    lat = latency(csel, slo=slo, scores=[], percentiles=percentiles)
    order = csel.run("analysis_group_first_arrival")
    rank = dict(zip(order["grp"], order["t"].rank("ordinal"), strict=True))
    for name in ("percentiles", "goodput"):
        lat.tables[name] = lat.tables[name].sort(pl.col(cohort.value).replace_strict(rank, default=None),
                                                 maintain_order=True)
    return cohort, lat


def findings(lengths_a: Analysis, conc: Analysis, cap: Analysis, lat: Analysis, slo: Slo, gcol: str, *,
             cohort: GroupBy | None = None, cohort_lat: Analysis | None = None,
             ceiling_share: float = CEILING_SHARE) -> pl.DataFrame:
    """The findings worth a look for one window, from analyses already run on it (`lengths`, `concurrency`
    and `capacity` per pod, `latency` per group `gcol`, and `cohort_latency`'s answer): the one rule set
    behind `analyze`, the dashboard's overview and the report's action lines."""
    t = {
        "lengths": lengths_table(lengths_a.tables["stats"], gcol),
        "concurrency": concurrency_table(conc.tables["pods"], conc.tables["deployments"], cap),
        "goodput": goodput_table(lat.tables["goodput"], lat.tables.get("scores"), gcol),
        "capacity": capacity_table(cap),
    }
    if cohort is not None and cohort_lat is not None:
        has_cohorts, ccol, cohort_pct = True, cohort.value, cohort_lat.tables["percentiles"]
    else:
        has_cohorts, ccol, cohort_pct = False, gcol, lat.tables["percentiles"]
    return pick_findings(t, cohort_pct, lat.tables["slo_terms"], ccol, has_cohorts, gcol, slo, k=FINDINGS,
                         ceiling_share=ceiling_share)


def lengths_table(stats: pl.DataFrame, gcol: str) -> pl.DataFrame:
    """The summary's length rows (prompt and output per group) from `lengths`' stats table."""
    return stats.filter(pl.col("metric") != "cached_tokens").select(
        gcol, pl.col("metric").str.replace("_tokens", ""), "requests", "mean", *percentile_columns(stats), "max",
        pl.col("top1_token_share").alias("top1_share"))


def concurrency_table(pods: pl.DataFrame, deps: pl.DataFrame, cap: Analysis | None = None) -> pl.DataFrame:
    """One row per pod: running requests (in_system where nothing counts them) and the waiting queue; each
    figure's source is exact, sampled or estimate (see `attribution concurrency`); the pod's running limit
    and the share of its busy time it spent there (from `cap`'s sweep, else the engine's step lines). The
    percentiles are the concurrency analysis's (the `percentiles` setting)."""
    cols = ["source", "peak", "mean", *percentile_columns(pods)]

    def metric(name: str, prefix: str) -> pl.DataFrame:
        return pods.filter(pl.col("metric") == name).select("deployment", *[pl.col(c).alias(prefix + c) for c in cols])

    df = (metric("in_system", "s_").join(metric("running", "r_"), on="deployment", how="left")
          .join(metric("waiting", "w_"), on="deployment", how="left"))
    known = pl.col("r_peak").is_not_null()
    lim = deps.select("deployment", "running_limit", "limit_source", "at_limit_share_of_busy_steps")
    if cap is not None:
        lim = lim.join(cap.tables["capacity"].select("deployment", "at_limit_share_of_busy_time"), on="deployment",
                       how="left")
    else:
        lim = lim.with_columns(pl.lit(None, pl.Float64).alias("at_limit_share_of_busy_time"))
    lim = lim.select("deployment", "running_limit", "limit_source",
                     pl.coalesce("at_limit_share_of_busy_time", "at_limit_share_of_busy_steps")
                     .alias("at_limit_share_of_busy_time"))
    return df.select(
        "deployment",
        pl.when(known).then(pl.lit("running")).otherwise(pl.lit("in_system")).alias("counted"),
        *[pl.when(known).then(pl.col(f"r_{c}")).otherwise(pl.col(f"s_{c}")).alias(c) for c in cols],
        pl.col("w_peak").alias("waiting_peak"), pl.col("w_p99").alias("waiting_p99"),
    ).join(lim, on="deployment", how="left").sort("deployment")


def goodput_table(good: pl.DataFrame, scores: pl.DataFrame | None, gcol: str) -> pl.DataFrame:
    """The summary's goodput rows per group, with the mean of the first SLO score when there is one."""
    out = good.select(gcol, "requests", "judged", "good_share_of_judged_requests", "goodput_per_s")
    if scores is not None and scores.height:
        name = scores["score"][0]
        ers = scores.filter(pl.col("score") == name).select(gcol, pl.col("mean").alias(f"{name}_mean"))
        out = out.join(ers, on=gcol, how="left", maintain_order="left")
    return out


def capacity_table(cap: Analysis) -> pl.DataFrame:
    """The summary's capacity rows per pod (and cost per million tokens when prices were given)."""
    df = cap.tables["capacity"].select("deployment", "completed_per_day", "busiest_hour_per_day", "running_limit",
                                       "capacity_per_day", "capacity_lo", "capacity_hi", "capacity_method",
                                       "utilization")
    if "cost" in cap.tables:
        df = df.join(cap.tables["cost"].select("deployment", "usd_per_m_input", "usd_per_m_output"),
                     on="deployment", how="left", maintain_order="left")
    return df


def pick_findings(t: dict[str, pl.DataFrame], cohort_pct: pl.DataFrame, slo_terms: pl.DataFrame, ccol: str,
                  has_cohorts: bool, gcol: str, slo: Slo, k: int = FINDINGS,
                  ceiling_share: float = CEILING_SHARE) -> pl.DataFrame:
    """At most `k` findings, one per kind, strongest first (strengths are rough 0-1 ranks, not statistics).
    A ceiling needs the pod at its running limit for at least `ceiling_share` of its busy time."""
    found: list[tuple[float, str, str]] = []  # (strength 0-1, kind, text)
    conc = t["concurrency"]
    # a pod is at its ceiling only if it sat at its running limit for a material share of its busy time
    pinned = conc.filter(pl.col("running_limit").is_not_null()
                         & (pl.col("at_limit_share_of_busy_time") >= ceiling_share))
    for r in pinned.iter_rows(named=True):
        found.append((1.0, "ceiling", f"{r['deployment']} ran at its running limit of {r['running_limit']:,} "
                      f"({r['limit_source']}) {r['at_limit_share_of_busy_time']:.0%} of its busy time; up to "
                      f"{_n(r['waiting_peak'])} waited at once"))
    for r in conc.filter(~pl.col("deployment").is_in(pinned["deployment"].implode())).iter_rows(named=True):
        if (r["waiting_p99"] or 0) > 0:
            found.append((0.5, "queueing", f"{r['deployment']}: requests waited in the queue more than 1% of the "
                          f"time (up to {_n(r['waiting_peak'])} at once) while at most {_n(r['peak'])} ran"))
    if has_cohorts and cohort_pct.height:
        for metric, q in (("ttft_s", "p50"), ("ttft_s", "p99"), ("tpot_s", "p50"), ("e2e_s", "p99")):
            rows = cohort_pct.filter(pl.col("metric") == metric).select(ccol, q).drop_nulls()
            if ccol == "version":  # a change of version within one engine, not vLLM against SGLang
                engine = pl.col(ccol).str.split(" ").list.first()
                rows = rows.filter(engine.is_in(rows.group_by(engine.alias("e")).len().filter(
                    pl.col("len") >= 2)["e"].implode()))
                rows = rows.filter(engine == engine.first())
            if rows.height >= 2 and as_float(rows[q].min()) > 0:
                first, last = rows.row(0), rows.row(rows.height - 1)
                ratio = last[1] / first[1]
                how = f"{1 / ratio:.1f}x faster" if ratio < 1 else f"{ratio:.1f}x slower"
                found.append((min(1.0, abs(math.log2(ratio)) / 2), "change",
                              f"{metric[:-2].upper()} {q} went from {first[1]:.3g} s ({first[0]}) to {last[1]:.3g} s "
                              f"({last[0]}): {how}"))
    for r in t["goodput"].iter_rows(named=True):
        share = r["good_share_of_judged_requests"]
        if share is not None and share < 0.9:
            terms = slo_terms.filter(pl.col(gcol) == r[gcol]).sort("met_share")
            worst = (f"; {terms['term'][0]} is met by {terms['met_share'][0]:.0%}"
                     if terms.height and terms["met_share"][0] is not None else "")
            found.append((1 - share, "slo", f"{share:.0%} of the judged {r[gcol]} requests meet "
                                             f"{slo.describe()}{worst}"))
    for r in t["lengths"].filter(pl.col("metric") == "prompt").iter_rows(named=True):
        if (r["top1_share"] or 0) >= 0.05:
            found.append((min(1.0, r["top1_share"] * 4), "long_prompts",
                          f"in {r[gcol]}, the longest 1% of prompts carry {r['top1_share']:.0%} of the prompt "
                          f"tokens (p99 {_n(r['p99'])}, max {_n(r['max'])})"))
    for r in t["capacity"].iter_rows(named=True):
        u = r["utilization"]
        if u is not None and (u < 0.25 or u > 0.8):
            found.append((0.3 if u < 0.25 else 0.7, "utilization",
                          f"{r['deployment']} completed {_n(r['completed_per_day'])} requests/day, {u:.0%} of the "
                          f"{_n(r['capacity_per_day'])} it could at its running limit ({r['capacity_method']})"))
    best: dict[str, tuple[float, str, str]] = {}
    for f in sorted(found, key=lambda f: -f[0]):
        best.setdefault(f[1], f)  # one finding per kind, the strongest
    top = sorted(best.values(), key=lambda f: -f[0])[:k]
    return pl.DataFrame({"kind": [f[1] for f in top], "finding": [f[2] for f in top]},
                        schema={"kind": pl.Utf8, "finding": pl.Utf8})


def _n(v: Any) -> str:
    return "?" if v is None else f"{v:,.0f}"

