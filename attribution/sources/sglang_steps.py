"""SGLang scheduler `Prefill batch` / `Decode batch` lines -> `engine_steps` (engine-logs.md S-1). The field
list changed in nearly every release, so a line is read as a header plus a list of `key: value` pairs, and
keys not in FIELDS are skipped: a new field never breaks a line.
"""

from __future__ import annotations

import re

import polars as pl

from attribution.privacy import redact_expr
from attribution.sources._sglang_header import msg_starts_with

KIND_RE = r"^(?:Prefill|Decode) batch(?:\(| \[|[.,])"
LINE_RE = r"^(Prefill|Decode) batch(?:\(mixed #running-req: (\d+)\))?(?: \[\d+\])?[.,](?: (.*))?$"
# key: value, where a value may continue with `, full=...` / `, swa=...` (the SWA pool form).
PAIR_RE = r"[^:,]+: [^,]*(?:, [a-z_]+=[^,]*)*"

# log key -> (column, type); several keys can feed one column (plain and hybrid pool names).
FIELDS: dict[str, tuple[str, str]] = {
    "#new-seq": ("new_seqs", "int"),
    "#new-token": ("new_tokens", "int"),
    "#cached-token": ("cached_tokens", "int"),
    "token usage": ("kv_usage", "float"),
    "full token usage": ("kv_usage", "float"),
    "swa token usage": ("swa_usage", "float"),
    "mamba usage": ("state_usage", "float"),
    "mamba num": ("state_slots", "int"),
    "#token": ("kv_tokens", "int"),
    "#full token": ("kv_tokens", "int"),
    "#running-req": ("running", "int"),
    "#queue-req": ("waiting", "int"),
    "#pending-token": ("pending_tokens", "int"),
    "accept len": ("accept_len", "float"),
    "gen throughput (token/s)": ("gen_tput", "float"),
    "input throughput (token/s)": ("prompt_tput", "float"),
    "cache hit rate": ("prefix_hit_rate", "pct"),
    "cuda graph": ("cuda_graph", "bool"),
    "cpu graph": ("cuda_graph", "bool"),
    "npu graph": ("cuda_graph", "bool"),
    "musa graph": ("cuda_graph", "bool"),
}
COLUMNS: dict[str, str] = {col: typ for col, typ in FIELDS.values()}
# A body in the plain form `key: value, key: value, ...` (no `=`, so no SWA values; no `,` in a value) has one
# shape per release and kind: its keys, `: value` replaced by `:=`. A shape whose keys are printable ASCII with
# one space after each comma is read by position (PAIR_RE would give the same pairs), the rest by PAIR_RE.
_SHAPE_KEY_RE = re.compile(r"[!-~](?:[ -~]*[!-~])?")
_SHAPES_MAX = 32  # distinct plain shapes read by position per chunk (the rest go through PAIR_RE)
_ROUNDS = 4  # shapes found by an anchored test, before writing the remaining rows' shapes


def _cast(expr: pl.Expr, typ: str) -> pl.Expr:
    s = expr.str.strip_chars()
    if typ == "int":
        return s.cast(pl.Int64, strict=False)
    if typ == "float":
        return s.cast(pl.Float64, strict=False)
    if typ == "pct":
        return s.str.strip_suffix("%").cast(pl.Float64, strict=False) / 100.0
    return pl.when(s == "True").then(True).when(s == "False").then(False).otherwise(None)


def parse_steps(df: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """Headed segments -> (engine_steps rows, errors). Only segments with a header are considered.

    Header: `Prefill batch` / `Decode batch`, optional `(mixed #running-req: N)` (0.3.2) and ` [iter]`
    (SGLANG_LOG_FORWARD_ITERS), then `.` or `,`. The SWA form `#token: full=N, swa=N, token usage: full=0.XX,
    swa=0.XX` keeps its `, swa=` part in the value: `full=` feeds the plain column, `swa=` swa_usage. Hybrid
    pools: `full token usage` is kv_usage, `#full token` kv_tokens, `mamba usage` / `mamba num` state_usage /
    state_slots. A line with an unreadable known value or no `#running-req` is an error, not a row.
    """
    msg = pl.col("msg")
    # the literal tests first: the regex then runs only on batch lines
    batch = msg_starts_with(df, "Prefill batch") | msg_starts_with(df, "Decode batch")
    # (only the columns used below: every filter, join and sort then moves 5 columns instead of the 18 given)
    cand = df.select("line", "seg", "ts", "engine_index", "msg").filter(df["has_header"] & batch) \
        .filter(msg.str.contains(KIND_RE))
    if cand.height == 0:
        return None, None
    # The usual headers read by literal tests (LINE_RE reads them the same; its `.` stops at a newline, hence
    # the test for one), LINE_RE only on the others.
    usual = (msg.str.starts_with("Prefill batch, ") | msg.str.starts_with("Decode batch, ")) \
        & ~msg.str.contains("\n", literal=True)
    prefill = msg.str.starts_with("P")
    cand = cand.with_row_index("_i")
    quick = cand.filter(usual).with_columns(
        pl.when(prefill).then(pl.lit("prefill")).otherwise(pl.lit("decode")).alias("kind"),
        pl.lit(None, pl.Int64).alias("_mixed_running"),
        msg.str.slice(pl.when(prefill).then(15).otherwise(14)).alias("_body"),
    )
    slow = cand.filter(~usual)
    if slow.height:
        slow = slow.with_columns(msg.str.extract_groups(LINE_RE).alias("_m")).with_columns(
            pl.col("_m").struct.field("1").str.to_lowercase().alias("kind"),
            pl.col("_m").struct.field("2").cast(pl.Int64, strict=False).alias("_mixed_running"),
            pl.col("_m").struct.field("3").fill_null("").alias("_body"),
        ).drop("_m")
        quick = pl.concat([quick, slow]).sort("_i")
    cand = quick.drop("_i")
    bad_head = cand.filter(pl.col("kind").is_null())
    cand = cand.filter(pl.col("kind").is_not_null()).with_row_index("_r")
    plain, rest = read_by_position(cand)
    wide = pl.concat([plain, read_by_pairs(rest)]) if rest.height else plain
    rows = cand.select("_r", "line", "seg", "ts", "engine_index", "kind", "_mixed_running", "msg").join(
        wide, on="_r", how="left", maintain_order="left"
    )
    return _typed_rows(rows, bad_head)


def read_by_position(cand: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(raw values of the rows whose body has a plain shape: `_r` + COLUMNS as text, the other rows' `_r`,
    `_body`). Each shape's keys are known, so a value is the text after `key: ` of the pair at its position:
    one literal split per row instead of a regex scan, an explode and a group_by.

    A chunk has one or two shapes (one per kind and release): the first remaining row's shape is taken, and
    the rows of that shape found by one anchored test (`^k1: [^,=]*, k2: ...$`, 6x cheaper than writing
    every row's shape); after _ROUNDS shapes, every remaining row's shape is written and grouped."""
    body = pl.col("_body")
    plain = body.str.contains("=", literal=True).not_().fill_null(False)  # (`=`: the SWA form, PAIR_RE's)
    left = cand.select("_r", "_body", plain.alias("_plain"))
    rest = [left.filter(~pl.col("_plain")).select("_r", "_body")]
    left = left.filter("_plain").select("_r", "_body")
    parts = []
    for _ in range(_ROUNDS):
        if left.height == 0:
            break
        keys = _shape_keys(left.head(1).select(body.str.replace_all(r": [^,]*", ":="))["_body"][0])
        if keys is None:
            break
        hit = left.select(body.str.contains(_shape_re(keys)).fill_null(False).alias("_hit"))["_hit"]
        if not hit.any():  # (cannot happen: the row has its own shape; never loop on it)
            break
        parts.append(_values(left.filter(hit), keys))
        left = left.filter(~hit)
    if left.height:
        got, other = _by_shapes(left)
        parts += got
        rest.append(other)
    empty = pl.DataFrame(schema={"_r": pl.UInt32, **{c: pl.String for c in COLUMNS}})
    return pl.concat(parts) if parts else empty, pl.concat(rest)


def _shape_re(keys: list[str]) -> str:
    """The bodies whose shape (`: value` replaced by `:=`) has exactly these keys, with no `=` anywhere."""
    esc = pl.select(pl.Series(keys).str.escape_regex()).to_series().to_list()
    return "^" + ", ".join(f"{k}: [^,=]*" for k in esc) + "$"


def _by_shapes(left: pl.DataFrame) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """Rows (`_r`, `_body`, no `=`) grouped by their written shape: the values of the _SHAPES_MAX commonest
    readable shapes, and the other rows."""
    shaped = left.with_columns(pl.col("_body").str.replace_all(r": [^,]*", ":=").alias("_shape"))
    counts = shaped.group_by("_shape").len().drop_nulls().sort("len", descending=True).head(_SHAPES_MAX)
    parts, done = [], []
    for shape in counts["_shape"]:  # a loop over a chunk's few distinct shapes
        keys = _shape_keys(shape)
        if keys is None:
            continue
        done.append(shape)
        parts.append(_values(shaped.filter(pl.col("_shape") == shape), keys))
    rest = shaped.filter(~pl.col("_shape").is_in(done) | pl.col("_shape").is_null()).select("_r", "_body")
    return parts, rest


def _values(rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`_r` + COLUMNS as text of rows whose bodies all have the shape of `keys`."""
    first: dict[str, int] = {}  # column -> position of its first pair (the pair PAIR_RE would pick)
    for i, k in enumerate(keys):
        if k in FIELDS:
            first.setdefault(FIELDS[k][0], i)
    vals = pl.col("_v")  # split once (an eager select would split again for every column)
    got = rows.select("_r", pl.col("_body").str.split(", ").alias("_v"))
    return got.select("_r", *(
        (vals.list.get(first[c]).str.slice(len(keys[first[c]]) + 2) if c in first
         else pl.lit(None, pl.String)).alias(c) for c in COLUMNS))


def _shape_keys(shape: str) -> list[str] | None:
    """The keys of a plain shape (`k1:=, k2:=`), or None when its pairs cannot be read by position."""
    segs = shape.split(",")
    keys = []
    for i, seg in enumerate(segs):
        if not seg.endswith(":=") or ":" in seg[:-2] or "=" in seg[:-2]:
            return None
        key = seg[:-2] if i == 0 else seg[1:-2] if seg.startswith(" ") else None
        if key is None or not _SHAPE_KEY_RE.fullmatch(key):
            return None
        keys.append(key)
    return keys


def read_by_pairs(cand: pl.DataFrame) -> pl.DataFrame:
    """Raw values (`_r` + COLUMNS as text) of bodies of any form, through PAIR_RE."""
    # A pair's first `:` is followed by a space (PAIR_RE), so splitting at the first `: ` gives key and value.
    kv = pl.col("_kv").struct
    pairs = (
        cand.select("_r", pl.col("_body").str.extract_all(PAIR_RE).alias("_p"))
        .explode("_p")
        .filter(pl.col("_p").is_not_null())
        .select("_r", pl.col("_p").str.splitn(": ", 2).alias("_kv"))
        .select("_r", kv.field("field_0").str.strip_chars().alias("key"), kv.field("field_1").alias("value"))
    )
    # The SWA form puts both pools in one value: `full=` goes to the plain column, `swa=` to swa_usage.
    is_split = pl.col("value").str.contains(r"^\s*full=")
    full_part = pl.col("value").str.extract(r"full=([^,]*)")
    swa_part = pl.col("value").str.extract(r"swa=([^,]*)")
    keymap = pl.DataFrame({"key": list(FIELDS), "col": [c for c, _ in FIELDS.values()]})
    known = pairs.join(keymap, on="key", how="inner", maintain_order="left")
    long = pl.concat(
        [
            known.select("_r", "col", pl.when(is_split).then(full_part).otherwise("value").alias("v")),
            known.filter(is_split & (pl.col("key") == "token usage")).select(
                "_r", pl.lit("swa_usage").alias("col"), swa_part.alias("v")
            ),
        ]
    )
    return long.group_by("_r").agg([pl.col("v").filter(pl.col("col") == c).first().alias(c) for c in COLUMNS])


def _typed_rows(rows: pl.DataFrame, bad_head: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Raw values -> typed engine_steps rows and the errors (unreadable values, no `#running-req`)."""
    # each value cast once (beside its text), then compared with its text
    rows = rows.with_columns(_cast(pl.col(col), typ).alias(f"{col}__t") for col, typ in COLUMNS.items())
    bad = [pl.when(pl.col(col).is_not_null() & pl.col(f"{col}__t").is_null()).then(pl.lit(f"unreadable value for {col}"))
           for col in COLUMNS]
    rows = rows.with_columns(*(pl.col(f"{col}__t").alias(col) for col in COLUMNS), pl.coalesce(bad).alias("_bad"))
    rows = rows.drop(f"{col}__t" for col in COLUMNS).with_columns(
        pl.coalesce("running", "_mixed_running").alias("running")
    )
    rows = rows.with_columns(
        pl.when(pl.col("_bad").is_not_null())
        .then("_bad")
        .when(pl.col("running").is_null())
        .then(pl.lit("batch line without #running-req"))
        .alias("_bad")
    )
    errors = pl.concat(
        [
            bad_head.select(
                "line",
                pl.lit("malformed batch line").alias("reason"),
                redact_expr(pl.col("msg")).alias("sample"),
            ),
            rows.filter(pl.col("_bad").is_not_null()).select(
                "line", pl.col("_bad").alias("reason"), redact_expr(pl.col("msg")).alias("sample")
            ),
        ]
    )
    steps = (
        rows.filter(pl.col("_bad").is_null())
        .sort("line", "seg")
        .select("line", "ts", pl.lit("sglang").alias("engine"), "engine_index", "kind", *COLUMNS)
    )
    return steps, errors
