"""The two cohorts of a comparison: by ingest label (`--label before`), by engine version (`0.20.0` or
`vllm 0.20.0`), or by arrival window (`2025-06-02..2025-06-05`). Labels and versions may be left out when the
store holds exactly two: the older one (by first arrival) is `before`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from attribution import queries
from attribution.analyses.common import parse_when
from attribution.choices import CohortBy
from attribution.errors import AttributionError, UsageError


@dataclass(frozen=True)
class Cohorts:
    by: CohortBy
    before: str
    after: str
    before_window: tuple[datetime, datetime] | None = None
    after_window: tuple[datetime, datetime] | None = None

    def params(self) -> dict[str, Any]:
        bw = self.before_window or (None, None)
        aw = self.after_window or (None, None)
        return {"cohort_by": self.by.value, "before": self.before, "after": self.after,
                "before_since": bw[0], "before_until": bw[1], "after_since": aw[0], "after_until": aw[1]}

    def windows(self) -> list[tuple[str, tuple[datetime, datetime]]]:
        """("before", its window), ("after", its window): cohorts by window only."""
        if self.before_window is None or self.after_window is None:
            raise AttributionError(f"cohorts by {self.by.value} have no windows")
        return [("before", self.before_window), ("after", self.after_window)]

    def describe(self, which: str) -> str:
        value = self.before if which == "before" else self.after
        return {"label": f"label = {value}", "version": f"engine version {value}",
                "window": f"arrivals in [{value.replace('..', ', ')})"}[self.by.value]


def parse_window(text: str) -> tuple[datetime, datetime]:
    """`SINCE..UNTIL` (or `SINCE/UNTIL`): two absolute ISO dates or date-times, naive = UTC."""
    sep = ".." if ".." in text else "/"
    parts = text.split(sep)
    if len(parts) != 2:
        raise UsageError(f"window {text!r}: write SINCE..UNTIL, e.g. 2025-06-02..2025-06-05T12:00")
    since, until = (parse_when(p) for p in parts)
    if not isinstance(since, datetime) or not isinstance(until, datetime):
        raise UsageError(f"window {text!r}: both ends must be absolute dates or times")
    if since >= until:
        raise UsageError(f"window {text!r}: the start must be before the end")
    return since, until


def cohort_values(con: duckdb.DuckDBPyConnection, by: CohortBy) -> list[str]:
    """Labels or engine versions of the completed requests in `int_threshold_requests`, oldest first."""
    return queries.run(con, "compare_cohort_values", cohort_by=by.value)["value"].to_list()


def _pair(values: list[str], by: CohortBy, before: str | None, after: str | None) -> tuple[str, str] | None:
    """The two cohorts when they are unambiguous: the only two values (oldest first), or for versions the
    only two versions of one engine (an upgrade); one given value pairs with the only other candidate."""
    cands = values
    if by == CohortBy.version and len(values) > 2:
        engines: dict[str, list[str]] = {}
        for v in values:
            eng, _, ver = v.partition(" ")
            if ver:
                engines.setdefault(eng, []).append(v)
        multi = [vs for vs in engines.values() if len(vs) >= 2]
        cands = multi[0] if len(multi) == 1 else values
    named = [v for v in (before, after) if v is not None]
    rest = [v for v in cands if not any(v == n or v.endswith(f" {n}") for n in named)]
    if len(rest) != 2 - len(named):
        return None
    if before is not None and after is not None:
        return before, after
    if before is not None:
        return before, rest[0]
    if after is not None:
        return rest[0], after
    return rest[0], rest[1]


def resolve(con: duckdb.DuckDBPyConnection, by: CohortBy | str, before: str | None,
            after: str | None) -> Cohorts:
    """The cohorts asked for; a missing label or version is filled when the store holds exactly two."""
    by = CohortBy(by)
    if by == CohortBy.window:
        if not before or not after:
            raise UsageError("--cohort-by window needs --before SINCE..UNTIL and --after SINCE..UNTIL")
        bw, aw = parse_window(before), parse_window(after)
        if bw[0] < aw[1] and aw[0] < bw[1]:
            raise UsageError(f"the windows {before} and {after} overlap")
        return Cohorts(by, before, after, bw, aw)
    values = cohort_values(con, by)
    if before is None or after is None:
        pair = _pair(values, by, before, after)
        if pair is None:
            known = ", ".join(values) or "none"
            raise UsageError(f"name both cohorts with --before and --after (the {by.value}s in the store: {known})")
        before, after = pair
    for v in (before, after):
        if not any(v == x or x.endswith(f" {v}") for x in values):
            raise UsageError(f"no completed requests with {by.value} {v!r} (the store has: "
                             f"{', '.join(values) or 'none'})")
    if before == after:
        raise UsageError("--before and --after name the same cohort")
    return Cohorts(by, before, after)
