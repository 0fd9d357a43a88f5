"""The report's "arrivals" section (rate and burstiness per group, the per-minute series, the hour-of-day
profile, fitted gap distributions, conversations) and its "at a glance" line: a group whose burstiness changed
materially against the previous window, by the rule of attribution.analyses.arrival_change. Reading and
arranging only; the numbers are the analyses'."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import polars as pl

from attribution import charts
from attribution.analyses.arrivals import OVERALL
from attribution.charts.common import grouped_by
from attribution.columns import view
from attribution.report.fmt import num, pct
from attribution.report.model import Action, Section

if TYPE_CHECKING:
    from attribution.report.build import Inputs

CHANGED = ("burstier", "smoother")


def arrivals_section(inp: Inputs) -> Section:
    a = inp.arrivals
    s = Section("arrivals", "Arrivals and burstiness", definitions=a.definitions if a is not None else {})
    if a is None or not a.tables["rates"].height:
        s.lines.append("No arrivals in this window.")
        return s
    rates = a.tables["rates"]
    g = grouped_by(rates)
    fits = a.tables["fits"]
    best = fits.filter(pl.col("best")).select(g, pl.col("distribution").alias("best_fit"),
                                              pl.col("ks").alias("best_fit_ks"))
    gamma = fits.filter(pl.col("distribution") == "gamma").select(g, pl.col("shape").alias("gamma_shape"))
    table = rates.join(best, on=g, how="left").join(gamma, on=g, how="left")
    total = table.filter(pl.col(g) == OVERALL) if table[g].n_unique() > 1 else table
    for r in total.iter_rows(named=True):
        s.lines.append(f"{r['requests']:,} requests at {num(r['rate_per_s'])}/s on average; per minute p50 "
                       f"{num(r['rpm_p50'])}, p99 {num(r['rpm_p99'])}, busiest {num(r['rpm_max'])}; "
                       f"inter-arrival CV {num(r['gap_cv'])} (1 = Poisson).")
    groups = table.filter(pl.col(g) != OVERALL).sort("gap_cv", descending=True, nulls_last=True)
    for r in groups.head(3).iter_rows(named=True):
        fit = f"; gaps fit a {r['best_fit']} best (KS {num(r['best_fit_ks'])})" if r["best_fit"] else ""
        s.lines.append(f"{r[g]}: CV {num(r['gap_cv'])}, index of dispersion {num(r['idc_60s'])} over a minute, "
                       f"busiest minute {num(r['rpm_max'])} against a median of {num(r['rpm_p50'])}{fit}.")
    s.table("burstiness", a.titles["rates"], view(table, [
        g, "requests", "rate_per_s", "rpm_min", "rpm_p50", "rpm_p99", "rpm_max", "peak_to_mean", "gap_cv",
        "zero_gap_share", "burstiness", "idc_1s", "idc_10s", "idc_60s", "longest_gap_s", "best_fit", "gamma_shape"]))
    both = None if inp.burstiness is None else inp.burstiness.filter(
        (pl.col("requests_before") > 0) & (pl.col("requests_now") > 0))
    if both is not None and both.height:
        s.table("burstiness_change", "inter-arrival CV against the previous window", both.rename({"grp": g}))
        s.definitions = {**s.definitions, "burstiness_change": inp.burstiness_rule}
    s.chart("per_minute", partial(charts.arrivals.per_minute, a))
    s.chart("hours", partial(charts.arrivals.hour_profile, a))
    s.table("fits", a.titles["fits"], view(fits, [g, "distribution", "gaps", "fitted_on", "shape", "scale_s",
                                                  "mean_s", "ks", "best"]))
    turns = a.tables["turns"]
    if turns.height:
        for r in turns.filter(pl.col(g) != OVERALL).iter_rows(named=True) if turns[g].n_unique() > 1 \
                else turns.iter_rows(named=True):
            s.lines.append(f"{r[g]}: {r['conversations']:,} conversations told apart by block hashes, "
                           f"{pct(r['follow_up_share'])} of requests are follow-ups, up to {r['turns_max']} turns.")
        s.table("turns", a.titles["turns"], turns)
    s.notes += a.notes
    return s


def burstiness_actions(inp: Inputs) -> list[Action]:
    """A `watch` line for each group (at most two, largest change first) whose burstiness changed."""
    b = inp.burstiness
    if b is None or not b.height:
        return []
    out = []
    changed = b.filter(pl.col("status").is_in(CHANGED))
    changed = changed.sort(pl.col("cv_ratio").log().abs(), descending=True)
    for r in changed.head(2).iter_rows(named=True):
        out.append(Action("watch", "burstiness", "arrivals",
                          f"{r['grp']}: arrivals {r['status']} than in the previous window (inter-arrival CV "
                          f"{num(r['cv_before'])} -> {num(r['cv_now'])}, x{r['cv_ratio']:.2g}, interval "
                          f"x{r['cv_ratio_lo']:.2g}-x{r['cv_ratio_hi']:.2g}; {r['requests_now']:,} requests)."))
    return out
