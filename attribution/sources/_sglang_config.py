"""SGLang start-up lines -> `engine_config` partial rows (engine-logs.md S-3): the engine start each line
belongs to, `server_args=ServerArgs(...)` flags, and the memory facts (KV and Mamba pools, weights, the
scheduler summary). Sizes are GiB: SGLang divides by `GB = 1024**3` (memory_pool.py) and reports free memory
as bytes / 2**30.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from attribution.privacy import hash_key_expr, redact_expr, secret_flag_expr
from attribution.sources._sglang_header import msg_starts_with

if TYPE_CHECKING:
    from attribution.schema import PolarsType

GIB = 1024**3
_TOKEN_RE = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[\[\](){}]|,|[^'"\[\](){},]+"""
KV_RE = (
    r"^(.*?KV Cache) (is allocated|VA upper bound)\. (?:dtype: [^,]+, )?#tokens: (\d+), "
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)
MAMBA_RE = (
    r"^Mamba Cache is allocated\. (?:max_mamba_cache_size: (\d+), )?conv_state size: ([\d.]+) ?GB, "
    r"ssm_state size: ([\d.]+) ?GB(?: intermediate_ssm_state_cache size: ([\d.]+) ?GB"
    r" intermediate_conv_window_cache size: ([\d.]+) ?GB)?"
)
SUMMARY_KEYS = {
    "max_total_num_tokens": "kv_pool_tokens",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_prefill_tokens": "max_prefill_tokens",
    "max_running_requests": "max_running_requests",
    "context_len": "max_model_len",
}


def start_lines(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Add `start_line` (and `is_args`) to headed segments; updates state["start_line"].

    An engine start begins at a `server_args=ServerArgs(...)` line, or at the first line of the file for
    whatever precedes the first one; every engine_config row carries that line as `start_line`.
    """
    first = int(df["line"][0]) if df.height else 0
    start0 = state.get("start_line", first)
    is_args = pl.col("has_header") & msg_starts_with(df, "server_args=ServerArgs(")
    df = df.with_columns(is_args.alias("is_args")).with_columns(
        pl.when("is_args").then("line").forward_fill().fill_null(start0).alias("start_line")
    )
    if df.height:
        state["start_line"] = int(df["start_line"][-1])
    return df


def _err(df: pl.DataFrame, reason: str) -> pl.DataFrame:
    return df.select("line", pl.lit(reason).alias("reason"), redact_expr(pl.col("msg")).alias("sample"))


def parse_server_args(df: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """`server_args=` lines -> rows with flags (every top-level argument; a simple quoted string loses its
    quotes, anything else keeps its Python repr, `None` included), model, served_model, tp_size,
    max_running_requests and chunked_prefill_size when set. Flags whose name looks secret
    (privacy.secret_flag_expr) are stored as sha256 hex unless the value is None, a boolean or a number.

    The repr (up to ~14,000 characters of nested reprs, lists, dicts and quoted strings holding commas) is
    split by a vectorised tokeniser: quoted strings, brackets, commas and runs of anything else, with the
    bracket depth as a running sum, so only commas at depth 1 separate arguments. Unbalanced brackets (a cut
    line) are an error.
    """
    args = df.filter("is_args")
    if args.height == 0:
        return None, None
    tok = (
        args.select(
            "line",
            pl.col("msg").str.strip_prefix("server_args=ServerArgs").str.extract_all(_TOKEN_RE).alias("t"),
        )
        .explode("t")
        .with_columns(
            pl.when(pl.col("t").is_in(["(", "[", "{"]))
            .then(1)
            .when(pl.col("t").is_in([")", "]", "}"]))
            .then(-1)
            .otherwise(0)
            .alias("d")
        )
        .with_columns(pl.col("d").cum_sum().over("line").alias("depth"))
        .with_columns((pl.col("depth") - pl.col("d")).alias("before"))
    )
    closed = tok.group_by("line").agg(
        (pl.col("depth").last() == 0).alias("ok"), (pl.col("depth").min() >= 0).alias("ok2")
    )
    bad_lines = closed.filter(~(pl.col("ok") & pl.col("ok2")))["line"]
    sep = (pl.col("t") == ",") & (pl.col("before") == 1)
    fields = (
        tok.filter(~pl.col("line").is_in(bad_lines.implode()))
        .with_columns(sep.cast(pl.Int32, strict=False).cum_sum().over("line").alias("field"))
        # drop the ServerArgs( opening, its closing ) and the separators themselves
        .filter(~sep & (pl.col("before") >= 1) & ~((pl.col("before") == 1) & (pl.col("depth") == 0)))
        .group_by("line", "field", maintain_order=True)
        .agg(pl.col("t").str.join(""))
        .with_columns(pl.col("t").str.extract_groups(r"(?s)^\s*(\w+)=(.*?)\s*$").alias("kv"))
        .select(
            "line",
            "field",
            pl.col("kv").struct.field("1").alias("key"),
            pl.col("kv").struct.field("2").alias("raw"),
        )
        .filter(pl.col("key").is_not_null())
    )
    unquoted = pl.col("raw").str.extract(r"""^(?:'([^'\\]*)'|"([^"\\]*)")$""", 1)
    unquoted = pl.coalesce(unquoted, pl.col("raw").str.extract(r"""^"([^"\\]*)"$""", 1))
    scalar = pl.col("raw").str.contains(r"^(?:None|True|False|-?[\d.]+(?:e[-+]?\d+)?)$")
    value = pl.coalesce(unquoted, pl.col("raw"))
    secret = secret_flag_expr(pl.col("key")) & ~scalar
    fields = fields.with_columns(pl.when(secret).then(hash_key_expr(value)).otherwise(value).alias("value"))

    def pick(key: str, dtype: PolarsType) -> pl.Expr:
        v = pl.col("value").filter(pl.col("key") == key).first()
        return v.cast(dtype, strict=False) if dtype != pl.Utf8 else v

    rows = fields.group_by("line", maintain_order=True).agg(
        pl.struct(pl.col("key"), pl.col("value")).alias("flags"),
        pick("model_path", pl.Utf8).alias("model"),
        pick("served_model_name", pl.Utf8).alias("served_model"),
        pick("tp_size", pl.Int64).alias("tp_size"),
        pick("max_running_requests", pl.Int64).alias("max_running_requests"),
        pick("chunked_prefill_size", pl.Int64).alias("chunked_prefill_size"),
    )
    rows = args.select("line", "ts", "start_line").join(rows, on="line", how="inner")
    errors = _err(
        args.filter(pl.col("line").is_in(bad_lines.implode())), "truncated server_args=ServerArgs(...)"
    )
    return rows, errors


def _running_total(rows: pl.DataFrame, col: str, state: dict, key: str) -> pl.DataFrame:
    """Per-start running total of `col`, continuing the previous chunk's total for the start it ended in."""
    if rows.height == 0:
        return rows
    carry = state.get(key, {})
    prev = carry.get("total", 0) if carry.get("start") == int(rows["start_line"][0]) else 0
    rows = rows.with_columns(
        (
            pl.col(col).cum_sum().over("start_line")
            + pl.when(pl.col("start_line") == rows["start_line"][0]).then(prev).otherwise(0)
        )
        .round(0)
        .alias(col)
    )
    # Left a float: the ingest's domain check reports a total beyond int64 (a fuzzed `9223372036854775807GB`)
    # instead of a cast silently nulling it.
    last = rows[col][-1]
    state[key] = {"start": int(rows["start_line"][-1]), "total": 0.0 if last is None else float(last)}
    return rows


def parse_memory(
    df: pl.DataFrame, state: dict
) -> tuple[list[pl.DataFrame], pl.DataFrame | None, pl.Series]:
    """Memory and scheduler-summary lines -> list of engine_config partial-row frames, errors, and the lines
    folded into those rows without a row of their own (for `ParseResult.consumed`).

    Only rank-0 lines count (every TP rank prints the same per-GPU figures; the others' copies are folded).
    - `max_total_num_tokens=N, ..., context_len=L, available_gpu_mem=X GB` -> kv_pool_tokens (the
      full-attention pool in hybrid models), chunked_prefill_size, max_prefill_tokens, max_running_requests,
      max_model_len, available_gpu_mem_bytes.
    - `[Full |SWA |<label> ]KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB` (or
      `KV size: X GB`) -> kv_pool_tokens and kv_pool_bytes of the target model's full-attention pool (see
      `_kv_pools`): the pool size is known even when the log stops before the summary line.
    - `Mamba Cache is allocated. [max_mamba_cache_size: S, ]conv_state size: XGB, ssm_state size: YGB [...]`
      -> state_pool_slots = S, state_pool_bytes = running total of conv + ssm (+ intermediate) sizes.
    - `Load weight end. ... mem usage=X GB.` -> weights_bytes = running total (target plus draft models).
    Running totals are per start and carried across chunks in the state: each row holds the total so far,
    so the last row of a start (what the engine_config view keeps) holds the start's total.
    """
    msg = pl.col("msg")
    # literal tests for every kind of line below, whose own tests then run on those rows only
    maybe = (
        msg_starts_with(df, "max_total_num_tokens=")
        | msg_starts_with(df, "Mamba Cache is allocated.")
        | msg_starts_with(df, "Load weight end.")
        | msg_starts_with(df, "Memory pool end.")
        | msg_starts_with(df, "Use sliding window memory pool.")
        | msg_starts_with(df, "SWAKVPool mem usage:")
        | df["msg"].str.contains("KV Cache ", literal=True)
    )
    facts = df.filter(pl.col("has_header") & maybe)
    base = facts.filter("primary")
    # every TP rank prints the same per-GPU figures: the other ranks' copies are folded into rank 0's rows
    folded = [facts.filter(~pl.col("primary"))["line"]]
    out: list[pl.DataFrame] = []
    errs: list[pl.DataFrame | None] = []

    summ = base.filter(msg.str.starts_with("max_total_num_tokens="))
    if summ.height:
        pairs = pl.col("msg").str.extract_all(r"(\w+)=([^,]+)")
        s = summ.with_columns(pairs.alias("_p"))
        cols = [
            s["_p"]
            .list.eval(pl.element().filter(pl.element().str.starts_with(k + "=")).first())
            .list.first()
            .str.strip_prefix(k + "=")
            .cast(pl.Int64, strict=False)
            .alias(c)
            for k, c in SUMMARY_KEYS.items()
        ]
        mem = (
            s["_p"]
            .list.eval(pl.element().filter(pl.element().str.contains(r"^available_[cg]pu_mem=")).first())
            .list.first()
            .str.extract(r"=([\d.]+)")
            .cast(pl.Float64, strict=False)
        )
        s = s.with_columns(*cols, (mem * GIB).round(0).cast(pl.Int64, strict=False).alias("available_gpu_mem_bytes"))
        ok = pl.col("kv_pool_tokens").is_not_null()
        errs.append(_err(s.filter(~ok), "unreadable max_total_num_tokens line"))
        out.append(
            s.filter(ok).select("line", "ts", "start_line", *SUMMARY_KEYS.values(), "available_gpu_mem_bytes")
        )

    kv, kv_errs, kv_folded = _kv_pools(base, state)
    if kv is not None:
        out.append(kv)
    errs.append(kv_errs)

    mam = base.filter(msg.str.starts_with("Mamba Cache is allocated.")).with_columns(
        msg.str.extract_groups(MAMBA_RE).alias("_m")
    )
    if mam.height:
        m = pl.col("_m").struct
        gib = pl.sum_horizontal(*(m.field(str(i)).cast(pl.Float64, strict=False) for i in range(2, 6)))
        mam = mam.with_columns(
            m.field("1").cast(pl.Int64, strict=False).alias("state_pool_slots"),
            (gib * GIB).alias("state_pool_bytes"),
            m.field("2").is_not_null().alias("_ok"),
        )
        errs.append(_err(mam.filter(~pl.col("_ok")), "unreadable Mamba Cache allocation line"))
        mam = _running_total(mam.filter("_ok"), "state_pool_bytes", state, "state_bytes")
        out.append(mam.select("line", "ts", "start_line", "state_pool_slots", "state_pool_bytes"))

    wts = base.filter(msg.str.starts_with("Load weight end.")).with_columns(
        msg.str.extract(r"mem usage=([\d.]+) GB").cast(pl.Float64, strict=False).alias("_gib")
    )
    if wts.height:
        errs.append(_err(wts.filter(pl.col("_gib").is_null()), "unreadable Load weight end line"))
        wts = wts.filter(pl.col("_gib").is_not_null()).with_columns(
            (pl.col("_gib") * GIB).alias("weights_bytes")
        )
        wts = _running_total(wts, "weights_bytes", state, "weights_bytes")
        out.append(wts.select("line", "ts", "start_line", "weights_bytes"))

    found = [e for e in errs if e is not None]
    errors = pl.concat(found) if found else None
    folded.append(kv_folded)
    return out, errors, pl.concat(folded).unique(maintain_order=True)


def _kv_pools(base: pl.DataFrame, state: dict) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.Series]:
    """KV allocation lines (rank 0) -> (rows with kv_pool_tokens and kv_pool_bytes of the target model's
    full-attention pool, errors, lines folded without a row of their own).

    Which pool is the full-attention one (SGLang's source, mem_cache/swa_memory_pool.py `SWAKVPool`: it
    builds `swa_kv_pool` first, then `full_kv_pool`, each logging one `KV Cache is allocated` line; a plain or
    `HybridLinearKVPool` model logs one line, for its full-attention layers only):
    - the target model's pools are those before the start's first `Memory pool end.` line; a speculative
      draft model's runner allocates its own pool after that (the real log's third line);
    - 0.5.18+ names its pools: `Full KV Cache` is the one, `SWA KV Cache` and other labels are not;
    - unnamed lines: `Use sliding window memory pool. full_layer_tokens=N, swa_layer_tokens=M` (when logged
      before) says which token count is the SWA pool's; otherwise each unnamed line gives a row and the
      start's last one, the full pool of an SWA pair, is what the engine_config view keeps.
    `VA upper bound` lines are a virtual reservation, not memory. The group count (pool-end lines seen) and
    the SWA hint are kept per start in the state, so a file read in chunks gives the same rows.
    """
    msg = pl.col("msg")
    rows = base.filter(
        msg.str.contains(r"KV Cache (?:is allocated|VA upper bound)\.")
        | msg.str.starts_with("Memory pool end.")
        | msg.str.starts_with("Use sliding window memory pool.")
        | msg.str.starts_with("SWAKVPool mem usage:")
    )
    if rows.height == 0:
        return None, None, pl.Series("line", [], dtype=pl.Int64)
    carry = state.get("kv_groups", {})
    first = int(rows["start_line"][0])
    prev_ends = carry.get("ends", 0) if carry.get("start") == first else 0
    hint = carry.get("swa_hint") if carry.get("start") == first else None
    is_end = msg.str.starts_with("Memory pool end.")
    rows = rows.with_columns(
        msg.str.extract_groups(KV_RE).alias("_m"),
        msg.str.extract(r"swa_layer_tokens=(\d+)").cast(pl.Int64, strict=False).alias("_swa_hint"),
        (
            is_end.cast(pl.Int32, strict=False).cum_sum().over("start_line")
            - is_end.cast(pl.Int32, strict=False)
            + pl.when(pl.col("start_line") == first).then(prev_ends).otherwise(0)
        ).alias("_group"),
    ).with_columns(
        pl.col("_swa_hint").forward_fill().over("start_line").alias("_swa_hint"),
    )
    if hint is not None:
        rows = rows.with_columns(
            pl.when(pl.col("start_line") == first).then(pl.col("_swa_hint").fill_null(hint)).otherwise("_swa_hint")
        )
    last = rows.tail(1)
    state["kv_groups"] = {
        "start": int(last["start_line"][0]),
        "ends": int(last["_group"][0]) + int(last.select(is_end).item()),
        "swa_hint": last["_swa_hint"][0],
    }
    m = pl.col("_m").struct
    is_kv = msg.str.contains(r"KV Cache (?:is allocated|VA upper bound)\.")
    kv = rows.filter(is_kv)
    gib = pl.coalesce(m.field("4").cast(pl.Float64, strict=False) + m.field("5").cast(pl.Float64, strict=False), m.field("6").cast(pl.Float64, strict=False))
    tokens = m.field("3").cast(pl.Int64, strict=False)
    name = m.field("1")
    kv = kv.with_columns(
        (gib * GIB).round(0).cast(pl.Int64, strict=False).alias("kv_pool_bytes"),
        tokens.alias("kv_pool_tokens"),
        tokens.is_not_null().alias("_ok"),
    )
    errors = _err(kv.filter(~pl.col("_ok")), "unreadable KV Cache allocation line")
    unnamed = name == "KV Cache"
    not_swa = pl.col("_swa_hint").is_null() | (pl.col("kv_pool_tokens") != pl.col("_swa_hint"))
    full = (
        pl.col("_ok")
        & (m.field("2") == "is allocated")
        & (pl.col("_group") == 0)
        & ((name == "Full KV Cache") | (unnamed & not_swa))
    )
    keep = kv.filter(full).select("line", "ts", "start_line", "kv_pool_tokens", "kv_pool_bytes")
    unread = kv.filter(~pl.col("_ok"))["line"]
    folded = rows.filter(~pl.col("line").is_in(pl.concat([keep["line"], unread]).implode()))["line"]
    return keep, errors, folded
