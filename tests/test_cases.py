"""Every golden case under tests/cases/<format>/: an input file read through the ingest's own path
(`parse_path`) must give the hand-worked rows of its `NAME.expected.json`.

Case file: {"format": ..., "options": {"year", "tz", "deployment", "label", ...source options},
            "expect": {TABLE: {"count": N, "rows": [{"line": L, COLUMN: VALUE, ...}]}}}
Each listed row must equal a row of TABLE with the same `line` on every listed column (floats to 1e-9,
timestamps as ISO-8601 strings in UTC, lists as JSON lists).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest

from attribution.ingest import parse_path

CASES = Path(__file__).resolve().parent / "cases"
_RESERVED = {"year", "tz", "deployment", "label"}


def _cases() -> list[tuple[Path, Path]]:
    out = []
    for expected in sorted(CASES.glob("*/*.expected.json")):
        stem = expected.name[: -len(".expected.json")]
        inputs = [p for p in expected.parent.iterdir() if p.name.startswith(stem + ".") and p != expected
                  and not p.name.endswith(".md")]
        assert len(inputs) == 1, f"{expected}: expected exactly one input file named {stem}.*, found {inputs}"
        out.append((inputs[0], expected))
    return out


def _equal(got, want) -> bool:
    if want is None or got is None:
        return got is None and want is None
    if isinstance(got, datetime):
        want_dt = datetime.fromisoformat(want.replace("Z", "+00:00"))
        return got == want_dt
    if isinstance(want, float) or isinstance(got, float):
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(got, list) and got and isinstance(got[0], dict) and isinstance(want, dict):
        return {d["key"]: d["value"] for d in got} == {k: (v if isinstance(v, str) else json.dumps(v))
                                                       for k, v in want.items()}
    return got == want


@pytest.mark.parametrize("inp,expected", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_case(inp: Path, expected: Path):
    case = json.loads(expected.read_text())
    opts = case.get("options", {})
    parsed = parse_path(
        inp, case.get("format"), year=opts.get("year"), tz=opts.get("tz", "UTC"),
        deployment=opts.get("deployment"), label=opts.get("label"),
        options={k: v for k, v in opts.items() if k not in _RESERVED},
    )
    if "format" in case:
        assert parsed.source == case["format"]
    for table, spec in case["expect"].items():
        df = parsed.tables[table]
        if "count" in spec:
            assert df.height == spec["count"], f"{table}: {df.height} rows, expected {spec['count']}"
        for want in spec.get("rows", []):
            cands = df.filter(df["line"] == want["line"]).to_dicts() if "line" in want else df.to_dicts()
            assert cands, f"{table}: no row at line {want.get('line')}"
            mismatches = []
            for row in cands:
                bad = {k: (row.get(k), v) for k, v in want.items() if k not in row or not _equal(row[k], v)}
                if not bad:
                    break
                mismatches.append(bad)
            else:
                pytest.fail(f"{table} line {want.get('line')}: (got, expected) differ: {mismatches}")
