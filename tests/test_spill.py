"""The wrappers' time ordering (attribution.wrappers.spill): records that never fill a batch are ordered in
memory, exactly as the spilled path's DuckDB ORDER BY orders them (nulls, ties, reversed file order, Loki's
labels joined by stream ordinal). The spilled path is forced here with a one-row batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution.wrappers.base import RECORD_SCHEMA, records_frame
from attribution.wrappers.spill import Spill

T0 = datetime(2025, 3, 1, 12, tzinfo=UTC)
_maybe = st.none().__or__


@st.composite
def batches(draw, with_sid: bool) -> list[pl.DataFrame]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 12))

        def col(s: st.SearchStrategy, n: int = n) -> list:
            return draw(st.lists(s, min_size=n, max_size=n))

        df = pl.DataFrame({
            "line": col(_maybe(st.integers(1, 6))),
            "text": col(st.sampled_from(["a", "b", "é", ""])),
            "rec_ts": col(_maybe(st.integers(0, 3).map(lambda s: T0 + timedelta(seconds=s)))),
            "pod": col(_maybe(st.sampled_from(["p", "q", "P", "p2"]))),
            "container": col(_maybe(st.sampled_from(["c", "d"]))),
            "stream": col(st.sampled_from(["stdout", "stderr"])),
        }, schema_overrides={"line": pl.Int64, "rec_ts": pl.Datetime("us", "UTC"), "pod": pl.Utf8,
                             "container": pl.Utf8})
        df = records_frame(df)
        if with_sid:
            df = df.with_columns(sid=pl.Series(col(_maybe(st.integers(0, 3))), dtype=pl.Int64))
        out.append(df)
    return out


def _sorted(frames: list[pl.DataFrame], spill_rows: int, newest_first: bool, detect: bool,
            labels: pl.DataFrame | None, out_rows: int) -> list[pl.DataFrame]:
    with Spill(spill_rows=spill_rows, newest_first=newest_first, detect=detect) as sp:
        for df in frames:
            sp.add(df)
        return list(sp.sorted(labels=labels, out_rows=out_rows, empty="nothing"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), newest_first=st.booleans(), detect=st.booleans(), with_sid=st.booleans(),
       out_rows=st.integers(1, 40))
def test_in_memory_order_is_the_spilled_order(data, newest_first, detect, with_sid, out_rows):
    frames = data.draw(batches(with_sid), label="frames")
    labels = None
    if with_sid:
        labels = pl.DataFrame({"sid": [0, 1, 2], "pod": ["lp", None, "lq"], "namespace": ["ns", "ns", None]},
                              schema_overrides={"pod": pl.Utf8, "namespace": pl.Utf8})
    memory = _sorted(frames, 1 << 20, newest_first, detect, labels, out_rows)
    spilled = _sorted(frames, 1, newest_first, detect, labels, 1 << 20)
    rows = sum(df.height for df in frames)
    if rows == 0:  # nothing added: the one not-ok record both ways
        assert [df.rows() for df in memory] == [df.rows() for df in spilled] and memory[0]["ok"].to_list() == [False]
        return
    assert all(df.height <= out_rows and list(df.schema.items()) == list(RECORD_SCHEMA.items()) for df in memory)
    got, want = pl.concat(memory), pl.concat(spilled)
    assert got.height == want.height == rows
    assert got.rows() == want.rows()
