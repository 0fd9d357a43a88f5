"""Arrival-process statistics per group and overall: mean rate, requests per clock minute, inter-arrival CV,
index of dispersion over 1/10/60 s windows, longest gap, hour-of-day and weekday profiles, fitted inter-arrival
distributions, and multi-turn structure where block hashes tell conversations apart. Set-shaped figures come from
queries/arrival_*.sql and int_arrival_*.sql; the fits are NumPy/SciPy (analyses.arrival_fits)."""

from __future__ import annotations

from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import polars as pl

from attribution.analyses.arrival_fits import MAX_GAPS, MIN_GAPS, fit_gaps, sample, selection_gaps
from attribution.analyses.common import Analysis, Selection, base_params, name_groups
from attribution.choices import GroupBy
from attribution.errors import UsageError

OVERALL = "(all)"
TIMESERIES_BUCKETS = 500  # the per-minute series' default bucket keeps a group's line under this many points
DEFINITIONS = {
    "groups": f"one row per group under --by, and {OVERALL!r} for every request of the window together",
    "ties": "requests arriving at the same microsecond are ordered as read (file, line); their gap is 0. Gaps of "
    "0 count in gap_cv and zero_gap_share; the fits leave them out (a continuous distribution cannot fit them)",
    "rate_per_s": "requests / (last arrival - first arrival); NULL for a group with one arrival time",
    "rpm_*": "requests per clock-aligned UTC minute (hh:mm:00 to hh:mm:59.999999), every minute from the first "
    "arrival's to the last's, empty minutes counted as 0; percentiles by linear interpolation (numpy's default)",
    "gap_cv": "population standard deviation / mean of the gaps between consecutive arrivals (1 for Poisson)",
    "burstiness": "(gap_cv - 1) / (gap_cv + 1), in [-1, 1]: 0 for Poisson, towards 1 for bursts",
    "idc_1s/idc_10s/idc_60s": "index of dispersion of counts: population variance / mean of the requests per "
    "clock-aligned (epoch) window of 1, 10 or 60 s, from the first arrival's window to the last's, empty "
    "windows counted (1 at every width for Poisson; growth with width means a drifting rate)",
    "longest_gap_s": "the longest time without an arrival between the group's first and last arrival",
    "fits": "maximum likelihood with location 0 (scipy.stats gamma.fit / weibull_min.fit with floc=0; exponential: "
    "scale = mean gap) on the positive gaps, with the Kolmogorov-Smirnov distance ks (smaller fits better); "
    f"groups with more than {MAX_GAPS:,} positive gaps are fitted on a seeded sample of {MAX_GAPS:,}, with fewer "
    f"than {MIN_GAPS} not fitted. A Gamma shape k is vLLM bench's --burstiness (CV = 1/sqrt(k))",
    "profiles": "hour of day and ISO weekday of arrival in the `tz` setting's zone (default UTC); mean = requests "
    "per clock hour (or calendar day) of that kind within the group's span",
    "per_minute": "requests per clock minute in buckets of bucket_minutes whole minutes (epoch-aligned): rpm_mean "
    "= the bucket's requests / its minutes inside the group's span, rpm_max = its busiest minute",
    "turns": "conversations from prefix-chained block hashes (Mooncake-style traces, replay exports): a request "
    "follows the latest earlier request of the same file whose hash ids, all or all but the last, are a prefix of "
    "its own, at least 2 blocks long. gap = arrival to the next turn's arrival; think = previous turn's finish "
    "to the next turn's arrival (where the finish is known). Sources without block hashes have no rows here",
}


def check_tz(tz: str) -> str:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"tz = {tz!r}: not a known time zone (use an IANA name such as Europe/Berlin)") from None
    return tz


def arrivals(sel: Selection, *, tz: str = "UTC", timeseries: bool = False, bucket_minutes: int | None = None
             ) -> Analysis:
    """Arrival statistics of the window per group (under sel.by) and overall: tables `rates` (one row per
    group), `fits` (exponential, Gamma and Weibull per group), `diurnal` and `weekday` (profiles in `tz`), `turns`
    (multi-turn structure where block hashes exist) and, with `timeseries`, `per_minute` (requests per minute,
    mean and busiest, in buckets of `bucket_minutes`; default: whole minutes making at most TIMESERIES_BUCKETS)."""
    overall = sel.by != GroupBy.all
    sel.materialize("int_arrival_times", overall=overall)
    sel.materialize("int_arrival_minutes")
    rates = sel.run("arrival_rates_by_group")
    profile = sel.run("arrival_profile_by_group", tz=check_tz(tz))
    sel.materialize("int_arrival_turns")
    turns = sel.run("arrival_turns_by_group", overall=overall)
    tables = {
        "rates": rates,
        "fits": _fits(selection_gaps(sel)),
        "diurnal": profile.filter(pl.col("profile") == "hour").drop("profile").rename({"slot": "hour"}),
        "weekday": profile.filter(pl.col("profile") == "weekday").drop("profile").rename({"slot": "isodow"}),
        "turns": turns,
    }
    if timeseries:
        if bucket_minutes is None:
            most = int(rates.filter(pl.col("grp") != OVERALL).select(pl.col("minutes").max()).item() or 1) \
                if rates.height else 1
            bucket_minutes = max(1, -(-most // TIMESERIES_BUCKETS))
        if bucket_minutes < 1:
            raise UsageError("the bucket must be at least 1 minute")
        tables["per_minute"] = sel.run("arrival_minutes_by_group", bucket_minutes=bucket_minutes)
    notes = []
    if rates.height and turns.height == 0:
        notes.append("no request carries block hashes: conversations (turns) cannot be told apart")
    quantised = rates.filter(pl.col("zero_gap_share") > 0.5)["grp"].to_list()
    if quantised:
        notes.append(f"over half the gaps are 0 in {', '.join(quantised)}: arrival times look quantised, so read "
                     "their rates and per-minute counts, not their gap CV or fits")
    return Analysis(
        name="arrivals",
        params={**base_params(sel), "tz": tz, **({"bucket_minutes": bucket_minutes} if timeseries else {})},
        tables={k: name_groups(v, sel.by) for k, v in tables.items()},
        titles={"rates": f"arrival rate and burstiness by {sel.by.value}", "fits": "inter-arrival fits",
                "diurnal": f"hour-of-day profile ({tz})", "weekday": f"weekday profile ({tz})",
                "turns": "multi-turn conversations", "per_minute": "requests per minute"},
        definitions=DEFINITIONS,
        notes=notes,
    )


_FIT_SCHEMA = {"grp": pl.Utf8, "distribution": pl.Utf8, "gaps": pl.Int64, "fitted_on": pl.Int64,
               "shape": pl.Float64, "scale_s": pl.Float64, "mean_s": pl.Float64, "ks": pl.Float64,
               "best": pl.Boolean}


def _fits(gaps: Iterator[tuple[str, np.ndarray]]) -> pl.DataFrame:
    """The three fits of each group's positive gaps (a loop over groups, each fit vectorised)."""
    rows = []
    for grp, every in gaps:
        x = every[every > 0]
        if not x.size:
            continue
        fitted = sample(x)
        rows += [{"grp": grp, "gaps": len(x), "fitted_on": len(fitted), **r} for r in fit_gaps(fitted)]
    return pl.DataFrame(rows, schema=_FIT_SCHEMA).select(list(_FIT_SCHEMA))
