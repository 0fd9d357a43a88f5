"""Step-scoped threshold crossings computed with NumPy: the rows of queries/threshold_steps.sql (how often,
how long and in how many episodes each feature's quantity was over its threshold, per deployment and per day)
and of queries/threshold_arrivals.sql (which requests arrived while their deployment was over it).

The SQL files define them over thr_step_values, one row per step line and feature: tens of millions of rows on
a busy week, each feature's lines ordered once per file. Here the lines are read once
(queries/threshold_step_rows.sql: one row per line with every quantity), put in file order once, and each
feature is a mask over them; the results are the same rows (tests/test_thresholds.py compares both).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import polars as pl

from attribution import queries
from attribution.db import fetch

DAY_US = 86_400_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
QUANTITIES = ("decode_batch_size", "running_requests", "prefill_batch_tokens", "step_tokens", "state_usage",
              "kv_usage", "waiting_requests", "preemptions")
STEPS_SCHEMA = {
    "feature": pl.Utf8, "level": pl.Utf8, "grp": pl.Utf8, "rows": pl.Int64, "crossed_rows": pl.Int64,
    "row_share": pl.Float64, "seconds": pl.Float64, "crossed_seconds": pl.Float64, "time_share": pl.Float64,
    "episodes": pl.Int64, "longest_episode_s": pl.Float64, "max_value": pl.Float64,
    "first_crossed": pl.Datetime("us", "UTC"), "last_crossed": pl.Datetime("us", "UTC"), "kinds": pl.Utf8,
    "estimated": pl.Boolean, "cuda_graph_off_rows": pl.Int64,
}


@dataclass
class StepRows:
    """Every step line of the window in (file, time, line) order, as arrays."""

    file: np.ndarray
    t: np.ndarray
    deployment: np.ndarray  # codes into `deployments`
    deployments: list[str | None]
    kind: np.ndarray  # codes into `kinds`
    kinds: list[str | None]
    cuda_graph_off: np.ndarray
    config: np.ndarray  # hash of the config id
    values: dict[str, tuple[np.ndarray, np.ndarray]]  # quantity -> (values, present)

    @property
    def size(self) -> int:
        return int(self.t.size)


def _codes(s: pl.Series) -> tuple[np.ndarray, list[Any]]:
    """Dense codes of a string column (-1 for null) and the values they stand for."""
    values = s.drop_nulls().unique().sort().to_list()
    return s.cast(pl.Enum(values)).to_physical().cast(pl.Int64).fill_null(-1).to_numpy(), values


def step_rows(con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
              ) -> StepRows:
    """queries/threshold_step_rows.sql (thr_starts must be registered), in (file, time, line) order."""
    df = queries.run(con, "threshold_step_rows", since=since, until=until)
    file = df["file_id"].to_numpy()
    t = df["t"].to_numpy()
    order = np.lexsort((df["line"].fill_null(0).to_numpy(), t, file))
    if np.all(order[1:] > order[:-1]):
        order = slice(None)  # already in order
    dep, deps = _codes(df["deployment"])
    kind, kinds = _codes(df["kind"])
    return StepRows(
        file=file[order], t=t[order], deployment=dep[order], deployments=[*deps, None], kind=kind[order],
        kinds=[*kinds, None],  # code -1 (no value) indexes the None at the end
        cuda_graph_off=(df["cuda_graph"] == False).fill_null(False).to_numpy()[order],  # noqa: E712
        config=df["config_hash"].to_numpy()[order],
        values={q: (df[q].fill_null(0.0).to_numpy()[order], df[q].is_not_null().to_numpy()[order])
                for q in QUANTITIES},
    )


@dataclass
class Feature:
    """One step feature's lines: those carrying its quantity whose engine start evaluates it."""

    feature: str
    quantity: str
    idx: np.ndarray  # rows of StepRows, in file order
    value: np.ndarray
    crossed: np.ndarray


_OPS = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}


def features(con: duckdb.DuckDBPyConnection, rows: StepRows) -> list[Feature]:
    """Each evaluated step feature of thr_settings, over `rows` (threshold_step_values.sql's rows)."""
    settings = fetch(con, "select feature, quantity, op, threshold, hash(config_id) as config_hash "
                          "from thr_settings where evaluate and scope = 'step' order by feature")
    if not settings.height or not rows.size:
        return []
    # the rows' engine starts as indices into the starts that have step settings (-1: none)
    cfgs = np.unique(settings["config_hash"].to_numpy())
    pos = np.minimum(np.searchsorted(cfgs, rows.config), cfgs.size - 1)
    row_cfg = np.where(cfgs[pos] == rows.config, pos, -1)
    out = []
    for (feature,), part in settings.partition_by("feature", maintain_order=True, as_dict=True).items():
        quantity, op = part["quantity"][0], part["op"][0]
        if quantity not in rows.values:
            continue
        # per start: evaluated, and its threshold (NaN: none, never crossed); index -1 (no settings) is the last
        evaluated = np.zeros(cfgs.size + 1, bool)
        thr = np.full(cfgs.size + 1, np.nan)
        at = np.searchsorted(cfgs, part["config_hash"].to_numpy())
        evaluated[at] = True
        thr[at] = part["threshold"].fill_null(np.nan).to_numpy()
        values, present = rows.values[quantity]
        idx = np.flatnonzero(present & evaluated[row_cfg])
        value = values[idx]
        threshold = thr[row_cfg[idx]]
        with np.errstate(invalid="ignore"):
            crossed = _OPS[op](value, threshold) if op in _OPS else np.zeros(idx.size, bool)
        out.append(Feature(feature, quantity, idx, value, crossed & ~np.isnan(threshold)))
    return out


def _day(t: np.ndarray) -> np.ndarray:
    return np.floor_divide(t, DAY_US)


def _day_label(d: int) -> str:
    return (EPOCH + timedelta(days=int(d))).strftime("%Y-%m-%d")


def steps_table(con: duckdb.DuckDBPyConnection, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    """The rows of queries/threshold_steps.sql over `rows` and the connection's thr_settings."""
    frames = [_feature_steps(f, rows, max_gap_s) for f in features(con, rows)]
    out = pl.concat([pl.DataFrame(schema=STEPS_SCHEMA), *[f for f in frames if f.height]])
    return out.sort("feature", "level", "grp", nulls_last=True, maintain_order=True)


def _feature_steps(f: Feature, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    n = f.idx.size
    if not n:
        return pl.DataFrame(schema=STEPS_SCHEMA)
    file, t = rows.file[f.idx], rows.t[f.idx]
    same_prev = np.r_[False, file[1:] == file[:-1]]
    # a line stands for the time to the next line of its file carrying the quantity, at most max_gap_s
    # (SQL: least(epoch(lead(ts)) - epoch(ts), max_gap_s), NULL for a file's last line, summed as 0)
    dt = np.zeros(n)
    nxt = np.flatnonzero(same_prev[1:])
    dt[nxt] = np.minimum(t[nxt + 1] / 1e6 - t[nxt] / 1e6, max_gap_s)
    crossed = f.crossed
    ci = np.flatnonzero(crossed)
    dep = np.where(rows.deployment[f.idx] < 0, len(rows.deployments) - 1, rows.deployment[f.idx])
    day = _day(t)
    day0 = int(day.min())
    kind = np.where(rows.kind[f.idx] < 0, len(rows.kinds) - 1, rows.kind[f.idx])
    estimated = np.zeros(n, bool)
    if f.quantity == "decode_batch_size" and "stats" in rows.kinds:
        estimated = kind == rows.kinds.index("stats")
    # episodes: runs of consecutive crossing lines of one file (SQL: gaps and islands per feature and file),
    # grouped with the deployment as the SQL groups them; an episode counts on the day it began
    opens = crossed & ~(np.r_[False, crossed[:-1]] & same_prev)
    n_dep = len(rows.deployments)
    ep_key = np.cumsum(opens)[ci] * n_dep + dep[ci]
    ep_ids, ep_of = np.unique(ep_key, return_inverse=True)
    ep_seconds = np.bincount(ep_of, weights=dt[ci], minlength=ep_ids.size)
    ep_day = np.full(ep_ids.size, np.iinfo(np.int64).max)
    np.minimum.at(ep_day, ep_of, day[ci])
    out = []
    for level, key, ep_group, size in (("deployment", dep, ep_ids % n_dep, n_dep),
                                       ("day", day - day0, ep_day - day0, int(day.max()) - day0 + 1)):
        counts = np.bincount(key, minlength=size)
        groups = np.flatnonzero(counts)
        crossed_rows = np.bincount(key[ci], minlength=size)
        seconds = np.bincount(key, weights=dt, minlength=size)
        crossed_seconds = np.bincount(key[ci], weights=dt[ci], minlength=size)
        max_value = np.full(size, -np.inf)
        np.maximum.at(max_value, key, f.value)
        first = np.full(size, np.iinfo(np.int64).max)
        last = np.full(size, np.iinfo(np.int64).min)
        np.minimum.at(first, key[ci], t[ci])
        np.maximum.at(last, key[ci], t[ci])
        off_rows = np.bincount(key[rows.cuda_graph_off[f.idx]], minlength=size)
        est = np.bincount(key[estimated], minlength=size) > 0
        present = (np.bincount(key * len(rows.kinds) + kind, minlength=size * len(rows.kinds)) > 0).reshape(
            size, len(rows.kinds))
        episodes = np.bincount(ep_group, minlength=size)
        longest = np.full(size, np.nan)
        np.fmax.at(longest, ep_group, ep_seconds)
        names = [sorted(k for k, p in zip(rows.kinds, present[g], strict=True) if p and k is not None)
                 for g in groups]
        labels = [rows.deployments[g] for g in groups] if level == "deployment" else \
            [_day_label(g + day0) for g in groups]
        g = groups
        has = crossed_rows[g] > 0
        out.append(pl.DataFrame({
            "feature": [f.feature] * g.size, "level": [level] * g.size, "grp": labels, "rows": counts[g],
            "crossed_rows": crossed_rows[g], "row_share": crossed_rows[g] / counts[g], "seconds": seconds[g],
            "crossed_seconds": np.where(has, crossed_seconds[g], 0.0),
            "time_share": [c / s if s != 0 else None for c, s in zip(np.where(has, crossed_seconds[g], 0.0),
                                                                     seconds[g], strict=True)],
            "episodes": episodes[g], "longest_episode_s": [None if np.isnan(x) else x for x in longest[g]],
            "max_value": max_value[g],
            "first_crossed": [_stamp(x) if h else None for x, h in zip(first[g], has, strict=True)],
            "last_crossed": [_stamp(x) if h else None for x, h in zip(last[g], has, strict=True)],
            "kinds": [",".join(k) if k else None for k in names], "estimated": est[g], "cuda_graph_off_rows":
            off_rows[g],
        }, schema=STEPS_SCHEMA))  # fmt: skip
    return pl.concat(out)


def _stamp(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=int(us))


def arrival_flags(con: duckdb.DuckDBPyConnection, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    """The crossing rows of queries/threshold_arrivals.sql: (rid, feature, value, crossed, estimated) of each
    request of thr_requests that arrived while its deployment's latest line of a step feature (at most
    `max_gap_s` old) was over the threshold. Among lines of one deployment logged at the same instant, the
    last one (by file, then line) counts as the latest."""
    req = fetch(con, "select rid, deployment, epoch_us(arrival) as t from thr_requests "
                     "where arrival is not null and deployment is not null")
    codes = {d: i for i, d in enumerate(rows.deployments) if d is not None}
    r_dep = np.array([codes.get(d, -1) for d in req["deployment"].to_list()], dtype=np.int64)
    r_t, rid = req["t"].to_numpy(), req["rid"].to_numpy()
    frames = []
    for f in features(con, rows):
        dep, t = rows.deployment[f.idx], rows.t[f.idx]
        # per deployment in time order; at one instant the later file, then the later line, last
        order = np.lexsort((f.idx, t, dep))
        d_s, t_s = dep[order], t[order]
        pos = np.full(rid.size, -1)
        for d in np.unique(r_dep[r_dep >= 0]):
            lo, hi = np.searchsorted(d_s, d, "left"), np.searchsorted(d_s, d, "right")
            if lo == hi:
                continue
            sel = np.flatnonzero(r_dep == d)
            k = np.searchsorted(t_s[lo:hi], r_t[sel], "right") - 1  # the last line at or before the arrival
            pos[sel[k >= 0]] = lo + k[k >= 0]
        hit = np.flatnonzero(pos >= 0)
        line = order[pos[hit]]
        age = r_t[hit] / 1e6 - t[line] / 1e6
        crossed = f.crossed[line] & (age <= max_gap_s)
        frames.append(pl.DataFrame({"rid": rid[hit[crossed]], "feature": [f.feature] * int(crossed.sum()),
                                    "value": f.value[line[crossed]]}))
    schema = {"rid": pl.Int64, "feature": pl.Utf8, "value": pl.Float64}
    return pl.concat([pl.DataFrame(schema=schema), *[x.cast(schema) for x in frames]]).with_columns(
        crossed=pl.lit(True), estimated=pl.lit(True))
