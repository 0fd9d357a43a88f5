"""LiteLLM JSON-array documents are streamed (ijson, the document wrappers' path) in batches to the vectorised
parser: never read whole, a break in the document keeps the records before it. (Peak memory on a 120 MB file:
bench/reliability/json_memory.py.)"""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REPO

from attribution.db import fetch
from attribution.ingest import ingest, parse_path, parsing
from attribution.sources import litellm
from attribution.sources.base import ParseContext
from attribution.store import Store

CASE = REPO / "tests" / "cases" / "litellm" / "slp_epoch_floats.jsonl"


def _records(n: int) -> list[dict]:
    """n payloads made from the documented example, each with its own id and times."""
    base = json.loads(CASE.read_text().splitlines()[0])
    out = []
    for i in range(n):
        rec = dict(base, id=f"chatcmpl-{i:032x}", startTime=base["startTime"] + i,
                   endTime=base["endTime"] + i, completionStartTime=base["completionStartTime"] + i)
        out.append(rec)
    return out


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(litellm, "DOC_BATCH", 7)


def test_an_array_is_streamed_in_batches_never_read_whole(tmp_path, small_batches, monkeypatch):
    path = tmp_path / "litellm-array.json"
    path.write_text(json.dumps(_records(25), indent=2))
    monkeypatch.setattr(parsing, "WHOLE_MAX_BYTES", 1024)  # a whole read of this file would fail
    units = list(parsing.parse_units(path, litellm.LiteLLMPayloadJSON(),
                                        ParseContext(str(path), "d", None, None, "UTC", 0.0)))
    assert len(units) == 4  # 7 + 7 + 7 + 4 records
    s = ingest([str(path)], tmp_path / "s")
    assert s.files[0].status == "read" and s.files[0].format == "litellm_json"
    got = fetch(Store.open(tmp_path / "s").connect(), "select line, request_id from requests order by line")
    assert got["line"].to_list() == list(range(1, 26))  # the record's index in the array
    assert got["request_id"].to_list() == [f"chatcmpl-{i:032x}" for i in range(25)]
    assert parse_path(path).census == {"parsed": 25, "skipped": 0, "unrecognised": 0}


def test_a_document_cut_off_keeps_the_records_before_the_break(tmp_path, small_batches):
    text = json.dumps(_records(10), indent=2)
    path = tmp_path / "litellm-array.json"
    path.write_text(text[: text.rindex('"id"')])  # cut inside the tenth record
    parsed = parse_path(path)
    assert parsed.tables["requests"].height == 9
    errs = parsed.errors
    assert errs.height == 1 and errs["line"][0] == 10 and "cut off or malformed" in errs["reason"][0]


def test_one_pretty_printed_object_is_one_record(tmp_path):
    path = tmp_path / "one.json"
    path.write_text("\ufeff" + json.dumps(_records(1)[0], indent=2))
    parsed = parse_path(path)
    assert parsed.source == "litellm_json"
    assert parsed.tables["requests"].select(pl.col("line")).to_series().to_list() == [1]


def test_a_spendlogs_csv_is_streamed_in_whole_records(tmp_path, monkeypatch):
    """Batches of a few hundred bytes cut only between records (quoted metadata holds newlines and doubled
    quotes): the same rows, lines and census as the export read whole."""
    src = REPO / "tests" / "cases" / "litellm" / "spendlogs.csv"
    rows = src.read_text().split("\n", 1)
    body = rows[1].rstrip("\n") + "\n"
    # the case's records again, one with a quoted newline in its metadata
    text = rows[0] + "\n" + body + body.replace('{""', '{\n""', 1) + body
    path = tmp_path / "spend.csv"
    path.write_text(text)
    whole = parse_path(path, "litellm_spendlogs")
    monkeypatch.setattr(litellm, "SPEND_BATCH_BYTES", 300)
    src_obj = litellm.LiteLLMSpendLogs()
    units = list(parsing.parse_units(path, src_obj, ParseContext(str(path), "d", None, None, "UTC",
                                                                                 0.0)))
    assert len(units) > 3
    streamed = parse_path(path, "litellm_spendlogs")
    for t in ("requests", "ingest_errors"):
        a, b = whole.tables[t], streamed.tables[t]
        assert a.drop("file").equals(b.drop("file")), t
    assert whole.tables["requests"].height > 3
    assert streamed.census == whole.census
    lines = streamed.tables["requests"]["line"].to_list()
    assert lines == sorted(lines) and lines[0] == 2
