"""SGLang batch lines read by position (`_sglang_steps._plain`, the bodies of a plain shape) must give exactly
what PAIR_RE gives (`_paired`) for every body, and the usual headers read by literal tests what LINE_RE gives:
the fast paths change speed, never a value. Bodies come from the committed cases and the real log, plus
deterministic mutations (commas, colons, `=`, spaces, non-ASCII, cuts)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
from conftest import shared
from polars.testing import assert_frame_equal

from attribution.sources import sglang_steps as steps

CASES = Path(__file__).parent / "cases" / "sglang_log"
_BODY_RE = re.compile(r"(?:Prefill|Decode) batch(?:\(mixed #running-req: \d+\))?(?: \[\d+\])?[.,] (.*)$")
_FRAGMENTS = [", ", ",", ": ", ":", "=", ", swa=2", "#token: full=3, swa=0.5", "token usage: 0.5",
              "swa token usage: 0.1", "  ", "é", "\t", ", #running-req: 3", ", #running-req: x", ",, ", "x:y",
              "full token usage: 0.2", "#new-token: 5", "cuda graph: True", ", x:", ", y="]


def _bodies() -> list[str]:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CASES.glob("*.log"))]
    texts.append(shared("traces", "real_logs", "sglang_repo-sostrowsk-dgx-spark-local-llm.log")
                 .read_text(encoding="utf-8", errors="replace"))
    return [m.group(1) for t in texts for line in t.splitlines() if (m := _BODY_RE.search(line))]


def _mutated(bodies: list[str], n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        s = rnd.choice(bodies)
        for _ in range(rnd.randrange(1, 3)):
            pos = rnd.randrange(len(s) + 1)
            k = rnd.randrange(4)
            if k == 0:
                s = s[:pos] + rnd.choice(_FRAGMENTS) + s[pos:]
            elif k == 1:
                s = s[:pos] + s[pos + rnd.randrange(1, 6):]
            elif k == 2:
                s = s[:pos]
            else:
                s = s.replace(", ", rnd.choice([",", ",  ", ",\t"]), 1)
        out.append(s)
    return out


def _wide(frame: pl.DataFrame, cand: pl.DataFrame) -> pl.DataFrame:
    return cand.select("_r").join(frame, on="_r", how="left", maintain_order="left")


def _both(bodies: list[str]) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    cand = pl.DataFrame({"_body": bodies}).with_row_index("_r")
    plain, rest = steps.read_by_position(cand)
    fast = pl.concat([plain, steps.read_by_pairs(rest)]) if rest.height else plain
    return _wide(fast, cand), _wide(steps.read_by_pairs(cand), cand), plain.height


def test_bodies_of_the_cases_and_the_real_log_read_by_position_as_by_pair_re():
    bodies = _bodies()
    assert len(bodies) > 100
    fast, reference, n_plain = _both(bodies)
    assert_frame_equal(fast, reference)
    # most real bodies have a plain shape: the fast path is the one that runs
    assert n_plain > 0.8 * len(bodies)
    assert fast["running"].null_count() < len(bodies)


def test_mutated_bodies_read_by_position_as_by_pair_re():
    bodies = _bodies()
    for seed in range(3):
        fast, reference, n_plain = _both(_mutated(bodies, 3000, seed))
        assert_frame_equal(fast, reference)
        assert 0 < n_plain < 3000


def test_shape_keys():
    assert steps._shape_keys("#running-req:=, #token:=, token usage:=") == ["#running-req", "#token", "token usage"]
    assert steps._shape_keys("a:=,b:=") is None  # no space after the comma
    assert steps._shape_keys("a:=,  b:=") is None  # two
    assert steps._shape_keys("a:b:=") is None  # a colon inside the key
    assert steps._shape_keys("a:=, ") is None  # a trailing comma
    assert steps._shape_keys("é:=") is None  # not ASCII: PAIR_RE and Polars decide what is whitespace
    assert steps._shape_keys(" a:=") is None  # a leading space


def test_usual_and_other_headers_keep_their_order_and_kinds():
    msgs = ["Decode batch, #running-req: 2, #token: 9", "Prefill batch(mixed #running-req: 3) [7], #new-token: 5",
            "Prefill batch, #running-req: 1, #new-token: 4", "Decode batch. #running-req: 4, #token: 1",
            "Decode batch, #running-req: 5"]
    df = pl.DataFrame({"line": [1, 2, 3, 4, 5], "seg": [0] * 5, "ts": [None] * 5, "engine_index": [None] * 5,
                       "msg": msgs, "has_header": [True] * 5, "_head": [m[:12] for m in msgs]},
                      schema_overrides={"ts": pl.Datetime("us", "UTC"), "engine_index": pl.Int64})
    rows, errors = steps.parse_steps(df)
    assert rows["line"].to_list() == [1, 2, 3, 4, 5]
    assert rows["kind"].to_list() == ["decode", "prefill", "prefill", "decode", "decode"]
    assert rows["running"].to_list() == [2, 3, 1, 4, 5]
    assert rows["new_tokens"].to_list() == [None, 5, 4, None, None]
    assert errors.height == 0
