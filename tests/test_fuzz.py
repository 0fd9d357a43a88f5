"""The short version of bench/reliability/fuzz.py (issue 16): a few hundred mutated real lines for the
engine-log and gateway parsers, 0 crashes, and every reader works on the stores they leave behind."""

from __future__ import annotations

import importlib.util
import random

from conftest import REPO

_spec = importlib.util.spec_from_file_location("fuzz", REPO / "bench" / "reliability" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def test_mutations_are_what_they_say():
    rng = random.Random(0)
    line = "INFO 06-16 10:03:14 [loggers.py:87] Engine 000: Running: 10 reqs, Waiting: 4 reqs"
    assert "\x00" in fuzz.MUTATIONS["nul"](rng, line)
    assert "13-16 10:03:14" in fuzz.MUTATIONS["month_13"](random.Random(1), line) or \
        "13-16" in fuzz.MUTATIONS["month_13"](random.Random(0), line)
    assert any(c in fuzz.MUTATIONS["unicode_digit"](rng, line) for c in fuzz.UNICODE_DIGITS)
    assert fuzz.MUTATIONS["swap_fields"](rng, line) != line
    assert len(fuzz.seeds("vllm_log")) > 50 and len(fuzz.seeds("sglang_log")) > 50


def test_fuzz_short(tmp_path):
    rng = random.Random(16)
    for parser, cases in (("vllm_log", 150), ("sglang_log", 150), ("litellm", 60), ("access_log", 40)):
        r = fuzz.fuzz_parser(parser, cases, rng, tmp_path)
        assert r["cases"] == cases
        assert r["crashes"] == 0, r["crash_samples"]
        if parser in ("vllm_log", "sglang_log"):
            assert fuzz.read_everything(r["store"], tmp_path) == []
