"""JSON access logs of API gateways (Envoy AI Gateway, NGINX `escape=json`, Kong) -> `requests` (gateway),
through field-mapping profiles kept as TOML data (`attribution/mappings/*.toml`; full reference in
docs/mappings.md). A profile has `name`, `[sniff]` `all`/`any` (JSON paths that must be / at least one of
which must be present in the first JSON line) and `[columns]`: requests column = a JSON path (`$.a.b`,
`$."key.with.dots"`), a list of alternatives, or `{paths, format, unit, tz, split}` (times: auto, iso8601,
epoch_s/ms/us or strftime; durations: s/ms/us). The best built-in profile is picked from the first JSON
line; `options["mapping"]` (`--mapping`) names a user TOML file or a built-in profile and wins. Also home
of the JSON-record helpers the LiteLLM sources share.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import duckdb
import polars as pl

from attribution.db import fetch, scratch
from attribution.errors import UsageError
from attribution.keys import gateway_request_key
from attribution.privacy import SECRET_RE, hash_key, hash_key_expr
from attribution.schema import REQUESTS, TS
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.sources.common import ANSI_RE, RFC3339_PREFIX_RE, SUPERVISOR_PREFIX_RE, clean
from attribution.sources.timefmt import to_utc

# Values that mean "no value": NGINX logs `-` for an unset variable, SpendLogs CSV exports write `None`.
NULL_TEXT = ["", "-", "null", "None", "NULL"]
_EPOCH_DIGITS = {"epoch_s": 6, "epoch_ms": 3, "epoch_us": 0}
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_STRING_COLS = ["request_id", "model", "key_alias", "team", "user", "deployment", "error", "finish_reason",
                "workload", "status"]
# Each line's values at the paths, NULL when it does not parse: one parse with TRY (DuckDB 1.3+), else a
# json_valid test first (pyproject allows DuckDB 1.1).
_TRY_EXTRACT = "try(json_extract_string(text, $paths::VARCHAR[]))"
_VALID_EXTRACT = "case when json_valid(text) then json_extract_string(text, $paths::VARCHAR[]) end"
_EXTRACT = _TRY_EXTRACT if tuple(int(x) for x in duckdb.__version__.split(".")[:2]) >= (1, 3) else _VALID_EXTRACT
# A JSON object key: used to build error samples that show a line's shape but never its values.
_KEY_RE = r'"(?:[^"\\]|\\.)*"\s*:'


# -- JSON records (shared with litellm.py) -------------------------------------------------------------


def json_records(lines: pl.DataFrame, paths: dict[str, list[str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(line, text) -> (records, errors). A record is a line holding a JSON object (after stripping ANSI codes
    and Docker/kubectl/supervisor prefixes); it gets one Utf8 column per name in `paths`: the first value
    found among that name's JSON paths, as text (objects as JSON). Lines that are not JSON are noise; lines
    that start like an object but do not parse are errors. DuckDB parses each line once for all paths
    (several times faster than one `str.json_path_match` pass per path); lines are never copied whole."""
    if lines.height and lines["text"][0].startswith("\ufeff"):
        lines = lines.with_columns(lines["text"].scatter(0, lines["text"][0][1:]))
    is_obj = pl.col("text").str.contains(r"^\s*\{")
    rest = lines.filter(~is_obj)
    if rest.height == 0:
        df = lines  # pure NDJSON: no copy
    else:
        rest = rest.with_columns(clean(pl.col("text"))).filter(is_obj)
        df = pl.concat([lines.filter(is_obj), rest]).sort("line")
    spec = tuple((n, tuple(ps)) for n, ps in paths.items())
    con = scratch()
    try:
        con.register("j", df.select("line", "text"))
        # One parse per line: `try` turns the extraction's error on a document that does not parse into NULL
        # (a document that parses always gives a list), so no separate json_valid pass reads every line again.
        # Rows come back in input order (DuckDB preserves insertion order for a plain projection).
        sql = ("select line, v, case when v is null then regexp_extract_all(left(text, 2000), $keys) end as keys "
               f"from (select line, text, {_EXTRACT} as v from j)")
        got = fetch(con, sql, {"paths": [p for _, ps in spec for p in ps], "keys": _KEY_RE})
    finally:
        con.close()
    errors = got.filter(pl.col("v").is_null()).select(
        "line", pl.lit("malformed JSON: the line starts like an object but does not parse").alias("reason"),
        _keys_text(pl.col("keys")).alias("sample"))
    return got.filter(pl.col("v").is_not_null()).select("line", *_fields(spec)), errors


@lru_cache(maxsize=64)
def _fields(spec: tuple[tuple[str, tuple[str, ...]], ...]) -> list[pl.Expr]:
    """The named fields out of the list of values at every path (`v`, in the order of `spec`): the first of a
    name's paths whose value is not one of the no-value texts. Resolved here rather than by a `CASE` per path
    in the query: DuckDB planned those on every call (~15 ms a call, whatever the lines), and evaluating them
    cost more than Polars does (0.126 -> 0.113 s on a 33 MB chunk)."""
    out: list[pl.Expr] = []
    i = 0
    for name, ps in spec:
        vals = [pl.col("v").list.get(j) for j in range(i, i + len(ps))]
        i += len(ps)
        kept = [pl.when(~x.is_in(NULL_TEXT)).then(x) for x in vals]  # a null value stays null
        out.append((kept[0] if len(kept) == 1 else pl.coalesce(kept)).alias(name))
    return out


def _keys_text(keys: pl.Expr) -> pl.Expr:
    # `"name":` kept with its colon: the ingest keeps an error sample's identifier-like keys, masks other strings
    return pl.concat_str(pl.lit("keys: "), keys.list.eval(pl.element().str.replace(r"\s*:$", ":")).list.join(" "))


def samples(lines: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Error samples (line, sample) for the lines of `rows`: each line's JSON keys, never its values."""
    return lines.filter(pl.col("line").is_in(rows["line"].implode())).select(
        "line", _keys_text(pl.col("text").str.slice(0, 2000).str.extract_all(_KEY_RE)).alias("sample"))


def epoch(raw: pl.Expr, unit: str = "epoch_s") -> pl.Expr:
    """Epoch text -> UTC Datetime(us), exact for decimal text (`1739235379.683053` keeps every digit)."""
    digits = _EPOCH_DIGITS[unit]
    m = raw.str.extract_groups(r"^(?<i>\d+)(?:\.(?<f>\d+))?$")
    us = m.struct.field("i").cast(pl.Int64, strict=False) * 10**digits
    if digits:
        us = us + m.struct.field("f").fill_null("").str.slice(0, digits).str.pad_end(digits, "0").cast(pl.Int64, strict=False)
    approx = (raw.cast(pl.Float64, strict=False) * 10**digits).round().cast(pl.Int64, strict=False)
    return pl.from_epoch(pl.coalesce(us, approx), time_unit="us").dt.replace_time_zone("UTC")


def iso_time(raw: pl.Expr, tz: str) -> pl.Expr:
    """`YYYY-MM-DD[T ]HH:MM:SS[.f][Z|+hh[:mm]]` -> UTC; a time without an offset is read in zone `tz`."""
    s = raw.str.replace(r"^(\d{4}-\d\d-\d\d)[T ]", "${1} ").str.replace(r"\s+([+-]\d\d(?::?\d\d)?|Z)$", "${1}")
    naive = s.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    aware = s.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%#z", strict=False, time_unit="us")
    return pl.coalesce(to_utc(naive, tz), aware.dt.convert_time_zone("UTC"))


# What `auto` reads as epoch seconds.
NUMBER_RE = r"^\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$"


def parse_time(raw: pl.Expr, fmt: str = "auto", tz: str = "UTC") -> pl.Expr:
    """Text -> UTC Datetime(us). `fmt`: auto (a number is epoch seconds, else ISO-8601), iso8601, epoch_s,
    epoch_ms, epoch_us, or a strftime pattern (read in `tz` unless it has %z)."""
    if fmt in _EPOCH_DIGITS:
        return epoch(raw, fmt)
    if fmt == "iso8601":
        return iso_time(raw, tz)
    if fmt == "auto":
        numeric = raw.str.contains(NUMBER_RE)
        return pl.when(numeric).then(epoch(raw)).otherwise(iso_time(raw, tz))
    parsed = raw.str.to_datetime(fmt, strict=False, time_unit="us")
    aware = any(z in fmt for z in ("%z", "%#z", "%:z"))
    return parsed.dt.convert_time_zone("UTC") if aware else to_utc(parsed, tz)


def host_of(url: pl.Expr) -> pl.Expr:
    """`https://user:pw@10.0.0.5:8000/v1` -> `10.0.0.5:8000`: the upstream replica, never credentials."""
    return url.str.extract(r"^(?:[A-Za-z][A-Za-z0-9+.\-]*://)?(?:[^@/]*@)?([^/?#]+)", 1)


def scrub(df: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """Replace every raw key (`sk-...`, `Bearer ...`) inside these text columns by its sha256 hex."""
    texts = [c for c in cols if c in df.columns and df[c].dtype == pl.Utf8]
    if not texts or df.height == 0:
        return df
    # Which columns hold a key at all, in one pass (a pass per column cost ~0.25 ms each on a small file).
    found = df.select(pl.col(c).str.contains(SECRET_RE).fill_null(False).any() for c in texts).row(0)
    for c, any_key in zip(texts, found, strict=True):
        if not any_key:
            continue
        hit = df[c].str.contains(SECRET_RE).fill_null(False)  # (rare: the per-value Python runs on the hits only)
        fixed = df[c].filter(hit).map_elements(
            lambda s: re.sub(SECRET_RE, lambda m: hash_key(m.group(0)) or "", s), return_dtype=pl.Utf8)
        df = df.with_columns(df[c].scatter(hit.arg_true(), fixed))
    return df


def seconds_between(start: pl.Expr, end: pl.Expr) -> pl.Expr:
    # Rounded to the microsecond the timestamps have: Polars divides by multiplying with the reciprocal,
    # which would turn 4583 us into 0.004582999999999999 s.
    return ((end - start).dt.total_microseconds() / 1e6).round(6)


def finish(df: pl.DataFrame) -> pl.DataFrame:
    """Shared tail of every gateway source: derive the missing one of arrival / finished / e2e_s and of
    first_token / ttft_s, status from http_status, the hashed key, the join key and the workload
    (key alias, else team, else hashed key, else model: DESIGN.md); drop helper columns."""
    us = pl.duration(microseconds=(pl.col("e2e_s") * 1e6).round().cast(pl.Int64, strict=False))
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in (("arrival", TS), ("finished", TS), ("e2e_s", pl.Float64),
               ("first_token", TS), ("ttft_s", pl.Float64)) if c not in df.columns]
    if missing:
        df = df.with_columns(missing)
    secs = seconds_between(pl.col("arrival"), pl.col("finished"))
    df = df.with_columns(pl.coalesce("arrival", pl.col("finished") - us).alias("arrival"),
                         pl.coalesce("finished", pl.col("arrival") + us).alias("finished"),
                         pl.coalesce("e2e_s", secs).alias("e2e_s"))
    ttft_us = pl.duration(microseconds=(pl.col("ttft_s") * 1e6).round().cast(pl.Int64, strict=False))
    df = df.with_columns(
        pl.coalesce("first_token", pl.col("arrival") + ttft_us).alias("first_token"),
        pl.coalesce("ttft_s", seconds_between(pl.col("arrival"), pl.col("first_token"))),
    )
    if "http_status" in df.columns and "status" not in df.columns:
        code = pl.col("http_status")
        # Envoy logs 0 for a request aborted before any response; 499 is NGINX's "client closed request".
        df = df.with_columns(pl.when(code.is_in([0, 499])).then(pl.lit("aborted")).when(code < 400)
                             .then(pl.lit("ok")).when(code.is_not_null()).then(pl.lit("error")).alias("status"))
    if "key_hash" in df.columns:
        df = df.with_columns(hash_key_expr(pl.col("key_hash")))
    df = scrub(df, _STRING_COLS)
    if "request_key" not in df.columns and "request_id" in df.columns:
        df = df.with_columns(gateway_request_key(pl.col("request_id")).alias("request_key"))
    if "workload" not in df.columns:
        # model_group (LiteLLM: the public model name the client asked for) before the served model.
        who = [c for c in ("key_alias", "team", "key_hash", "model_group", "model") if c in df.columns]
        if who:
            df = df.with_columns(pl.coalesce(who).alias("workload"))
    return df.select([c for c in df.columns if c in REQUESTS])


# -- mapping profiles ----------------------------------------------------------------------------------

_MAPPABLE = [c for c in REQUESTS if c not in
             {"request_key", "source", "source_kind", "file", "line", "label", "engine", "engine_version",
              "block_hashes"}]


@dataclass(frozen=True)
class Column:
    paths: tuple[str, ...]
    format: str = "auto"  # time columns
    unit: str = "s"  # duration columns (`*_s`)
    tz: str = "UTC"  # naive time text; "local" = the ingest's --tz
    split: str | None = None  # the value may be a list joined by this (NGINX retries): keep the last item


@dataclass(frozen=True)
class Profile:
    name: str
    origin: str  # file it came from, for messages
    sniff_all: tuple[str, ...]
    sniff_any: tuple[str, ...]
    columns: dict[str, Column]

    def score(self, present: set[str]) -> float:
        """0 unless every `all` path and, when listed, at least one `any` path is present."""
        if not self.sniff_all or not set(self.sniff_all) <= present:
            return 0.0
        if not self.sniff_any:
            return 0.7
        hits = sum(p in present for p in self.sniff_any)
        return 0.0 if hits == 0 else 0.7 + 0.25 * hits / len(self.sniff_any)


def _paths(value: object, where: str) -> tuple[str, ...]:
    paths = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, list) else ()
    if not paths or not all(isinstance(p, str) for p in paths):
        raise UsageError(f"{where}: expected a JSON path or a list of JSON paths")
    for p in paths:
        if not p.startswith("$") or "*" in p:
            raise UsageError(f"{where}: {p!r} is not a JSON path like $.a.b or $.\"key.with.dots\" (no *)")
    return paths


def _check_paths(profile: Profile) -> None:
    """DuckDB must accept every JSON path of a profile."""
    where = {p: f"mapping {profile.origin}: sniff" for p in profile.sniff_all + profile.sniff_any}
    for name, col in profile.columns.items():
        where.update({p: f"mapping {profile.origin}: columns.{name}" for p in col.paths})
    con = scratch()
    try:
        try:  # every path in one query (a query each cost ~1 ms, paid by every ingest worker at its start)
            con.execute("select json_extract_string('{}', ?::VARCHAR[])", [list(where)]).fetchall()
            return
        except duckdb.Error:
            pass  # one is bad: find which, to name it
        for p, at in where.items():
            try:
                con.execute("select json_extract_string('{}', ?)", [p]).fetchall()
            except duckdb.Error as e:
                raise UsageError(f"{at}: bad JSON path {p!r}: {e}") from None
    finally:
        con.close()


def _column(name: str, spec: object, where: str) -> Column:
    if not isinstance(spec, dict):
        return Column(_paths(spec, where))
    unknown = set(spec) - {"paths", "format", "unit", "tz", "split"}
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)} (allowed: paths, format, unit, tz, split)")
    col = Column(_paths(spec.get("paths"), where), str(spec.get("format", "auto")), str(spec.get("unit", "s")),
                 str(spec.get("tz", "UTC")), spec.get("split"))
    if col.unit not in _UNIT:
        raise UsageError(f"{where}: unit must be one of {sorted(_UNIT)}, not {col.unit!r}")
    return col


def load_profile(text: str, origin: str) -> Profile:
    """Parse and check a mapping (TOML text); every problem is a UsageError naming `origin`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"mapping {origin}: not valid TOML: {e}") from None
    cols = doc.get("columns")
    if not isinstance(cols, dict) or not cols:
        raise UsageError(f"mapping {origin}: needs a [columns] table mapping request columns to JSON paths")
    unknown = sorted(set(cols) - set(_MAPPABLE))
    if unknown:
        raise UsageError(f"mapping {origin}: unknown columns {unknown}; mappable: {', '.join(_MAPPABLE)}")
    if not {"arrival", "finished"} & set(cols):
        raise UsageError(f"mapping {origin}: map at least one of arrival or finished")
    sniff = doc.get("sniff", {})
    profile = Profile(
        name=str(doc.get("name", Path(origin).stem)),
        origin=origin,
        sniff_all=_paths(sniff["all"], f"mapping {origin}: sniff.all") if "all" in sniff else (),
        sniff_any=_paths(sniff["any"], f"mapping {origin}: sniff.any") if "any" in sniff else (),
        columns={k: _column(k, v, f"mapping {origin}: columns.{k}") for k, v in cols.items()},
    )
    _check_paths(profile)
    return profile


@cache
def builtin_profiles() -> dict[str, Profile]:
    out = {}
    # package data of `attribution` (pyproject: "**/*.toml"), not a package of its own
    for f in sorted((resources.files("attribution") / "mappings").iterdir(), key=lambda f: f.name):
        if f.name.endswith(".toml"):
            p = load_profile(f.read_text(encoding="utf-8"), f"attribution/mappings/{f.name}")
            out[p.name] = p
    return out


@cache
def _user_profile(path: str, mtime: float) -> Profile:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"mapping {path}: cannot read: {e.strerror}") from None
    return load_profile(text, path)


def resolve_mapping(value: str) -> Profile:
    """`--mapping`: a TOML file, or the name of a built-in profile."""
    if value in builtin_profiles() and not Path(value).is_file():
        return builtin_profiles()[value]
    p = Path(value)
    if not p.is_file():
        raise UsageError(f"--mapping {value}: no such file and no built-in profile of that name "
                         f"(built-in: {', '.join(builtin_profiles())})")
    return _user_profile(str(p.resolve()), p.stat().st_mtime)


def best_profile(text: str) -> tuple[float, Profile | None]:
    """The built-in profile that fits one JSON object line best (0, None when none fits)."""
    profiles = list(builtin_profiles().values())
    paths = sorted({p for pr in profiles for p in pr.sniff_all + pr.sniff_any})
    con = scratch()
    try:
        sql = "select json_valid(?), case when json_valid(?) then json_exists(?, ?::VARCHAR[]) end"
        ((ok, exists),) = con.sql(sql, params=[text, text, text, paths]).fetchall()
    finally:
        con.close()
    if not ok or exists is None:
        return 0.0, None
    present = {p for p, e in zip(paths, exists, strict=True) if e}
    scored = sorted(((pr.score(present), pr.name, pr) for pr in profiles), key=lambda t: (t[0], t[1]), reverse=True)
    return (scored[0][0], scored[0][2]) if scored and scored[0][0] > 0 else (0.0, None)


def json_lines(head: str, limit: int = 1) -> list[str]:
    """The first `limit` lines of a text that hold a JSON object (after the clean-up `json_records` does)."""
    found = []
    for line in head.lstrip("\ufeff").split("\n"):
        if "{" not in line:  # (the clean-up only removes text: such a line never holds an object)
            continue
        s = line.strip()
        if not s.startswith("{"):
            s = re.sub(ANSI_RE, "", s)
            for prefix in (RFC3339_PREFIX_RE, SUPERVISOR_PREFIX_RE, RFC3339_PREFIX_RE):
                s = re.sub(prefix, "", s)
            s = s.strip()
        if s.startswith("{"):
            found.append(s)
            if len(found) >= limit:
                break
    return found


def first_json_line(head: str) -> str | None:
    found = json_lines(head)
    return found[0] if found else None


# -- the source ----------------------------------------------------------------------------------------


def _typed(name: str, col: Column, raw: pl.Expr, ctx_tz: str) -> pl.Expr:
    if col.split:
        raw = raw.str.split(col.split).list.last().str.strip_chars()
    dtype = REQUESTS[name]
    if dtype == TS:
        return parse_time(raw, col.format, ctx_tz if col.tz == "local" else col.tz)
    if dtype == pl.Float64:
        value = raw.cast(pl.Float64, strict=False)
        return value if col.unit == "s" else (value * _UNIT[col.unit]).round(9)  # 1526 ms -> 1.526, not ...002
    if dtype == pl.Int64:
        return raw.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
    if dtype == pl.Boolean:
        low = raw.str.to_lowercase()
        return pl.when(low.is_in(["true", "1", "yes"])).then(True).when(low.is_in(["false", "0", "no"])).then(False)
    return raw


class AccessLog(Source):
    name = "access_log"
    kind = "gateway"
    description = "JSON access log of Envoy AI Gateway, NGINX escape=json or Kong (mapping profiles; --mapping)"

    def sniff(self, head: str, path: str) -> float:
        line = first_json_line(head)
        return best_profile(line)[0] if line else 0.0

    def _profile(self, lines: pl.DataFrame, ctx: ParseContext) -> Profile | None:
        if ctx.options.get("mapping"):
            return resolve_mapping(str(ctx.options["mapping"]))
        if "profile" in ctx.state:
            return builtin_profiles()[ctx.state["profile"]]
        candidates = lines.filter(pl.col("text").str.contains("{", literal=True)).head(50)["text"]
        found = json_lines("\n".join(candidates.to_list()), limit=50)
        if not found:
            return None  # no JSON yet: decide on a later chunk
        # The first line a profile fits decides (a JSON line of some other logger may come first).
        prof = next((p for _, p in map(best_profile, found) if p is not None), None)
        if prof is None:
            raise UsageError(f"{ctx.path}: no built-in access-log mapping fits its JSON lines "
                             f"(built-in: {', '.join(builtin_profiles())}); pass --mapping FILE.toml")
        ctx.state["profile"] = prof.name
        return prof

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        out = ParseResult()
        prof = self._profile(lines, ctx)
        if prof is None:
            return out
        recs, errors = json_records(lines, {k: list(c.paths) for k, c in prof.columns.items()})
        out.add_errors(errors)
        times = [c for c in prof.columns if REQUESTS[c] == TS]
        # A JSON line with none of the mapped times is some other record (not a request): skipped.
        recs = recs.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in times))
        recs = recs.with_columns(_typed(k, c, pl.col(k), ctx.tz).alias(f"{k}__t") for k, c in prof.columns.items())
        bad = pl.any_horizontal(pl.col(c).is_not_null() & pl.col(f"{c}__t").is_null() for c in times)
        recs = recs.with_columns(bad.alias("bad"))
        reason = f"unparseable time at the paths of {', '.join(times)} (mapping {prof.name})"
        out.add_errors(samples(lines, recs.filter("bad")).with_columns(pl.lit(reason).alias("reason")))
        typed = recs.filter(~pl.col("bad")).select("line", *(pl.col(f"{k}__t").alias(k) for k in prof.columns))
        if "deployment" in typed.columns:
            typed = typed.with_columns(host_of(pl.col("deployment")).alias("deployment"))
        out.add("requests", finish(typed))
        return out


SOURCES = [AccessLog()]
