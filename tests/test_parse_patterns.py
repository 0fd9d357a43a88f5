"""The parse's regex patterns kept few (Polars caches 32 compiled patterns per thread; a chunk's parse that builds
more compiles every one of them again on every chunk): the merged forms give what the one-pattern-per-test forms
gave. The census' skip rules as one pattern per source (small chunks), vLLM's startup facts ruled out before
their 15 specs' patterns are built."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from conftest import SHARED
from polars.expr.string import ExprStringNameSpace

from attribution import census
from attribution.ingest import parse_path
from attribution.ingest.parsing import source_rules
from attribution.sources import vllm_config
from attribution.sources.base import skip_rules

ROOT = Path(__file__).resolve().parent.parent
REAL = sorted(SHARED.glob("traces/real_logs/*.log")) + sorted(SHARED.glob("traces/vllm_server_logs/*.txt"))


def _corpus_lines() -> list[str]:
    files = [*REAL, *sorted((ROOT / "sample_logs").rglob("*.log"))]
    lines = {ln for f in files for ln in f.read_bytes().decode("utf-8", "replace").split("\n")}
    return sorted(lines | {"", "   ", "\r", "a\nb", "Traceback (most recent call last)\n  x"})


@pytest.fixture(scope="module")
def corpus() -> pl.DataFrame:
    return pl.DataFrame({"text": _corpus_lines()})


@pytest.mark.parametrize("source", sorted(skip_rules()))
def test_merged_skip_rules_give_the_first_rule_in_order(source, corpus):
    pairs = skip_rules()[source]
    one_by_one = corpus.select(pl.col("text"), census._first_rule(pairs, merged=False).alias("reason"))
    skipped = one_by_one.filter(pl.col("reason").is_not_null())
    assert skipped.height > 0
    # Lines that two rules match, each rule's line first and last: the earlier rule must win wherever it matches.
    samples = skipped.group_by("reason", maintain_order=True).agg(pl.col("text").first())["text"].to_list()
    both = [f"{a} {b}" for a, b in itertools.permutations(samples, 2)]
    lines = pl.concat([corpus, pl.DataFrame({"text": both})])
    got = lines.select(pl.col("text"), census._first_rule(pairs, merged=True).alias("a"),
                       census._first_rule(pairs, merged=False).alias("b"))
    assert got.filter(pl.col("a").ne_missing(pl.col("b"))).height == 0
    assert Counter(got["b"].drop_nulls()).keys() == Counter(got["a"].drop_nulls()).keys()


def test_the_census_reasons_are_the_same_below_and_above_the_merged_limit(monkeypatch):
    plain = SHARED / "traces" / "real_logs" / "sglang_repo-sostrowsk-dgx-spark-local-llm.log"
    merged = parse_path(plain, year=2025, tz="UTC", chunk_bytes=2048).tables["ingest_line_shapes"]
    monkeypatch.setattr(census, "SKIP_MERGED_MAX_LINES", -1)
    one_by_one = parse_path(plain, year=2025, tz="UTC", chunk_bytes=2048).tables["ingest_line_shapes"]
    assert merged.filter(pl.col("class") == "skipped").height > 5
    assert merged.equals(one_by_one)


def _recorded_heads(monkeypatch) -> list[pl.DataFrame]:
    seen: list[pl.DataFrame] = []
    real = vllm_config.extract_facts

    def record(recs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        seen.append(recs)
        return real(recs)

    monkeypatch.setattr(vllm_config, "extract_facts", record)
    for f in REAL:
        if "vllm" in f.name:
            parse_path(f, year=2025, tz="UTC", chunk_bytes=8192)
    monkeypatch.setattr(vllm_config, "extract_facts", real)
    return seen


def test_startup_facts_are_the_same_without_the_gate(monkeypatch):
    heads = _recorded_heads(monkeypatch)
    gated = [vllm_config.extract_facts(h) for h in heads]
    monkeypatch.setattr(vllm_config, "_ANY_MARK_RE", "")  # matches every line: nothing ruled out
    ungated = [vllm_config.extract_facts(h) for h in heads]
    n_facts = 0
    for (fa, ea), (fb, eb) in zip(gated, ungated, strict=True):
        assert fa.height == fb.height and ea.height == eb.height
        if fa.height:
            assert fa.equals(fb.select(fa.columns))
            n_facts += fa.height
        if ea.height:
            assert ea.equals(eb)
    assert n_facts > 20


def test_a_chunk_without_startup_lines_builds_two_patterns_for_the_facts(monkeypatch):
    built: set[str] = set()
    for name in ("contains", "extract", "extract_groups", "replace", "replace_all"):
        real = getattr(ExprStringNameSpace, name)

        def counting(self, pattern, *a, _real=real, **k):
            if isinstance(pattern, str) and not k.get("literal", False):
                built.add(pattern)
            return _real(self, pattern, *a, **k)

        monkeypatch.setattr(ExprStringNameSpace, name, counting)
    # Lines with the pre-filter's words (model, version, took) that are no startup line.
    recs = pl.DataFrame({"idx": [0, 1, 2], "line": [1, 2, 3], "ts": [None, None, None],
                         "msg": ["Received request x: model='m', version 3", "It took 3 s", "loading the model"]},
                        schema_overrides={"idx": pl.UInt32, "line": pl.Int64, "ts": pl.Float64})
    facts, errors = vllm_config.extract_facts(recs)
    assert facts.height == 0 and errors.height == 0
    assert len(built) == 2, built
    built.clear()
    facts, _ = vllm_config.extract_facts(recs.with_columns(msg=pl.lit("Available KV cache memory: 3.5 GiB")))
    assert facts["available_kv_bytes"].to_list() == [int(3.5 * (1 << 30))] * 3
    # the pre-filters, the regex marks, and the one marked spec's pattern: not the other specs' (28 in all)
    assert r"^Available KV cache memory: ([\d.]+) ?GiB" in built and len(built) == 7, built


def test_startup_facts_are_the_same_with_every_spec_built(monkeypatch):
    """A chunk builds only the startup specs (and banner patterns) some line of it is marked for: the facts and
    errors are those of building every one, on the real logs' startup chunks and the startup case files."""
    heads = _recorded_heads(monkeypatch)
    cases = sorted((ROOT / "tests" / "cases" / "vllm_log").glob("*.log"))
    seen: list[pl.DataFrame] = []
    real = vllm_config.extract_facts
    monkeypatch.setattr(vllm_config, "extract_facts", lambda recs: (seen.append(recs), real(recs))[1])
    for f in cases:
        parse_path(f, year=2025, tz="UTC")
    monkeypatch.setattr(vllm_config, "extract_facts", real)
    # and marked lines that do not parse (errors), beside a banner line and an engine-init line
    msgs = ["Available KV cache memory: lots", "Model loading took 3.2 GB", "\u2584\u2584 version 0.20.1",
            "Initializing a V1 LLM engine (v0.9.0) with config: model='m', served_model_name=s, "]
    bad = pl.DataFrame({"idx": range(4), "line": range(1, 5), "ts": [None] * 4, "msg": msgs},
                       schema_overrides={"idx": pl.UInt32, "line": pl.Int64, "ts": pl.Float64})
    seen.append(bad)
    routed = [real(h) for h in [*heads, *seen]]
    monkeypatch.setattr(vllm_config, "_present", lambda cand: ((True,) * len(vllm_config._SPECS), True))
    every = [real(h) for h in [*heads, *seen]]
    n_facts = n_errors = 0
    for (fa, ea), (fb, eb) in zip(routed, every, strict=True):
        assert fa.equals(fb) and ea.equals(eb)
        n_facts, n_errors = n_facts + fa.height, n_errors + ea.height
    assert n_facts > 40 and n_errors > 0


# -- the census' masks and skip rules left out of a chunk whose lines cannot match them ----------------------


@pytest.mark.parametrize("source", sorted(skip_rules()))
def test_a_rules_literals_are_in_every_line_it_matches(source, corpus):
    # census.rule_literals reads a rule's literals with Python's regex parser: wherever Polars' engine finds the
    # rule in a line of the corpus (or of two rules' lines joined), one of them is in the line.
    pairs = skip_rules()[source]
    samples = corpus.select(pl.col("text"), census._first_rule(pairs, merged=False).alias("r")).filter(
        pl.col("r").is_not_null()).group_by("r", maintain_order=True).agg(pl.col("text").first())["text"].to_list()
    lines = pl.concat([corpus, pl.DataFrame({"text": [f"{a} {b}" for a, b in itertools.permutations(samples, 2)]})])
    known = 0
    for _, rx in pairs:
        lits = census.rule_literals(rx)
        if lits is None:
            continue
        known += 1
        hit = lines.filter(pl.col("text").str.contains(rx))["text"].to_list()
        assert all(any(lit in t for lit in lits) for t in hit), (rx, lits)
    assert known >= len(pairs) // 2


def test_rule_literals_of_alternations_classes_and_flags():
    assert census.rule_literals(r"(?:^|\) )ERROR \d\d") == frozenset({"ERROR "})
    assert census.rule_literals(r"Loading weights took|Starting to load model") == frozenset(
        {"Loading weights took", "Starting to load model"})
    assert census.rule_literals(r"[▀▄]|\[(?:api_)?utils\.py:\d+\]\s*$") == frozenset({"▀", "▄", "utils.py:"})
    assert census.rule_literals(r"ab?c") == frozenset({"a"}) or census.rule_literals(r"ab?c") == frozenset({"c"})
    for unknown in (r"^\s*$", r"(?i)token", r"(?i:multi)", r"[^a]", r"\p{L}+", r"[[:alpha:]]x", r"a(b"):
        assert census.rule_literals(unknown) is None, unknown
    assert census.rule_literals(r"(?i:multi-modal) warmup") == frozenset({" warmup"})
    # an escaped code point is its character (or unknown), never its digits read as text
    for rx, line in ((r"foo\x41bar", "fooAbar"), (r"ab\u0041cd", "abAcd"), (r"x\x{41}yz", "xAyz")):
        lits = census.rule_literals(rx)
        assert pl.Series([line]).str.contains(rx).item(), rx  # (the rule matches the line, in Rust's syntax)
        assert lits is None or any(lit in line for lit in lits), (rx, lits)


# Lines that make the gated masks' edge cases: colours (removed first, joining text), case folding outside ASCII
# (the Kelvin sign folds to k, the long s to s), keys and bearer values, token ids, UUIDs, IPs, hex, bars.
_EDGE = ["\x1b[32mINFO\x1b[0m to\x1b[1mken=abc123", "api_\u212aey=abcdefgh x", "\u017fk-abcdefghij", "Bearer abcdef123",
         '{"prompt_token_ids": [1, 2, 3], "x": \'y\'}', "id 123e4567-e89b-12d3-a456-426614174000 at 10.0.0.1:80",
         "0xdeadbeef 1.5e3 |████ | 3, 4, 5", "plain words only", "PASSWORD: hunter2", "it's a 'quoted' one"]


def _chunks(lines: list[str], size: int) -> list[list[str]]:
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def test_gated_shapes_and_reasons_are_the_ungated_ones(corpus):
    # Chunks of corpus lines of every source (a chunk mixing vLLM, SGLang and other families' lines), and each
    # edge line alone and with others: the same shape, sample and skip reason with the gates as with every
    # mask and rule applied.
    lines = corpus["text"].to_list()
    chunks = [*_chunks(lines[::7], 150), *([e] for e in _EDGE), _EDGE, [*_EDGE, *lines[:40]]]
    sources = [None, "vllm_log", "sglang_log", "litellm"]
    left_out = 0
    for i, chunk in enumerate(chunks):
        units = pl.DataFrame({"text": chunk, "source": [sources[(i + j) % 4] for j in range(len(chunk))]})
        clean = units.with_columns(pl.col("text").str.replace_all(census._ANSI, "").str.strip_chars_end("\r"))
        present = census.present_text(clean["text"])
        assert present is not None
        if units["text"].str.contains("\x1b", literal=True).any():
            present += "\n\x1b"
        text = pl.col("text")
        got = clean.select(census.shape_expr(text, present).alias("shape"),
                           census._skip_reason(clean, source_rules, present).alias("reason"))
        want = clean.select(census.shape_expr(text).alias("shape"), census._skip_reason(clean, source_rules).alias("reason"))
        assert got.equals(want), chunk
        samples = units.select(census.quote_masked(text, present))
        assert samples.equals(units.select(census.quote_masked(text))), chunk
        left_out += sum(not census._needed(p, g, present) for p, _, g in [*census._QUOTES, census._SECRET, *census._IDS])
    assert left_out > 100  # (the gates do leave masks out)
