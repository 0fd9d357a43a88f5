"""Step-scoped threshold crossings (the product path), computed with NumPy: how often, how long and in how
many episodes each feature's quantity was over its threshold, per deployment and per day, and which requests
arrived while their deployment was over it.

The lines are read once (queries/threshold_step_rows.sql: one row per line with every quantity), put in file
order once, and each feature is a mask over them. A SQL statement of the same answers over one row per line
and feature (tests/oracle/: a test oracle, not run by the product) gives the same rows; tests/test_thresholds.py
compares both.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl

from attribution import joincache, kept, queries

if TYPE_CHECKING:
    from attribution.schema import PolarsType

DAY_US = 86_400_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
QUANTITIES = ("decode_batch_size", "running_requests", "prefill_batch_tokens", "step_tokens", "state_usage",
              "kv_usage", "waiting_requests", "preemptions")
STEPS_SCHEMA: dict[str, PolarsType] = {
    "feature": pl.Utf8, "level": pl.Utf8, "grp": pl.Utf8, "rows": pl.Int64, "crossed_rows": pl.Int64,
    "row_share": pl.Float64, "seconds": pl.Float64, "crossed_seconds": pl.Float64, "time_share": pl.Float64,
    "episodes": pl.Int64, "longest_episode_s": pl.Float64, "max_value": pl.Float64,
    "first_crossed": pl.Datetime("us", "UTC"), "last_crossed": pl.Datetime("us", "UTC"), "kinds": pl.Utf8,
    "estimated": pl.Boolean, "cuda_graph_off_rows": pl.Int64,
}
# Which step line a request met on arrival, stated once for this kernel and the test oracle
# (tests/oracle/threshold_arrivals.sql cites it): ties at one instant resolve the same way in both.
ARRIVAL_TIE_RULE = (
    "the latest line of the request's deployment carrying the quantity at or before its arrival; among lines "
    "logged at the same instant, the one of the last file (by file name), then the last line of that file")
# The last step rows read on a connection over a store commit's cached join (whose lines cannot change), with
# what they were read for: the thresholds and compare pages of a dashboard view read the same lines.
_KEPT: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, tuple[tuple, StepRows]] = weakref.WeakKeyDictionary()
_UNKEPT: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()  # keep_step_rows(con, False)
_WHOLE: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()  # keep_step_rows(con, False, whole=True)
# Connections sharing the step rows of every line of their commit (share_step_rows: a dashboard's cursors), and
# where they keep them; a window's rows are cut from those (_window_rows) instead of read.
_SHARED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Sharing] = weakref.WeakKeyDictionary()
SHARED_LINES_MAX = 4_000_000  # above: every line held (~90 B each) costs more memory than a server can spare
SHARED_COUNTS = 64  # narrowings whose line count is kept per commit
SHARED_KEEP = 1  # sets of lines kept per commit (one engine_steps narrowing: ~220 MB at 2.5M lines)
SHARED_CUTS = 2  # windows' rows (and their steps tables) kept per commit, given again for the same window
STEP_BATCH_ROWS = 1 << 18  # step lines streamed per batch (_read_step_rows): ~25 MB of DuckDB's result at a time


@dataclass
class StepRows:
    """Every step line of the window in (file, time, line) order, as arrays. Deployments and kinds are codes
    into their lists, whose last entry is None (the line does not say)."""

    file: np.ndarray
    t: np.ndarray
    day: np.ndarray  # UTC days since the epoch
    deployment: np.ndarray
    deployments: list[str | None]
    kind: np.ndarray
    kinds: list[str | None]
    cuda_graph_off: np.ndarray
    config: np.ndarray  # hash of the config id
    values: dict[str, tuple[np.ndarray, np.ndarray]]  # quantity -> (values, present)

    @property
    def size(self) -> int:
        return int(self.t.size)


def _codes(s: pl.Series) -> tuple[np.ndarray, list[Any]]:
    """Dense codes of a string column and the values they stand for; a null is the last code (None)."""
    values = s.drop_nulls().unique().sort().to_list()
    codes = s.cast(pl.Enum(values)).to_physical().fill_null(len(values)).to_numpy()
    return codes.astype(np.int16 if len(values) < 32_000 else np.int64), [*values, None]


def file_order(file: np.ndarray, t: np.ndarray, line: np.ndarray) -> np.ndarray | slice:
    """The permutation putting rows in (file, time, line) order: none when they already are; by (file, line)
    when time never goes back within a file in that order (log files are written in time order); else a full
    three-key sort. Rows strictly ascending by (file, line) whose time never goes back within a file are in
    (file, time, line) order: one key and two comparisons per row check it."""
    key = (file.astype(np.int64) << 40) | line

    def in_order(k: np.ndarray, f: np.ndarray, tt: np.ndarray) -> bool:
        return bool(np.all(np.diff(k) > 0)) and bool(np.all((np.diff(tt) >= 0) | (np.diff(f) != 0)))

    if in_order(key, file, t):
        return slice(None)
    order = np.argsort(key, kind="stable")
    if in_order(key[order], file[order], t[order]):
        return order
    return np.lexsort((line, t, file))


# thr_settings as crossings.register last registered it on a connection (a serial per registration), and
# threshold_step_settings read over it: step_rows, features and arrival_flags each ask for it, and on Spark
# each query has a fixed cost of a job
_REGISTERED: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_READ: weakref.WeakKeyDictionary[Any, tuple[int, pl.DataFrame]] = weakref.WeakKeyDictionary()
_SERIALS = itertools.count(1)


def settings_registered(con: Any) -> None:
    """crossings.register registered new thr_settings on `con`: the step settings are read again."""
    _REGISTERED[con] = next(_SERIALS)


def step_settings(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """queries/threshold_step_settings.sql, read once per registration of thr_settings by crossings.register
    (a thr_settings made otherwise is read each time)."""
    serial = _REGISTERED.get(con)
    if serial is not None and (read := _READ.get(con)) is not None and read[0] == serial:
        return read[1]
    df = queries.run(con, "threshold_step_settings")
    if serial is not None:
        _READ[con] = (serial, df)
    return df


@dataclass
class SharedStepRows:
    """Every step line of a commit, per (engine_steps view, engine starts) as their StepRows (the last
    SHARED_KEEP), shared by the connections share_step_rows names; `lock` guards it across their threads."""

    rows: OrderedDict[tuple, StepRows] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    lines: dict[tuple, int] = field(default_factory=dict)  # the step lines of each narrowing, counted once
    every: tuple | None = None  # the key of the commit's every line (its engine_steps not narrowed), once read
    # whether the commit's engine_steps (not narrowed) hold a Prometheus scrape row: asked once (scrapes_possible)
    scrapes: Callable[[], bool] | None = None
    scraped: bool | None = None
    # the last windows cut (SHARED_CUTS), the same rows given again for the same window of the same lines, and
    # the steps tables of the last rows (SHARED_CUTS): a workload filter leaves a window's lines as they are
    cuts: OrderedDict[tuple, StepRows] = field(default_factory=OrderedDict)
    tables: OrderedDict[int, tuple[StepRows, pl.DataFrame, float, pl.DataFrame]] = field(
        default_factory=OrderedDict)


def share_step_rows(con: duckdb.DuckDBPyConnection, shared: SharedStepRows, *, every_line: bool = False,
                    deployments: tuple[str | None, ...] | None = None,
                    periods: list[tuple[str, int, int | None]] | None = None) -> None:
    """Declare that `con` (a dashboard view's cursor on a store commit) shares `shared` with the other cursors of
    its commit: step_rows on it reads every line once per engine_steps view and engine starts (a workload
    filter leaves both as they are) and cuts each window's rows from them, where the store has at most
    SHARED_LINES_MAX lines. `every_line`: `con`'s engine_steps and engine starts are the commit's own (not
    narrowed). `deployments`: they are narrowed to these deployments alone (None: a line without one), so its
    rows are also cut from every line's where a cursor of `every_line` read them: a line's engine start is one
    of its own deployment's, the same among the narrowed starts. `periods`: they are narrowed to these periods
    alone (deployment, from its engine start, until the deployment's next one, in microseconds since the epoch;
    None: open), each from an engine start that the narrowed starts keep: cut alike where every line of a period
    was assigned that period's start among every start (then it is among the narrowed ones too)."""
    _SHARED[con] = _Sharing(shared, every_line, deployments, periods)


@dataclass(frozen=True)
class _Sharing:
    """What share_step_rows was told of one cursor: the commit's shared rows and how its engine_steps and engine
    starts are narrowed (its arguments)."""

    shared: SharedStepRows
    every_line: bool
    deployments: tuple[str | None, ...] | None
    periods: list[tuple[str, int, int | None]] | None


def scrapes_possible(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether any window of `con`'s engine_steps may hold a Prometheus scrape row: False only on a cursor
    sharing its commit's rows (share_step_rows) whose commit's engine_steps, not narrowed, hold none at all (what
    its `scrapes` says, asked once per commit): then no window and no narrowing of them holds one, and their
    scrape intervals (queries/scrape_intervals_by_deployment.sql, a scan of every line per window: 0.9 CPU s at
    2.4M lines) are none."""
    sharing = _SHARED.get(con)
    ask = sharing.shared.scrapes if sharing is not None else None
    if sharing is None or ask is None:
        return True
    shared = sharing.shared
    with shared.lock:
        if shared.scraped is None:
            shared.scraped = ask()
        return shared.scraped


def step_rows(con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
              ) -> StepRows:
    """queries/threshold_step_rows.sql (thr_starts and thr_settings must be registered), in (file, time, line)
    order, with the quantities of the evaluated step features only. On a connection reading a store commit
    (joincache.attached) the last rows read are kept and given again to a call for the same window, the same
    engine starts and no other quantities; on one sharing its commit's lines (share_step_rows), cut from
    those."""
    needed = [q for q in QUANTITIES if q in set(step_settings(con)["quantity"].to_list())]
    if con in _SHARED and (cut := _shared_rows(con, since, until, needed)) is not None:
        return cut
    unkept = con in _UNKEPT
    whole = unkept and con in _WHOLE and (since, until) != (None, None) and _holds_every_line(con, since, until)
    if whole:  # the window's rows are every day's: read and kept as those
        since = until = None
    key = _kept_key(con, since, until) if not unkept or con in _WHOLE else None
    kept = _KEPT.get(con) if key is not None else None
    if kept is not None and kept[0] == key and set(needed) <= kept[1].values.keys():
        if unkept:  # (given once)
            _KEPT.pop(con, None)
        return kept[1]
    rows = _read_step_rows(con, since, until, needed)
    if key is not None and (whole or not unkept):
        _KEPT[con] = (key, rows)
    return rows


def keep_step_rows(con: duckdb.DuckDBPyConnection, keep: bool, *, whole: bool = False) -> None:
    """Whether step_rows keeps the last rows read on `con` for a later call (by default it does, over a cached
    join). A report reads each set once (its thresholds the window's lines, its changes' compare every day's
    read): kept, they would stay beside the compare's bootstrap (~165 MB at 1M requests). With `whole` (and
    `keep` False), the rows of a window holding every step line `con` reads are kept still, as every day's
    rows, and given once to the next read of every day (the report's compare), then dropped."""
    if keep:
        _UNKEPT.discard(con)
    else:
        _UNKEPT.add(con)
        _KEPT.pop(con, None)
    if whole and not keep:
        _WHOLE.add(con)
    else:
        _WHOLE.discard(con)


def _holds_every_line(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> bool:
    """Whether [since, until) holds every timed step line on `con`: then its step rows are every day's (the
    same lines, files and file numbers, and each file's decode lines)."""
    if not joincache.attached(con):
        return False
    return not queries.run(con, "threshold_step_lines_outside", since=since, until=until).item()


def _kept_key(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> tuple | None:
    """What step rows depend on besides the commit: the window, the engine_steps view (a dashboard narrows it)
    and the registered engine starts."""
    if not joincache.attached(con):
        return None
    view = queries.view_definitions(con, ("engine_steps",))
    starts = con.execute("select config_id, deployment, engine, ts from thr_starts order by all").fetchall()
    return since, until, str(view), tuple(starts)


def _shared_rows(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
                 needed: list[str]) -> StepRows | None:
    """The window's rows cut from every line's (read once per engine_steps view and engine starts on the
    commit), or None where they are not (no cached join, too many lines)."""
    key = _kept_key(con, None, None)
    if key is None:
        return None
    sharing = _SHARED[con]
    shared = sharing.shared
    # decode_batch_size is derived from the window's running_requests (decode_batch_sizes): a stats line carries
    # it when its file has no decode line in the window, which every line's rows cannot say
    wanted = _read_quantities(needed)
    with shared.lock:
        every = shared.rows.get(shared.every) if shared.every is not None else None
        if every is not None and set(wanted) <= every.values.keys():  # a narrowing cut from every line's rows
            keep = None
            if sharing.deployments is None and sharing.periods is not None:
                keep = _in_periods(con, every, sharing.periods)
            if sharing.deployments is not None or keep is not None:
                assert shared.every is not None
                shared.rows.move_to_end(shared.every)
                periods = tuple(sharing.periods) if keep is not None and sharing.periods is not None else None
                return _cut(shared, (key, since, until, tuple(needed), sharing.deployments, periods),
                            lambda: _window_rows(every, since, until, needed, sharing.deployments, keep=keep))
        whole = shared.rows.get(key)
        if whole is None or not set(wanted) <= whole.values.keys():
            made = None
            if whole is None:
                # every line is read whatever the window, and kept while the store has few enough (counted once
                # per narrowing); else the window's alone, as on any connection. A window's own read costs
                # nearly every line's: threshold_step_rows.sql scans the engine_steps view (the log lines and
                # the deduplicated scrapes) whole whatever the window (1M-request store of 2.4M lines: one
                # day's 14,621 lines 4.2 CPU s, every line 5.2 s), so the rows of every line, cut for each
                # later window (0.01-0.2 s), cost less from the second window on
                if key not in shared.lines:
                    if len(shared.lines) >= SHARED_COUNTS:
                        shared.lines.clear()
                    # (the commit's every line kept on disk by a command before, its preparation: no count)
                    made = _every_line_rows(con, key, wanted, read=False) if sharing.every_line else None
                    shared.lines[key] = made.size if made is not None else int(queries.run(
                        con, "threshold_step_lines_count", since=None, until=None).row(0)[0])
                if shared.lines[key] > SHARED_LINES_MAX:
                    return None
            if whole is not None:  # (a catalogue evaluating other quantities: read with the ones kept)
                wanted = [q for q in QUANTITIES if q in wanted or q in whole.values]
            if made is None:
                made = (_every_line_rows(con, key, wanted, read=True) if sharing.every_line
                        else _read_step_rows(con, None, None, wanted))
            assert made is not None
            whole = shared.rows[key] = made
            shared.cuts.clear()  # (cut from lines no longer kept, or fewer quantities)
            if sharing.every_line:
                shared.every = key
            while len(shared.rows) > SHARED_KEEP:
                shared.rows.popitem(last=False)
        shared.rows.move_to_end(key)
        return _cut(shared, (key, since, until, tuple(needed), None, None),
                    lambda: _window_rows(whole, since, until, needed))


def _cut(shared: SharedStepRows, key: tuple, cut: Callable[[], StepRows]) -> StepRows:
    """`cut()`, or the rows it gave for `key` (the cursor's lines, the window, the quantities, the narrowing)
    since every line's were last read (the last SHARED_CUTS): steps_table gives their table again."""
    rows = shared.cuts.get(key)
    if rows is None:
        rows = shared.cuts[key] = cut()
        while len(shared.cuts) > SHARED_CUTS:
            shared.cuts.popitem(last=False)
    shared.cuts.move_to_end(key)
    return rows


EVERY_LINE_VIEWS = ("engine_steps", "raw_engine_steps")  # what every line's rows read (with thr_starts)


def _every_line_rows(con: duckdb.DuckDBPyConnection, key: tuple, wanted: list[str], *, read: bool
                     ) -> StepRows | None:
    """Every line's rows of the commit (the read quantities `wanted`, the engine starts of `key`), kept on disk
    for it as its other per-commit rows are (attribution.kept: ~60-90 B a line; a newer commit's replace them):
    read back where a command (the commit's preparation, or a dashboard's first change) read them before, else
    read (when `read`; None when not) and kept."""
    parts = (queries.load("threshold_step_rows").sql, key[3], tuple(wanted))
    if not read and not kept.has(con, "threshold_step_rows", parts, EVERY_LINE_VIEWS):
        return None
    made: list[StepRows] = []

    def compute() -> pl.DataFrame:
        made.append(_read_step_rows(con, None, None, wanted))
        return _rows_frame(made[0])

    frame = kept.kept(con, "threshold_step_rows", parts, EVERY_LINE_VIEWS, compute)
    return made[0] if made else _frame_rows(frame, wanted)


def _rows_frame(rows: StepRows) -> pl.DataFrame:
    """`rows` as a frame (_frame_rows gives them back): deployments and kinds as Enums of their lists."""
    def named(name: str, codes: np.ndarray, values: list[str | None]) -> pl.Series:
        cats = [v for v in values if v is not None]
        idx = pl.Series(codes).cast(pl.UInt32)
        return pl.Series(name, cats, dtype=pl.Enum(cats)).gather(pl.select(pl.when(idx < len(cats)).then(idx))
                                                                 .to_series())

    cols = [pl.Series("file", rows.file), pl.Series("t", rows.t), named("deployment", rows.deployment,
            rows.deployments), named("kind", rows.kind, rows.kinds),
            pl.Series("cuda_graph_off", rows.cuda_graph_off), pl.Series("config", rows.config)]
    for q, (v, present) in rows.values.items():
        cols += [pl.Series(f"value_{q}", v), pl.Series(f"present_{q}", present)]
    return pl.DataFrame(cols)


def _frame_rows(frame: pl.DataFrame, wanted: list[str]) -> StepRows:
    """The StepRows `_rows_frame` made `frame` of (writable arrays of their own, not the file's)."""
    def array(name: str) -> np.ndarray:
        return np.array(frame[name].to_numpy(), copy=True)

    def codes(name: str) -> tuple[np.ndarray, list[str | None]]:
        values: list[str | None] = [*frame[name].dtype.categories.to_list(), None]  # type: ignore[attr-defined]
        code = frame[name].to_physical().fill_null(len(values) - 1).to_numpy()
        return code.astype(np.int16 if len(values) - 1 < 32_000 else np.int64), values

    t = array("t")
    dep, deps = codes("deployment")
    kind, kinds = codes("kind")
    return StepRows(file=array("file"), t=t, day=_day(t), deployment=dep, deployments=deps, kind=kind,
                    kinds=kinds, cuda_graph_off=array("cuda_graph_off"), config=array("config"),
                    values={q: (array(f"value_{q}"), array(f"present_{q}")) for q in wanted})


def _micros(t: datetime) -> int:
    """Microseconds since the epoch (a naive time is UTC, as on the dashboard's connections)."""
    return ((t if t.tzinfo else t.replace(tzinfo=UTC)) - EPOCH) // timedelta(microseconds=1)


def _in_periods(con: duckdb.DuckDBPyConnection, whole: StepRows, periods: list[tuple[str, int, int | None]]
                ) -> np.ndarray | None:
    """The rows of `whole` in `periods` (share_step_rows), or None where a period's start is not one registered
    start of its deployment at that instant, or a line of it was assigned another start (read them instead)."""
    starts: dict[tuple[str, int], list[int]] = {}
    for dep, ts, h in queries.run(con, "threshold_start_hashes").iter_rows():
        starts.setdefault((dep, ts), []).append(h)
    codes = {d: i for i, d in enumerate(whole.deployments) if d is not None}
    keep = np.zeros(whole.size, bool)
    for dep, started, ended in periods:
        if len(hashes := starts.get((dep, started), [])) != 1:
            return None
        if dep not in codes:
            continue
        mask = (whole.deployment == codes[dep]) & (whole.t >= started)
        if ended is not None:
            mask &= whole.t < ended
        if not np.all(whole.config[mask] == np.uint64(hashes[0])):
            return None
        keep |= mask
    return keep


def _window_rows(whole: StepRows, since: datetime | None, until: datetime | None, needed: list[str],
                 deployments: tuple[str | None, ...] | None = None, keep: np.ndarray | None = None) -> StepRows:
    """The rows of [since, until) of every line's rows `whole` (of `deployments` only, or the rows `keep`, when
    given): the rows the window's read gives (its file numbers aside, which only tell files apart), in the same
    order."""
    keep = np.ones(whole.size, bool) if keep is None else keep.copy()
    if deployments is not None:
        keep &= np.isin(whole.deployment, [i for i, d in enumerate(whole.deployments) if d in deployments])
    if since is not None:
        keep &= whole.t >= _micros(since)
    if until is not None:
        keep &= whole.t < _micros(until)
    idx = slice(None) if keep.all() else np.flatnonzero(keep)
    file, kind = whole.file[idx], whole.kind[idx]
    values = {q: (whole.values[q][0][idx], whole.values[q][1][idx]) for q in needed if q != "decode_batch_size"}
    if "decode_batch_size" in needed:  # (the window's own: its files' decode lines in the window)
        running, present = whole.values["running_requests"]
        values["decode_batch_size"] = decode_batch_sizes(file, kind, whole.kinds, running[idx], present[idx])
    return StepRows(file=file, t=whole.t[idx], day=whole.day[idx], deployment=whole.deployment[idx],
                    deployments=whole.deployments, kind=kind, kinds=whole.kinds,
                    cuda_graph_off=whole.cuda_graph_off[idx], config=whole.config[idx], values=values)


def decode_batch_sizes(file: np.ndarray, kind: np.ndarray, kinds: list[str | None], running: np.ndarray,
                       present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """decode_batch_size of each step row (its value, 0 where absent, and whether present) from the rows'
    running requests: a decode line's, else a periodic (stats) line's where its file logs no decode line among
    these rows (a window's: its file may log decode lines outside it). The rule's one statement, for the rows
    read (queries/threshold_step_rows.sql) and those cut from every line's (`_window_rows`)."""
    decode, stats = (kinds.index(k) if k in kinds else -1 for k in ("decode", "stats"))
    has_decode = np.zeros(int(file.max(initial=0)) + 1, bool)
    has_decode[file[kind == decode]] = True
    present = present & ((kind == decode) | ((kind == stats) & ~has_decode[file]))
    return np.where(present, running, 0.0), present


def _read_quantities(needed: list[str]) -> list[str]:
    """The quantities read (queries/threshold_step_rows.sql's columns) for those `needed`: decode_batch_size
    is derived from running_requests (decode_batch_sizes), which is read for it."""
    return [q for q in QUANTITIES if (q in needed and q != "decode_batch_size")
            or (q == "running_requests" and "decode_batch_size" in needed)]


def _read_step_rows(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None,
                    needed: list[str]) -> StepRows:
    read = _read_quantities(needed)
    cols = ["file_id", "line", "deployment", "t", "kind", "cuda_graph", "config_hash", *read]
    # each batch made NumPy columns as DuckDB streams it: on millions of lines DuckDB's whole result, its Arrow
    # table and a Polars frame alive at once set the thresholds' peak (6M requests: 15M lines, ~800 MB more)
    parts = queries.run_folded(con, "threshold_step_rows", cols, partial(_step_batch, read=read),
                               batch_rows=STEP_BATCH_ROWS, since=since, until=until)
    file, t, line = (_joined(parts, c) for c in ("file", "t", "line"))
    order = file_order(file, t, line)
    del line
    t, file = t[order], file[order]
    dep, deps = _joined_codes(parts, "deployment")
    kind, kinds = _joined_codes(parts, "kind")
    dep, kind = dep[order], kind[order]
    off, config = _joined(parts, "off")[order], _joined(parts, "config")[order]
    got = {}
    for name in read:
        v = _joined(parts, name)
        v = v[order] if isinstance(order, np.ndarray) else v  # (writable: zeroed below)
        present = ~np.isnan(v)
        v[~present] = 0.0
        got[name] = (v, present)
    values = {q: decode_batch_sizes(file, kind, kinds, *got["running_requests"]) if q == "decode_batch_size"
              else got[q] for q in needed}
    return StepRows(file=file, t=t, day=_day(t), deployment=dep, deployments=deps, kind=kind, kinds=kinds,
                    cuda_graph_off=off, config=config, values=values)


def _step_batch(df: pl.DataFrame, read: list[str]) -> dict[str, Any]:
    """One streamed batch of threshold_step_rows as NumPy columns (a string column as codes and their values,
    `_codes`; a quantity as float64, NaN where NULL)."""
    return {"file": df["file_id"].to_numpy().astype(np.int32), "t": df["t"].to_numpy(),
            "line": df["line"].fill_null(0).to_numpy(), "deployment": _codes(df["deployment"]),
            "kind": _codes(df["kind"]), "off": (df["cuda_graph"] == False).fill_null(False).to_numpy(),  # noqa: E712
            "config": df["config_hash"].to_numpy(),
            **{name: df[name].cast(pl.Float64).to_numpy() for name in read}}


def _joined(parts: list[dict[str, Any]], name: str) -> np.ndarray:
    """Column `name` of every batch, in order, each batch's part dropped as it is joined (a new array)."""
    return np.concatenate([p.pop(name) for p in parts]) if parts else np.empty(0)


def _joined_codes(parts: list[dict[str, Any]], name: str) -> tuple[np.ndarray, list[Any]]:
    """A string column coded per batch (`_codes`) as one column's codes and values, as `_codes` of the whole
    column gives them."""
    coded = [p.pop(name) for p in parts]
    values = pl.Series([v for _, vs in coded for v in vs[:-1]], dtype=pl.Utf8).unique().sort().to_list()
    at = {v: i for i, v in enumerate(values)}
    codes = np.concatenate([np.array([*(at[v] for v in vs[:-1]), len(values)], np.int64)[c] for c, vs in coded]
                           ) if coded else np.empty(0, np.int64)
    return codes.astype(np.int16 if len(values) < 32_000 else np.int64), [*values, None]


@dataclass
class Feature:
    """One step feature's lines: those carrying its quantity whose engine start evaluates it."""

    feature: str
    quantity: str
    idx: np.ndarray  # rows of StepRows, in file order
    value: np.ndarray
    crossed: np.ndarray
    lines: tuple  # what selects the lines (quantity, starts evaluating it): features sharing it share `idx`


_OPS = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}


def features(con: duckdb.DuckDBPyConnection, rows: StepRows, by_lines: bool = False) -> Iterator[Feature]:
    """Each evaluated step feature of thr_settings, over `rows`: its lines, values and crossings, one at a time
    (each feature's arrays are the size of its lines: made as they are read, not all at once). In settings
    order, or with `by_lines` the features sharing their lines together (in order of first appearance), so a
    caller can drop what it keeps per set of lines when the set changes."""
    settings = step_settings(con)
    if not settings.height or not rows.size:
        return
    # the rows' engine starts as indices into the starts that have step settings (-1: none)
    cfgs = np.unique(settings["config_hash"].to_numpy())
    pos = np.minimum(np.searchsorted(cfgs, rows.config), cfgs.size - 1)
    row_cfg = np.where(cfgs[pos] == rows.config, pos, -1)
    specs = []
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
        specs.append((feature, quantity, op, thr, (quantity, evaluated.tobytes())))
    if by_lines:
        first: dict[tuple[str, bytes], int] = {}
        for spec in specs:
            first.setdefault(spec[4], len(first))
        specs.sort(key=lambda spec: first[spec[4]])  # (stable: settings order within a set of lines)
    subsets: dict[tuple, np.ndarray] = {}
    for feature, quantity, op, thr, lines in specs:
        values, present = rows.values[quantity]
        if lines not in subsets:
            if by_lines:
                subsets.clear()  # (no later feature reads the previous lines)
            evaluated = np.frombuffer(lines[1], bool)
            subsets[lines] = np.flatnonzero(present & evaluated[row_cfg])
        idx = subsets[lines]
        value = values[idx]
        threshold = thr[row_cfg[idx]]
        with np.errstate(invalid="ignore"):
            crossed = _OPS[op](value, threshold) if op in _OPS else np.zeros(idx.size, bool)
        yield Feature(feature, quantity, idx, value, crossed & ~np.isnan(threshold), lines)


def _day(t: np.ndarray) -> np.ndarray:
    return np.floor_divide(t, DAY_US)


def _day_label(d: int) -> str:
    return (EPOCH + timedelta(days=int(d))).strftime("%Y-%m-%d")


def steps_table(con: duckdb.DuckDBPyConnection, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    """Per step feature and deployment / day: rows, time and episodes over the threshold, over `rows` and the
    connection's thr_settings (the columns of STEPS_SCHEMA). On a cursor sharing its commit's rows
    (share_step_rows), the table of the same rows object (step_rows gives it again for the same window) with the
    same step settings is given again (the last SHARED_CUTS)."""
    sharing = _SHARED.get(con)
    settings = step_settings(con)
    if sharing is not None:
        with sharing.shared.lock:
            got = sharing.shared.tables.get(id(rows))
        if got is not None and got[0] is rows and got[2] == max_gap_s and got[1].equals(settings):
            return got[3]
    out = _steps_table(con, rows, max_gap_s)
    if sharing is not None:
        with sharing.shared.lock:
            tables = sharing.shared.tables
            tables[id(rows)] = (rows, settings, max_gap_s, out)
            tables.move_to_end(id(rows))
            while len(tables) > SHARED_CUTS:
                tables.popitem(last=False)
    return out


def _steps_table(con: duckdb.DuckDBPyConnection, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    shared: dict[tuple, _Lines] = {}
    frames = []
    for f in features(con, rows, by_lines=True):  # (the frame is sorted below: any feature order will do)
        if f.lines not in shared:
            last = next(iter(shared.values()), None)
            shared.clear()  # (features come grouped by their lines: no later one reads the previous lines)
            if last is not None and np.array_equal(last.idx, f.idx):  # (another quantity on the same lines)
                shared[f.lines] = last
        frames.append(_feature_steps(f, rows, max_gap_s, shared))
        del f
    out = pl.concat([pl.DataFrame(schema=STEPS_SCHEMA), *[f for f in frames if f.height]])
    return out.sort("feature", "level", "grp", nulls_last=True, maintain_order=True)


@dataclass
class _Lines:
    """What the features sharing one set of lines (of one quantity or more) share: times, gaps, deployments,
    days, kinds; per level the counts over them and, per quantity, the maximum and estimated flags."""

    idx: np.ndarray
    same_prev: np.ndarray
    t: np.ndarray
    dt: np.ndarray
    dep: np.ndarray
    day: np.ndarray
    day0: int
    kind: np.ndarray
    off: np.ndarray
    per_level: dict[tuple[str, str], tuple] = field(default_factory=dict)


def _lines(f: Feature, rows: StepRows, max_gap_s: float) -> _Lines:
    n = f.idx.size
    file, t = rows.file[f.idx], rows.t[f.idx]
    same_prev = np.zeros(n, bool)
    np.equal(file[1:], file[:-1], out=same_prev[1:])
    # a line stands for the time to the next line of its file carrying the quantity, at most max_gap_s
    # (SQL: least(epoch(lead(ts)) - epoch(ts), max_gap_s), NULL for a file's last line, summed as 0)
    seconds = t / 1e6
    dt = np.zeros(n)
    np.subtract(seconds[1:], seconds[:-1], out=dt[:-1])
    np.minimum(dt, max_gap_s, out=dt)
    dt[:-1][~same_prev[1:]] = 0.0
    day = rows.day[f.idx]
    return _Lines(f.idx, same_prev, t, dt, rows.deployment[f.idx], day, int(day.min()), rows.kind[f.idx],
                  rows.cuda_graph_off[f.idx])


def _feature_steps(f: Feature, rows: StepRows, max_gap_s: float, shared: dict[tuple, _Lines]) -> pl.DataFrame:
    n = f.idx.size
    if not n:
        return pl.DataFrame(schema=STEPS_SCHEMA)
    if f.lines not in shared:
        shared[f.lines] = _lines(f, rows, max_gap_s)
    ln = shared[f.lines]
    same_prev, t, dt, dep, day, day0, kind = ln.same_prev, ln.t, ln.dt, ln.dep, ln.day, ln.day0, ln.kind
    crossed = f.crossed
    ci = np.flatnonzero(crossed)
    # episodes: runs of consecutive crossing lines of one file (SQL: gaps and islands per feature and file),
    # grouped with the deployment as the SQL groups them; an episode counts on the day it began
    # (over the crossing lines only: one opens an episode unless the line before it is a crossing of its file)
    follows = np.zeros(ci.size, bool)
    np.equal(np.diff(ci), 1, out=follows[1:])
    opens = ~(follows & same_prev[ci])
    n_dep = len(rows.deployments)
    ep_key = np.cumsum(opens) * n_dep + dep[ci]
    ep_ids, ep_of = np.unique(ep_key, return_inverse=True)
    ep_seconds = np.bincount(ep_of, weights=dt[ci], minlength=ep_ids.size)
    ep_day = np.full(ep_ids.size, np.iinfo(np.int64).max)
    np.minimum.at(ep_day, ep_of, day[ci])
    out = []
    for level, key, ep_group, size in (("deployment", dep, ep_ids % n_dep, n_dep),
                                       ("day", day - day0, ep_day - day0, int(day.max()) - day0 + 1)):
        # what does not depend on the threshold is the same for every feature on these lines
        if (level, "counts") not in ln.per_level:
            ln.per_level[level, "counts"] = _per_group(key, size, dt, ln, kind, len(rows.kinds))
        counts, groups, seconds, off_rows, present, runs = ln.per_level[level, "counts"]
        if (level, f.quantity) not in ln.per_level:
            ln.per_level[level, f.quantity] = _per_quantity(key, size, f.value, runs, kind, rows.kinds,
                                                            f.quantity)
        max_value, est = ln.per_level[level, f.quantity]
        crossed_rows = np.bincount(key[ci], minlength=size)
        crossed_seconds = np.bincount(key[ci], weights=dt[ci], minlength=size)
        first = np.full(size, np.iinfo(np.int64).max)
        last = np.full(size, np.iinfo(np.int64).min)
        np.minimum.at(first, key[ci], t[ci])
        np.maximum.at(last, key[ci], t[ci])
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


def _per_group(key: np.ndarray, size: int, dt: np.ndarray, ln: _Lines, kind: np.ndarray, n_kinds: int) -> tuple:
    counts = np.bincount(key, minlength=size)
    seconds = np.bincount(key, weights=dt, minlength=size)
    # the lines are in file order, so a key holds for long runs (_per_quantity: the maximum of each run)
    runs = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    off_rows = np.bincount(key[ln.off], minlength=size)
    present = (np.bincount(key * n_kinds + kind, minlength=size * n_kinds) > 0).reshape(size, n_kinds)
    return counts, np.flatnonzero(counts), seconds, off_rows, present, runs


def _per_quantity(key: np.ndarray, size: int, value: np.ndarray, runs: np.ndarray, kind: np.ndarray,
                  kinds: list[str | None], quantity: str) -> tuple[np.ndarray, np.ndarray]:
    """Per group of `key`: the quantity's maximum (of each run's, then of the runs), and whether a value is an
    estimate (decode_batch_size on a stats line: the running requests of the periodic line)."""
    max_value = np.full(size, -np.inf)
    np.maximum.at(max_value, key[runs], np.maximum.reduceat(value, runs))
    est = np.zeros(size, bool)
    if quantity == "decode_batch_size" and "stats" in kinds:
        est = np.bincount(key[kind == kinds.index("stats")], minlength=size) > 0
    return max_value, est


def _stamp(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=int(us))


def _latest_lines(idx: np.ndarray, rows: StepRows, by_time: np.ndarray, member: np.ndarray, r_dep: np.ndarray,
                  r_t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the lines `idx` of StepRows and each request (deployment code r_dep, arrival r_t): the requests that
    have a line of their deployment at or before their arrival (`hit`), that latest line (index into idx) and
    its age in seconds. `by_time` orders all rows by deployment, time and row; `member` is scratch space."""
    member[:] = False
    member[idx] = True
    pos_in_f = np.cumsum(member) - 1  # row -> its index among the lines
    order = by_time[member[by_time]]  # the lines (as rows) in (deployment, time) order
    d_s, t_s = rows.deployment[order], rows.t[order]
    pos = np.full(r_t.size, -1)
    for d in np.unique(r_dep[r_dep >= 0]):
        lo, hi = np.searchsorted(d_s, d, "left"), np.searchsorted(d_s, d, "right")
        if lo == hi:
            continue
        sel = np.flatnonzero(r_dep == d)
        k = np.searchsorted(t_s[lo:hi], r_t[sel], "right") - 1  # the last line at or before the arrival
        pos[sel[k >= 0]] = lo + k[k >= 0]
    hit = np.flatnonzero(pos >= 0)
    line = pos_in_f[order[pos[hit]]]
    return hit, line, r_t[hit] / 1e6 - rows.t[idx[line]] / 1e6


def arrival_flags(con: duckdb.DuckDBPyConnection, rows: StepRows, max_gap_s: float) -> pl.DataFrame:
    """The crossing rows (rid, feature, value, crossed, estimated) of each request of int_threshold_requests that arrived
    while its deployment's latest line of a step feature (at most `max_gap_s` old) was over the threshold; the
    line is the one of ARRIVAL_TIE_RULE."""
    req = queries.run(con, "threshold_arrival_requests")
    codes = {d: i for i, d in enumerate(rows.deployments) if d is not None}
    r_dep = req["deployment"].replace_strict(codes, default=-1, return_dtype=pl.Int64).to_numpy()
    r_t, rid = req["t"].to_numpy(), req["rid"].to_numpy()
    # every line by deployment, then time; at one instant the later file, then the later line, last
    # (ARRIVAL_TIE_RULE; rows are in file, time, line order: the row index breaks the ties)
    by_time = np.lexsort((np.arange(rows.size), rows.t, rows.deployment))
    frames = []
    member = np.zeros(rows.size, bool)
    latest: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # features sharing lines share these
    for f in features(con, rows):
        if f.lines not in latest:
            latest[f.lines] = _latest_lines(f.idx, rows, by_time, member, r_dep, r_t)
        hit, line, age = latest[f.lines]
        crossed = f.crossed[line] & (age <= max_gap_s)
        frames.append(pl.DataFrame({"rid": rid[hit[crossed]], "feature": [f.feature] * int(crossed.sum()),
                                    "value": f.value[line[crossed]]}))
    schema: dict[str, PolarsType] = {"rid": pl.Int64, "feature": pl.Utf8, "value": pl.Float64}
    typed = [x.select(pl.col(c).cast(t) for c, t in schema.items()) for x in frames]
    return pl.concat([pl.DataFrame(schema=schema), *typed]).with_columns(
        crossed=pl.lit(True), estimated=pl.lit(True))
