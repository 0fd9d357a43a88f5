"""Clean-up shared by the console-log sources (section 0 of ../shared/formats/engine-logs.md).

Real captured logs carry noise added outside the engine: ANSI colour codes, `\\r` (vLLM rewrites a newline
inside a message as `\\r\\n`; tqdm redraws a bar with bare `\\r`), Docker/kubectl RFC3339 prefixes and
supervisor prefixes (`runner-llm-1  | `). `segments` turns physical lines into logical segments: one per
`\\r`-separated piece, cleaned, keeping the physical line number, so a record hidden after a progress bar is
still found and every row still points at its line.
"""

from __future__ import annotations

import polars as pl

ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"
# Docker --timestamps / kubectl --timestamps: `2026-05-12T08:01:39.331095044Z ` (or with an offset).
RFC3339_PREFIX_RE = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "
# docker compose / supervisor: `runner-llm-1  | `
SUPERVISOR_PREFIX_RE = r"^[A-Za-z0-9_.\-]+\s+\| "
_ANY_PREFIX_RE = f"(?:{RFC3339_PREFIX_RE})|(?:{SUPERVISOR_PREFIX_RE})"


def clean(expr: pl.Expr) -> pl.Expr:
    """Strip ANSI codes and outer prefixes from one segment."""
    return (
        expr.str.replace_all(ANSI_RE, "")
        .str.replace(RFC3339_PREFIX_RE, "")
        .str.replace(SUPERVISOR_PREFIX_RE, "")
        .str.replace(RFC3339_PREFIX_RE, "")
    )


def clean_series(text: pl.Series) -> pl.Series:
    """`clean` on a whole column, touching only the rows that need it: ANSI codes and prefixes are rare, and
    a regex replace rebuilds every string while a literal or anchored test does not."""
    return _clean_series(text, ansi=True)


def _clean_series(text: pl.Series, ansi: bool) -> pl.Series:
    """`clean_series`; `ansi=False` when the caller knows that no row holds `\\x1b`."""
    if ansi:
        has_esc = text.str.contains("\x1b", literal=True)
        if has_esc.any():
            text = text.scatter(has_esc.arg_true(), text.filter(has_esc).str.replace_all(ANSI_RE, ""))
    # One anchored test for both prefixes first: when no row has either (nearly always), none of the three
    # steps below would change anything.
    if not text.str.contains(_ANY_PREFIX_RE).any():
        return text
    steps = [
        (lambda s: s.str.contains(RFC3339_PREFIX_RE), lambda s: s.str.replace(RFC3339_PREFIX_RE, "")),
        (lambda s: s.str.contains(SUPERVISOR_PREFIX_RE), lambda s: s.str.replace(SUPERVISOR_PREFIX_RE, "")),
        (lambda s: s.str.contains(RFC3339_PREFIX_RE), lambda s: s.str.replace(RFC3339_PREFIX_RE, "")),
    ]
    for needs, fix in steps:
        mask = needs(text)
        if mask.any():
            text = text.scatter(mask.arg_true(), fix(text.filter(mask)))
    return text


def may_need_cleaning(text: pl.Expr) -> pl.Expr:
    """One boolean (an aggregate): whether any line holds a `\\r` or an ANSI escape. When none does,
    `segments` changes only lines that start with an outer prefix (see `has_outer_prefix`) and drops empty
    ones. A parser can compute this in the same select as its own first pass over the raw lines."""
    return text.str.contains_any(["\r", "\x1b"]).any()


def has_outer_prefix(text: pl.Series) -> bool:
    """Whether any of these lines starts with a Docker/kubectl timestamp or a supervisor prefix."""
    return bool(text.str.contains(_ANY_PREFIX_RE).any())


def segments(lines: pl.DataFrame) -> pl.DataFrame:
    """`line`, `text` (physical) -> `line`, `seg` (0-based index within the line), `text` (cleaned).

    Lines without `\\r` (nearly all) skip the split; empty segments are dropped.
    """
    # Three independent tests in one select (they run in parallel): any `\r` or ANSI escape (both rare), any
    # outer prefix, any empty line. Without the first, the lines are the segments and only need the rest.
    text = pl.col("text")
    rare, prefixed, empty_lines = lines.select(
        text.str.contains_any(["\r", "\x1b"]).any(),
        text.str.contains(_ANY_PREFIX_RE).any().alias("prefixed"),
        (text.str.len_bytes() == 0).any().alias("empty"),
    ).row(0)
    if not rare:
        out = lines.with_columns(pl.lit(0, pl.Int32).alias("seg"))
        if prefixed:
            out = out.with_columns(_clean_series(out["text"], ansi=False))
        elif not empty_lines:
            return out
        empty = out["text"].str.len_bytes() == 0
        return out.filter(~empty) if empty.any() else out
    has_cr = lines["text"].str.contains("\r", literal=True)
    if has_cr.any():
        plain = lines.filter(~has_cr).with_columns(pl.lit(0, pl.Int32).alias("seg"))
        parts = (
            lines.filter(has_cr)
            .with_columns(pl.col("text").str.split("\r"))
            .with_columns(pl.int_ranges(pl.col("text").list.len(), dtype=pl.Int32).alias("seg"))
            .explode(["text", "seg"])
        )
        out = pl.concat([plain, parts.select(plain.columns)]).sort(["line", "seg"])
    else:
        out = lines.with_columns(pl.lit(0, pl.Int32).alias("seg"))
    out = out.with_columns(_clean_series(out["text"], ansi=True))
    empty = out["text"].str.len_bytes() == 0
    return out.filter(~empty) if empty.any() else out
