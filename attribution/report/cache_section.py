"""The report's "prompt cache" section and its at-a-glance line: measured cached-token shares per source,
the prefix-reuse potential where block hashes exist, the savings, and a workload whose measured reuse moved
materially against the previous window (rule: CHANGE_RULE). Reads attribution.cache's answers only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from attribution.columns import view
from attribution.report.fmt import num, pct
from attribution.report.model import Action, Section

if TYPE_CHECKING:
    from attribution.report.build import Inputs

# A workload's measured reuse "changed materially" when its cached-token share moved by at least MIN_POINTS
# (absolute, 0.10 = ten percentage points) between the previous window and this one, by the same measure
# and source, with at least MIN_SAMPLES samples and MIN_TOKENS queried tokens in each window.
MIN_POINTS = 0.10
MIN_SAMPLES = 100
MIN_TOKENS = 100_000
CHANGE_RULE = (f"share moved by >= {MIN_POINTS:.0%} points, >= {MIN_SAMPLES} samples and >= {MIN_TOKENS:,} "
               "queried tokens in both windows, same measure and source")


def report_cache(con, window, settings) -> tuple:
    """The cache analysis of the report's window (with the settings' economics) and the material changes of
    measured reuse against the previous window."""
    from attribution.cache.analysis import Economics, cache
    from attribution.report.changes import previous_window

    now = cache(con, window, econ=Economics.from_settings(settings))
    prev = previous_window(window)
    if prev is None:
        return now, None
    before = cache(con, prev, potential=False)
    return now, reuse_changes(now.tables["measured"], before.tables["measured"])


def reuse_changes(now: pl.DataFrame, before: pl.DataFrame) -> pl.DataFrame:
    """Per measure, source and workload (deployments summed): shares in both windows and the change, only the
    rows the rule calls material, largest change first."""
    keys = ["measure", "source", "workload"]

    def per(df: pl.DataFrame) -> pl.DataFrame:
        return (df.group_by(keys).agg(pl.col("queried_tokens", "cached_tokens", "samples").sum())
                .with_columns((pl.col("cached_tokens") / pl.col("queried_tokens")).alias("share")))

    if now.height == 0 or before.height == 0:
        return pl.DataFrame(schema={**dict.fromkeys(keys, pl.Utf8), "share_before": pl.Float64,
                                    "share": pl.Float64, "change": pl.Float64})
    j = per(now).join(per(before), on=keys, suffix="_before")
    enough = ((pl.col("samples") >= MIN_SAMPLES) & (pl.col("samples_before") >= MIN_SAMPLES)
              & (pl.col("queried_tokens") >= MIN_TOKENS) & (pl.col("queried_tokens_before") >= MIN_TOKENS))
    return (j.filter(enough).with_columns((pl.col("share") - pl.col("share_before")).alias("change"))
            .filter(pl.col("change").abs() >= MIN_POINTS)
            .sort(pl.col("change").abs(), descending=True)
            .select(*keys, "share_before", "share", "change"))


def cache_section(inp: Inputs) -> Section:
    s = Section("cache", "Prompt cache")
    a = inp.cache
    if a is None:
        s.lines.append(f"Not computed ({inp.skipped.get('cache', 'no data')}).")
        return s
    m = a.tables["measured"]
    if m.height:
        for r in (m.group_by("measure", "source").agg(pl.col("queried_tokens", "cached_tokens").sum())
                  .sort(["queried_tokens", "measure", "source"], descending=[True, False, False])
                  .iter_rows(named=True)):
            s.lines.append(f"{r['measure']} ({r['source']}): {pct(r['cached_tokens'] / r['queried_tokens'])} of "
                           f"{num(r['queried_tokens'])} prompt tokens served from the cache.")
        s.table("measured", a.titles["measured"], view(m, ["measure", "source", "workload", "deployment",
                                                           "queried_tokens", "cached_tokens", "cached_share"]))
    else:
        s.lines.append("No source in this window reports cached tokens or prefix-cache hits.")
    if "potential" in a.tables:
        p = a.tables["potential"].filter((pl.col("workload") == "(all)") & pl.col("capacity_blocks").is_null())
        if p.height:
            r = p.row(0, named=True)
            s.lines.append(f"With an unbounded cache, {pct(r['token_weighted'])} of the prompt tokens of the "
                           f"{r['requests']:,} requests with block hashes would hit (token-weighted; "
                           f"{pct(r['mean_request_tokens'])} as the mean of per-request ratios).")
        s.table("potential", a.titles["potential"], a.tables["potential"])
        s.table("curve", a.titles["curve"], a.tables["curve"])
    if "savings" in a.tables:
        s.table("savings", a.titles["savings"], a.tables["savings"])
    if inp.cache_changes is not None and inp.cache_changes.height:
        s.table("changes", f"cached-token share against the previous window ({CHANGE_RULE})", inp.cache_changes)
    s.notes.extend(a.notes)
    return s


def cache_actions(inp: Inputs) -> list[Action]:
    ch = inp.cache_changes
    if ch is None or ch.height == 0:
        return []
    r = ch.row(0, named=True)
    verb = "rose" if r["change"] > 0 else "fell"
    return [Action("watch", "cache", "cache",
                   f"Prompt-cache reuse of {r['workload']} {verb} from {pct(r['share_before'])} to {pct(r['share'])} "
                   f"of prompt tokens ({r['measure']}, {r['source']}) against the previous window.")]
