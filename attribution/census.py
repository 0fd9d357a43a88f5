"""The line census: every input line (or record) of a file counted once, as `parsed` (it made a row, or went
into one), `skipped` (a known line that carries nothing for us, with the reason) or `unrecognised`, and the
shapes (numbers, ids and quoted strings masked) of the lines that made no row, for `ingest_line_shapes`.
Skip rules are data: `sources/skip_rules.toml`, keyed by source name (read by attribution.sources.base)."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution.privacy import SAMPLE_CHARS, SECRET_RE, before_content, redact
from attribution.sources.base import rules_for

# The standard library's regex parser (a rule's literals, `rule_literals`); without it every rule is tried.
try:
    sre_parse: Any = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover (Python 3.11-3.13 have it)
    sre_parse = None

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

    from attribution.schema import PolarsType
    from attribution.sources.base import ParseResult

SHAPES_MAX = 200  # shapes kept per file and chunk; the rest are counted under one OTHER row per class
OTHER = "<other shapes>"
SHAPE_CHARS = 200
CLASSES = ("parsed", "skipped", "unrecognised")
SHAPE_SCHEMA: dict[str, PolarsType] = {
    "source": pl.Utf8, "class": pl.Utf8, "reason": pl.Utf8, "shape": pl.Utf8, "lines": pl.Int64,
    "first_line": pl.Int64, "sample": pl.Utf8,
}
Rules = Callable[[str | None], tuple[tuple[str, str], ...]]  # source name -> (reason, regex) pairs
UNITS_SCHEMA: dict[str, PolarsType] = {"line": pl.Int64, "span": pl.Int64, "text": pl.Utf8, "source": pl.Utf8}

# Masks in order. Quoted strings go first, so a prompt never reaches a later step, a shape or a sample;
# a quote opened after `:`, `=`, `(`, `[` or `,` and never closed (a cut line) masks the rest of the line.
# Short identifier-like keys of JSON/dict text are kept (`{"model": <str>}`), so JSON shapes stay readable.
_KEY = "\x02"
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
# Each mask: (pattern, replacement, gate). The gate is what a line must hold for the mask to match at all,
# checked on the (colour-free) text of a chunk's unparsed lines before the mask is built: a mask none of whose
# literals that text holds is not applied (the same text out; Polars compiles fewer patterns). Each literal is in
# the line before any mask runs (no mask's replacement writes it, nor joins text into it). A case-insensitive
# pattern's literals are compared lower-cased and trusted only when every line is ASCII (Unicode case folding:
# `K` matches `k`). None: always applied.
Mask = tuple[str, str, tuple[str, ...] | None]
_QUOTES: list[Mask] = [
    (_ANSI, "", ("\x1b",)),  # ANSI colours: the same line with or without them has one shape
    (r'"([A-Za-z_][A-Za-z0-9_.\-]{0,63})"(\s*:)', _KEY + "${1}" + _KEY + "${2}", ('"',)),
    (r"'([A-Za-z_][A-Za-z0-9_.\-]{0,63})'(\s*:)", _KEY + "${1}" + _KEY + "${2}", ("'",)),
    (r'"(?:[^"\\]|\\.)*"', "<str>", ('"',)),
    (r"(^|[^A-Za-z0-9])'(?:[^'\\]|\\.)*'", "${1}<str>", ("'",)),  # not an apostrophe (vLLM's, don't)
    (r"""([:=(\[,]\s*)["'].*$""", "${1}<str>", ('"', "'")),
    # The value of a key-like field, whatever it looks like (a raw key need not start with sk-).
    (r"""(?i)\b((?:api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|authorization)"""
     r"""["']?\s*[=:]\s*)(?:bearer\s+)?[^\s,;'"})\]]+""", "${1}<secret>",
     ("key", "token", "secret", "passw", "authorization")),
    # Token ids are text too (a prompt or an answer, encoded): lists of numbers go, cut-off ones included.
    (r"(_ids\W{0,3}\s*[:=]\s*)\[[^\]]*(?:\]|$)", "${1}[<ids>]", ("_ids",)),
    (r"\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*(?:,\s*\.\.\.)?\]", "[<ids>]", ("[",)),
]
_SECRET: Mask = (SECRET_RE, "<secret>", ("sk-", "bearer"))
_IDS: list[Mask] = [
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>", ("-",)),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>", (".",)),
    (r"\b0[xX][0-9a-fA-F]+\b", "<hex>", ("0x", "0X")),
    (r"\b\d+(?:\.\d+)?[eE][-+]?\d+\b", "<n>", None),  # 1.5e3 is a number, not hex
    # hex words holding both a digit and a letter (hashes, request ids); pure words and numbers are not hex
    (r"\b(?:[0-9a-fA-F]*[0-9][0-9a-fA-F]*[a-fA-F]|[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*[0-9])[0-9a-fA-F]*\b", "<hex>", None),
    (r"\|[\s\u2588-\u258f]*\|", "|<bar>|", ("|",)),  # tqdm progress bars
    (r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?", "<n>", None),
    (r"<n>(?:,\s*<n>){2,}", "<n>, ...", (",",)),  # token id lists and the like: one shape whatever their length
]
GATE_MAX_CHARS = 1 << 20  # the text of more unparsed lines than this is not searched: every mask and rule applied


def _masked(text: pl.Expr, masks: list[Mask], present: str | None) -> pl.Expr:
    """`text` with each of `masks` applied in order, but those whose gate `present` (a superset of the lines'
    text; None: unknown) does not pass."""
    for pattern, repl, gate in masks:
        if _needed(pattern, gate, present):
            text = text.str.replace_all(pattern, repl)
    return text


def _needed(pattern: str, gate: tuple[str, ...] | None, present: str | None) -> bool:
    """Whether a mask can match text of which `present` is a superset (None: unknown, so yes)."""
    if present is None or gate is None:
        return True
    if pattern.startswith("(?i)"):
        if not present.isascii():
            return True
        low = present.lower()
        return any(lit in low for lit in gate)
    return any(lit in present for lit in gate)


def present_text(texts: pl.Series) -> str | None:
    """The text the gates search (`_needed`, `rule_literals`): the lines joined, None when too long to search."""
    if texts.str.len_chars().sum() > GATE_MAX_CHARS:
        return None
    return "\n".join(t for t in texts.to_list() if t)


def quote_masked(text: pl.Expr, present: str | None = None) -> pl.Expr:
    """Quoted strings (and token id lists, key-like values) masked. `present`: a text holding every line's
    text once its colours are removed, and their colour codes (see the masks' gates); None: every mask applied."""
    return _masked(text, _QUOTES, present).str.replace_all(_KEY, '"', literal=True)


def shape_expr(text: pl.Expr, present: str | None = None) -> pl.Expr:
    """The shape of a line: quoted strings, UUIDs, IPs, hex ids and numbers masked; at most SHAPE_CHARS.
    `present`: as for `quote_masked`."""
    text = _masked(quote_masked(text, present), [_SECRET, *_IDS], present)
    return text.str.strip_chars_end().str.slice(0, SHAPE_CHARS)


def error_sample_expr(text: pl.Expr) -> pl.Expr:
    """The `ingest_errors.sample` of a line: the part before its content (prompt, messages, token ids) with
    quoted strings and keys masked, else (no content marker: the content cannot be located) its shape."""
    cut = before_content(text.str.slice(0, SAMPLE_CHARS * 8))
    kept = quote_masked(cut).str.replace_all(SECRET_RE, "<secret>").str.replace(r"<str> <removed>$", "<removed>")
    return pl.when(text.is_null()).then(None).otherwise(
        pl.coalesce(kept, shape_expr(text.str.slice(0, SAMPLE_CHARS * 8)))).str.slice(0, SAMPLE_CHARS)


def shape(text: str) -> str:
    masked: str = pl.select(shape_expr(pl.lit(text, pl.Utf8))).item()
    return masked


# Up to this many lines a source's skip rules are one pattern (`skip_pattern`), beyond it one per rule: the
# merged pattern compiles in about half the time of the rules one by one (and takes one of the 32 places of
# Polars' per-thread cache of compiled patterns, not one per rule), but finding which rule matched needs
# captures, ~0.1 ms a matching line against ~0.005 for the rules' plain tests: a gain for a small chunk's few
# unparsed lines, a loss for a big chunk's thousands. Both give the same reasons.
SKIP_MERGED_MAX_LINES = 48


@functools.lru_cache(maxsize=64)
def skip_pattern(rules: tuple[tuple[str, str], ...]) -> str:
    """One regex for a source's skip rules: group `_ri` holds a match when rule i is the first rule that matches
    the line anywhere. Each rule is tried from the line's start over any prefix (`^(?s:.*?)`), and the regex
    prefers an earlier alternative at the same start (leftmost-first), so the first rule in order wins."""
    return "^(?:" + "|".join(f"(?P<_r{i}>(?s:.*?)(?:{rx}))" for i, (_, rx) in enumerate(rules)) + ")"


def _literals(items: Any, flags: int) -> frozenset[str] | None:
    """Strings one of which every match of the parsed `items` holds (None: none known). Conservative: a run
    of literal characters is cut at anything else; of several candidates the one with the longest shortest
    string is kept."""
    best: frozenset[str] | None = None
    cands: list[frozenset[str]] = []
    run: list[str] = []
    for op, arg in [*items, (None, None)]:
        if op is sre_parse.LITERAL and not flags & re.IGNORECASE:
            run.append(chr(arg))
            continue
        if run:
            cands.append(frozenset(["".join(run)]))
            run = []
        got: frozenset[str] | None = None
        if op is sre_parse.SUBPATTERN:
            _group, add, _delete, sub = arg
            got = None if add & re.IGNORECASE else _literals(sub, flags)
        elif op is sre_parse.BRANCH:
            alts = [_literals(b, flags) for b in arg[1]]
            got = None if any(a is None for a in alts) else frozenset().union(*alts)  # type: ignore[arg-type]
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and arg[0] >= 1:
            got = _literals(arg[2], flags)
        elif op is sre_parse.IN and not flags & re.IGNORECASE and arg and all(o is sre_parse.LITERAL for o, _ in arg):
            got = frozenset(chr(c) for _, c in arg)
        if got:
            cands.append(got)
    for c in cands:
        if best is None or min(map(len, c)) > min(map(len, best)):
            best = c
    return best


@functools.lru_cache(maxsize=512)
def rule_literals(rx: str) -> frozenset[str] | None:
    """Strings one of which every line a rule (Rust regex syntax) matches holds; None when unknown (the rule is
    then always tried). Read with Python's parser, so only for patterns both syntaxes read alike."""
    if sre_parse is None or any(m in rx for m in ("[[", "\\p", "\\P", "&&", "--", "~~", "\\z", "\\Q")):
        return None
    try:
        parsed = sre_parse.parse(rx)
    except (re.error, ValueError, OverflowError):
        return None
    return _literals(parsed, parsed.state.flags)


def possible_rules(pairs: tuple[tuple[str, str], ...], present: str | None) -> tuple[tuple[str, str], ...]:
    """The rules that can match a line of which `present` is a superset, in order (None: all of them): a rule
    none of whose literals `present` holds matches no line, so the first matching rule stays the same."""
    if present is None:
        return pairs
    return tuple(p for p in pairs if (lits := rule_literals(p[1])) is None or any(lit in present for lit in lits))


def _first_rule(pairs: tuple[tuple[str, str], ...], merged: bool) -> pl.Expr:
    """The reason of the first of `pairs` that matches `text`, else null."""
    text = pl.col("text")
    if merged:
        groups = text.str.extract_groups(skip_pattern(pairs))
        return pl.coalesce(pl.when(groups.struct.field(f"_r{i}").is_not_null()).then(pl.lit(r, pl.Utf8))
                           for i, (r, _) in enumerate(pairs))
    chain: Then | ChainedThen | None = None
    for reason, rx in pairs:
        cond = text.str.contains(rx)
        chain = pl.when(cond).then(pl.lit(reason)) if chain is None else chain.when(cond).then(pl.lit(reason))
    assert chain is not None  # (pairs is not empty)
    return chain.otherwise(pl.lit(None, pl.Utf8))


def _skip_reason(units: pl.DataFrame, rules: Rules, present: str | None = None) -> pl.Expr:
    """The reason of the first skip rule of the line's source that matches it, else null. `present`: a text
    holding every line's `text` (rules that cannot match it are left out), None: every rule tried."""
    per_source: list[pl.Expr] = []
    names = units["source"].unique().to_list()
    merged = units.height <= SKIP_MERGED_MAX_LINES
    for src in names:
        pairs = possible_rules(rules(src), present)
        if not pairs:
            continue
        reason = _first_rule(pairs, merged)
        if len(names) > 1:
            of_src = pl.col("source").is_null() if src is None else pl.col("source") == src
            reason = pl.when(of_src).then(reason)
        per_source.append(reason)
    return pl.lit(None, pl.Utf8) if not per_source else pl.coalesce(per_source)


def units_from_lines(lines: pl.DataFrame, source: str) -> pl.DataFrame:
    return lines.select("line", pl.lit(1, pl.Int64).alias("span"), "text", pl.lit(source, pl.Utf8).alias("source"))


def records_units(records: pl.DataFrame) -> pl.DataFrame:
    return records.select(pl.col(c).cast(t) for c, t in UNITS_SCHEMA.items())


def doc_records(docs: pl.DataFrame, source: str) -> pl.DataFrame:
    """The census records of a whole-file source: one per document or entry (`line`, `text`), span 1, its text
    cut to a head (enough for a shape: a run's or a span's keys come first)."""
    return docs.select(pl.col("line").cast(pl.Int64), pl.lit(1, pl.Int64).alias("span"),
                       pl.col("text").cast(pl.Utf8).str.slice(0, 2000), pl.lit(source, pl.Utf8).alias("source"))


def of_result(result: ParseResult, source: str, lines: pl.DataFrame | None, extra_lines: list[int | None],
              errors: pl.DataFrame | None, rules: Rules = rules_for) -> pl.DataFrame:
    """The census of one parse result: of its `records` when the source set them (wrapped files, documents),
    else of the input `lines` (line, text) plus `extra_lines` (over-long lines the source never saw), else
    (a whole file whose source lists no records) of the records its rows and errors name. `rules` gives a
    source name's skip rules (the ingest passes each source's own, `Source.skip_rules`)."""
    row_lines = [df["line"] for df in result.tables.values() if "line" in df.columns]
    if result.consumed is not None:
        row_lines.append(result.consumed)
    if result.records is not None or lines is not None:
        if result.records is not None:
            units = records_units(result.records)
        else:
            assert lines is not None  # (the condition above)
            units = units_from_lines(lines, source)
        long = [n for n in extra_lines if n is not None] if lines is not None else []
        if long:  # never given to the source (nor to a wrapper): counted here, as `malformed` by their error
            units = pl.concat([units, pl.DataFrame({"line": long, "span": [1] * len(long), "text": None,
                                                    "source": source}, schema=UNITS_SCHEMA)])
    else:
        named = row_lines + ([errors["line"]] if errors is not None else [])
        if not named:
            return pl.DataFrame(schema=SHAPE_SCHEMA)
        seen = pl.concat([s.cast(pl.Int64) for s in named]).drop_nulls().unique().sort()
        units = pl.DataFrame({"line": seen, "span": 1, "text": None, "source": source}, schema=UNITS_SCHEMA)
    return census(units, row_lines, errors, rules)


def census(units: pl.DataFrame, row_lines: list[pl.Series], errors: pl.DataFrame | None,
           rules: Rules = rules_for) -> pl.DataFrame:
    """Count `units` (line, span, text, source: one per input line or record) by class.

    `row_lines`: the `line`s of the rows made and the lines consumed into them (parsed). `errors` (line,
    reason): a line reported without a row is skipped as `malformed: <reason>`. Returns SHAPE_SCHEMA rows:
    one `parsed` row (no shape), then skipped and unrecognised lines per (source, class, reason, shape)."""
    if units.height == 0:
        return pl.DataFrame(schema=SHAPE_SCHEMA)
    parsed = pl.concat([s.cast(pl.Int64) for s in row_lines]) if row_lines else pl.Series("line", [], pl.Int64)
    hit = units["line"].is_in(parsed.implode())
    out = []
    n_hit = int(hit.sum())
    if n_hit:  # (the common case: nearly every line; counted without copying the lines)
        n_lines = n_hit if units["span"].max() == 1 else int(units["span"].filter(hit).sum())
        first = units["line"].filter(hit).min()
        assert isinstance(first, int)  # (an Int64 column with n_hit > 0 values)
        out.append(pl.DataFrame(
            {"source": [None], "class": ["parsed"], "reason": [None], "shape": [None],
             "lines": [n_lines], "first_line": [first], "sample": [None]},
            schema=SHAPE_SCHEMA))
    if n_hit == units.height:
        return out[0]
    rest = units.filter(~hit)
    if rest.height:
        out.append(_shapes(rest, errors, rules))
    return pl.concat(out) if out else pl.DataFrame(schema=SHAPE_SCHEMA)


def _shapes(rest: pl.DataFrame, errors: pl.DataFrame | None, rules: Rules) -> pl.DataFrame:
    if errors is not None and errors.height:
        errs = (errors.filter(pl.col("line").is_not_null())
                .select(pl.col("line").cast(pl.Int64), pl.col("reason").cast(pl.Utf8))
                .unique("line", keep="first", maintain_order=True))
        # Reasons name sizes and values: masked so that one kind of problem is one row.
        errs = errs.with_columns(("malformed: " + shape_expr(pl.col("reason"))).alias("err"))
        rest = rest.join(errs.select("line", "err"), on="line", how="left")
    else:
        rest = rest.with_columns(pl.lit(None, pl.Utf8).alias("err"))
    # Rules see the line without colours and without a `\r` (a console log keeps both).
    rest = rest.with_columns(pl.col("text").fill_null("").alias("raw"))
    colours = rest["raw"].str.contains("\x1b", literal=True).any()
    text = pl.col("raw").str.replace_all(_ANSI, "") if colours else pl.col("raw")
    rest = rest.with_columns(text.str.strip_chars_end("\r").alias("text"))
    # The masks and rules that can match no line of the chunk are not built (the same reasons and shapes).
    present = present_text(rest["text"])
    if present is not None and colours:
        present += "\n\x1b"
    rest = rest.with_columns(pl.coalesce("err", _skip_reason(rest, rules, present)).alias("reason"))
    rest = rest.with_columns(
        pl.when(pl.col("reason").is_null()).then(pl.lit("unrecognised")).otherwise(pl.lit("skipped")).alias("class"),
        shape_expr(pl.col("text"), present).alias("shape"),
    )
    g = (rest.group_by("source", "class", "reason", "shape")
         .agg(pl.col("span").sum().alias("lines"), pl.col("line").min().alias("first_line"),
              pl.col("raw").sort_by("line").first().alias("sample"))
         .sort(["lines", "first_line"], descending=[True, False]))
    if g.height > SHAPES_MAX:
        other = (g.slice(SHAPES_MAX).group_by("source", "class", "reason")
                 .agg(pl.col("lines").sum(), pl.col("first_line").min())
                 .with_columns(pl.lit(OTHER).alias("shape"), pl.lit(None, pl.Utf8).alias("sample")))
        g = pl.concat([g.head(SHAPES_MAX), other.select(g.columns)])
    # A sample is the line with its quoted strings masked first (never a prompt), then keys redacted.
    g = g.with_columns(quote_masked(pl.col("sample"), present).alias("sample"))
    g = g.with_columns(pl.col("sample").map_elements(redact, return_dtype=pl.Utf8))
    return g.select(pl.col(c).cast(t) for c, t in SHAPE_SCHEMA.items())


def per_file(shapes: pl.DataFrame) -> pl.DataFrame:
    """Census rows of chunks summed per file and shape (what the `ingest_line_shapes` view shows)."""
    keys = ["file", "class", "reason", "shape"]
    return (shapes.sort("first_line")
            .group_by(keys, maintain_order=True)
            .agg(pl.col("source").first(), pl.col("lines").sum(), pl.col("first_line").min(),
                 pl.col("sample").first())
            .select(shapes.columns)
            .sort(["file", "class", "lines", "first_line"], descending=[False, False, True, False]))


def plus(a: dict[str, int] | None, b: dict[str, int] | None, sign: int = 1) -> dict[str, int]:
    """Census counts a + sign * b (either may be missing: a file state written before the census)."""
    return {c: (a or {}).get(c, 0) + sign * (b or {}).get(c, 0) for c in CLASSES}


def totals(shapes: pl.DataFrame) -> dict[str, int]:
    """Lines per class of census rows."""
    out = dict.fromkeys(CLASSES, 0)
    if shapes.height:
        for cls, n in shapes.group_by("class").agg(pl.col("lines").sum()).iter_rows():
            out[cls] = int(n)
    return out
