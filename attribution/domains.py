"""Every parsed value checked against its column's domain (attribution.schema.DOMAINS) where the ingest
hands a parser's frame to the store: a value out of its domain (a year 58645, a count of 1e20, a 250% rate,
`Waiting: 1.5`) becomes null in its row and an `ingest_errors` row says which value and why; the rest of the
row and of the file are kept, so no stored value can later make a reader fail."""

from __future__ import annotations

import time

import polars as pl

from attribution.schema import PROVENANCE, TABLES, TS, TS_MIN, Domain, PolarsType, domain_of
from attribution.sources.timefmt import PY_MAX_US, PY_MIN_US

MAX_FUTURE_S = 86400.0  # default of the `max_future` setting: a timestamp at most a day after the ingest's clock
_INT64_MAX = float(2**63 - 1)
_EMPTY_ERRORS = pl.DataFrame(schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8})


def ts_max(now: float | None = None, max_future_s: float = MAX_FUTURE_S) -> pl.Expr:
    return pl.lit(int(((time.time() if now is None else now) + max_future_s) * 1e6)).cast(TS)


def _checked(raw: pl.Expr, dtype: PolarsType, raw_dtype: PolarsType, dom: Domain | str, ts_hi: pl.Expr
             ) -> tuple[pl.Expr, pl.Expr]:
    """(value cast to the column's type, or null when out of its domain; the reason it is out, else null)."""
    if dom == "ts":
        if raw_dtype.is_numeric() or raw_dtype == pl.Utf8:  # a parser hands timestamps as Datetime
            return pl.lit(None, TS), pl.lit("not a timestamp")
        v = raw.cast(TS, strict=False)
        lo = pl.lit(TS_MIN).cast(TS)
        reason: pl.Expr = (pl.when(v.is_null()).then(pl.lit("not a timestamp"))
                  .when(v < lo).then(pl.lit("before 2015"))
                  .when(v > ts_hi).then(pl.lit("more than max_future after the ingest's clock")))
        return pl.when(reason.is_null()).then(v), reason
    assert isinstance(dom, Domain)
    # As a float first: an integral check and the range need the value before any truncating cast.
    f = raw.cast(pl.Float64, strict=False)
    unbounded = dom.hi == float("inf")  # a histogram's `+Inf` bucket bound is a value, not an overflow
    too_large = pl.lit(False) if unbounded else f.is_infinite() | (f.abs() > _INT64_MAX)
    reason = (pl.when(f.is_null()).then(pl.lit("not a number"))
              .when(too_large).then(pl.lit("too large"))
              .when(dom.integral and not raw_dtype.is_integer() and (f != f.round(0))).then(pl.lit("not a whole number"))
              .when((f < dom.lo) | (f > dom.hi)).then(pl.lit(f"out of range ({dom.what})")))
    reason = pl.when(f.is_nan()).then(None).otherwise(reason)  # `nan%` is "no value", not an error
    if raw_dtype.is_integer():
        v = raw.cast(dtype, strict=False)
    elif dtype.is_integer():
        v = f.cast(dtype, strict=False)
    else:
        v = f.fill_nan(None).cast(dtype, strict=False)
    return pl.when(reason.is_null()).then(v), reason


def _unique_flags(df: pl.DataFrame) -> pl.DataFrame:
    """A flag named twice in one startup line (a repeated argument) keeps its last value: the view makes a
    MAP of the flags, and a MAP's keys are unique."""
    keys = pl.col("flags").list.eval(pl.element().struct.field("key").n_unique())
    dup = df.select((keys.list.first() != pl.col("flags").list.len()).fill_null(False)).to_series()
    if not dup.any():
        return df
    flags = df["flags"].to_list()  # (rare: a list of structs cannot be scattered into)
    for i in dup.arg_true().to_list():
        flags[i] = list({d["key"]: d for d in flags[i]}.values())
    return df.with_columns(pl.Series("flags", flags, dtype=df.schema["flags"]))


def _sample(col: pl.Series) -> pl.Series:
    """Values as text for the error samples; a time beyond years 1-9999 as microseconds since 1970 (Polars
    cannot print it)."""
    if isinstance(col.dtype, pl.List):
        return pl.Series([None] * col.len(), dtype=pl.Utf8)
    if isinstance(col.dtype, pl.Datetime):
        us = col.dt.epoch("us")
        ok = us.is_between(PY_MIN_US, PY_MAX_US).fill_null(False)
        text = (us.cast(pl.Utf8) + " us since 1970").to_list()
        if ok.any():
            shown = col.filter(ok).cast(pl.Utf8).to_list()
            for i, v in zip(ok.arg_true().to_list(), shown, strict=True):
                text[i] = v
        return pl.Series(text, dtype=pl.Utf8)
    return col.cast(pl.Utf8, strict=False).str.slice(0, 40)


def validate(table: str, df: pl.DataFrame, ts_hi: pl.Expr | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`df` with every value outside its column's domain, or that its column's type cannot hold, set to null,
    and the errors (line, reason, sample): one per value, the sample being the column and the value."""
    df, lost = _type_losses(table, df)
    df, bad = _domain_errors(table, df, ts_hi)
    if not lost.height:
        return df, bad
    return df, pl.concat([bad, lost]).sort("line", nulls_last=True, maintain_order=True)


def _type_losses(table: str, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The columns without a domain (booleans, lists of ids) cast to their type here, so that the store's
    conform, which casts without failing, never drops a value silently: a value present that the cast cannot
    hold (`stream="maybe"`, a hash `x` in block_hashes) is null in its row and one error."""
    schema, fixed, errors = TABLES[table], {}, []
    for name, raw_dtype in df.schema.items():
        dtype = schema.get(name)
        if dtype is None or raw_dtype == dtype or raw_dtype == pl.Null or domain_of(table, name) is not None \
                or name in PROVENANCE:
            continue
        raw = df[name]
        try:
            v = raw.cast(dtype, strict=False)
        except pl.exceptions.PolarsError:  # a cast Polars does not make at all (text to boolean)
            v = pl.Series(name, [None] * raw.len(), dtype=dtype)
        lost = raw.is_not_null() & v.is_null()
        if isinstance(dtype, pl.List) and isinstance(raw.dtype, pl.List):  # an element lost nulls the list
            lost = lost | (raw.list.drop_nulls().list.len() != v.list.drop_nulls().list.len()).fill_null(False)
            v = pl.select(pl.when(pl.lit(lost)).then(None).otherwise(pl.lit(v))).to_series().alias(name)
        fixed[name] = v
        if lost.any():
            errors.append(_error_rows(df, name, lost, f"not a value of type {dtype}"))
    if fixed:
        df = df.with_columns(*fixed.values())
    return df, pl.concat(errors) if errors else _EMPTY_ERRORS


def _domain_errors(table: str, df: pl.DataFrame, ts_hi: pl.Expr | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    ts_hi = ts_max() if ts_hi is None else ts_hi
    if "flags" in df.columns and isinstance(df.schema["flags"], pl.List):
        df = _unique_flags(df)
    fixes, reasons, names = _checks(table, tuple(df.schema.items()))
    if not names or df.height == 0:
        return df, _EMPTY_ERRORS
    bounded = df.with_columns(ts_hi.alias(_TS_HI))  # (the checks read the bound from this column)
    whys = bounded.select([r.alias(f"_why_{i}") for i, r in enumerate(reasons)])
    bad_cols = [i for i, c in enumerate(whys.columns) if whys[c].null_count() < df.height]
    if not bad_cols:
        return df, _EMPTY_ERRORS
    errors = []
    for i in bad_cols:
        why_i = whys[whys.columns[i]]
        errors.append(_error_rows(df, names[i], why_i.is_not_null(), why_i))
    fixed = bounded.with_columns([fixes[i] for i in bad_cols]).drop(_TS_HI)
    return fixed, pl.concat(errors).sort("line", nulls_last=True)


# The checks of a table's columns as parsed, kept per (table, parsed schema): building the expressions costs
# ~0.1-0.2 ms a column in Python, which a small chunk (a wrapped log's) pays on every chunk, and a process
# parsing many small files (the tests) on every file. The upper time bound changes with every ingest's clock,
# so the checks read it from a column (_TS_HI) the frame is given while they run, not from a literal.
_CHECKS: dict[tuple[object, ...], tuple[list[pl.Expr], list[pl.Expr], list[str]]] = {}
_TS_HI = "__ts_hi"


def _checks(table: str, parsed: tuple[tuple[str, PolarsType], ...]
            ) -> tuple[list[pl.Expr], list[pl.Expr], list[str]]:
    """For each column of `parsed` (name, type as parsed) with a domain: the value fixed (null when out of
    the domain), the reason it is out (else null), the name. A time's bound is the column _TS_HI."""
    key = (table, parsed)
    if (hit := _CHECKS.get(key)) is not None:
        return hit
    ts_hi = pl.col(_TS_HI)  # (no list column has a time domain: inside list.eval this would name the element)
    schema = TABLES[table]
    fixes: list[pl.Expr] = []
    reasons: list[pl.Expr] = []
    names: list[str] = []
    for name, raw_dtype in parsed:
        dom = domain_of(table, name) if name in schema else None
        if dom is None:
            continue
        dtype = schema[name]
        if isinstance(dtype, pl.List):  # per-position rates: each element in the domain, else the list is null
            if not isinstance(raw_dtype, pl.List):
                continue
            inner = raw_dtype.inner
            _, why = _checked(pl.element(), dtype.inner, inner, dom, ts_hi)
            bad = pl.col(name).list.eval(why.is_not_null() & pl.element().is_not_null()).list.any()
            fixes.append(pl.when(bad.fill_null(False)).then(None).otherwise(pl.col(name)).alias(name))
            what = dom.what if isinstance(dom, Domain) else dom
            reasons.append(pl.when(bad).then(pl.lit(f"an element out of range ({what})")))
        else:
            v, why = _checked(pl.col(name), dtype, raw_dtype, dom, ts_hi)
            why = pl.when(pl.col(name).is_not_null()).then(why)
            fixes.append(v.alias(name))
            reasons.append(why)
        names.append(name)
    if len(_CHECKS) >= 256:  # (bounded: a long-lived process parses many schemas)
        _CHECKS.clear()
    _CHECKS[key] = fixes, reasons, names
    return fixes, reasons, names


def _error_rows(df: pl.DataFrame, name: str, mask: pl.Series, why: pl.Series | str) -> pl.DataFrame:
    """One ingest error per value of column `name` where `mask` holds: its line, why, and the value."""
    line = df["line"].cast(pl.Int64) if "line" in df.columns else pl.Series("line", [None] * df.height, pl.Int64)
    reason = why.filter(mask) if isinstance(why, pl.Series) else pl.Series([why] * int(mask.sum()), dtype=pl.Utf8)
    return pl.DataFrame({
        "line": line.filter(mask),
        "reason": (f"{name} " + reason + ": stored as null"),
        "sample": (f"{name}=" + _sample(df[name].filter(mask)).fill_null("?")),
    })
