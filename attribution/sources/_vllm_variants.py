"""vLLM step messages besides the stats and iteration lines: speculative-decoding metrics and the V0
prefix-cache line (helper of `vllm_log`).

`SpecDecoding metrics` (V1) and `Speculative metrics` (V0) lines -> `engine_steps` rows of kind
`spec_decode`. The V0 `Prefix cache hit rate: GPU: x%, CPU: y%` line is merged into the stats row printed
just before it; when that row lies in an earlier chunk (already committed) it becomes a `prefix_cache` row.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

V0_PREFIX = "Prefix cache hit rate: GPU:"
V0_PREFIX_RE = r"^Prefix cache hit rate: GPU: (?P<gpu>[\d.]+)%, CPU: (?P<cpu>[\d.]+)%"
SPEC_V1 = "SpecDecoding metrics: "
SPEC_V0 = "Speculative metrics: "

# Every form, from vLLM's source (vllm/v1/spec_decode/metrics.py, vllm/engine/metrics.py):
# V1 0.8.x  `SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens`
# V1 0.9.x  `... Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens,
#            Drafted: %d tokens, Per-position acceptance rate: %s`
# V1 0.10+  `... Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f
#            tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft
#            acceptance rate: %.1f%%`
# V0        `Speculative metrics: Draft acceptance rate: %.3f, System efficiency: %.3f, Number of
#            speculative tokens: %d, Number of accepted tokens: %d, Number of draft tokens: %d, Number of
#            emitted tokens: %d.` (a fraction, not a percentage)
# A rate of `nan` (nothing drafted) reads as null. Each field is found by its own name, so a field a later
# version adds or drops does not break the others.
_NUM = r"(\d+(?:\.\d+)?|nan)"
_FIELDS = {
    "accept_len": (rf"(?:^|, )Mean acceptance length: {_NUM}(?:,|$)", 1.0),
    "spec_accepted_tput": (rf"(?:^|, )Accepted throughput: {_NUM} tokens/s", 1.0),
    "spec_drafted_tput": (rf"(?:^|, )Drafted throughput: {_NUM} tokens/s", 1.0),
    "_acc": (r"(?:^|, )(?:Accepted: (\d+) tokens|Number of accepted tokens: (\d+))", 1.0),
    "_dra": (r"(?:^|, )(?:Drafted: (\d+) tokens|Number of draft tokens: (\d+))", 1.0),
    "_pct": (rf"(?:^|, )(?:Avg )?Draft acceptance rate: {_NUM}%", 0.01),
    "_frac": (rf"^Draft acceptance rate: {_NUM}, System efficiency", 1.0),
}
_POSITIONS_RE = r"(?:^|, )Per-position acceptance rate: ((?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*)"


def _number(body: pl.Expr, regex: str) -> pl.Expr:
    """The first group that matched, as a float; `nan` -> null."""
    g = body.str.extract_groups(regex)
    n_groups = regex.count("(") - regex.count("(?")
    val = pl.coalesce([g.struct.field(str(i)) for i in range(1, n_groups + 1)]) if n_groups > 1 else (
        g.struct.field("1")
    )
    return val.cast(pl.Float64, strict=False).fill_nan(None)


def spec_decode(heads: pl.DataFrame, rank: pl.Expr) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows of kind `spec_decode` (with the chunk's record index `idx`; engine_index from `rank`, an
    expression over the records) and the lines that look like spec-decode metrics but carry no
    accepted/drafted count (errors)."""
    rows = heads.filter(pl.col("_kind").is_in([SPEC_V1, SPEC_V0]))
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    body = pl.col("msg").str.strip_chars_end().str.strip_suffix(".").str.strip_prefix(pl.col("_kind"))
    rows = rows.with_columns(
        **{name: _number(body, regex) * scale for name, (regex, scale) in _FIELDS.items()},
        spec_position_rates=body.str.extract(_POSITIONS_RE, 1)
        .str.split(", ")
        .cast(pl.List(pl.Float64), strict=False)
        .list.eval(pl.element().fill_nan(None)),
    )
    bad = pl.col("_acc").is_null() | pl.col("_dra").is_null()
    errors = rows.filter(bad).select(
        "line", reason=pl.lit("unparseable speculative decoding metrics line"), sample=pl.col("msg").str.head(200)
    )
    ok = rows.filter(~bad).select(
        "idx",
        "ts",
        "line",
        engine=pl.lit("vllm"),
        kind=pl.lit("spec_decode"),
        engine_index=rank,
        accept_len="accept_len",
        spec_accepted_tokens=pl.col("_acc").cast(pl.Int64, strict=False),
        spec_drafted_tokens=pl.col("_dra").cast(pl.Int64, strict=False),
        spec_accept_rate=pl.coalesce("_pct", "_frac"),
        spec_accepted_tput="spec_accepted_tput",
        spec_drafted_tput="spec_drafted_tput",
        spec_position_rates="spec_position_rates",
    )
    return ok, errors


def v0_prefix(heads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The V0 prefix-cache lines of a chunk: (idx, ts, line, prefix_hit_rate, cpu_prefix_hit_rate), errors."""
    rows = heads.filter(pl.col("_kind") == V0_PREFIX)
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    rows = rows.with_columns(_g=pl.col("msg").str.extract_groups(V0_PREFIX_RE))
    g = pl.col("_g").struct.field
    errors = rows.filter(g("gpu").is_null()).select(
        "line", reason=pl.lit("unparseable V0 prefix cache line"), sample=pl.col("msg").str.head(200)
    )
    ok = rows.filter(g("gpu").is_not_null()).select(
        "idx",
        "ts",
        "line",
        prefix_hit_rate=g("gpu").cast(pl.Float64, strict=False) / 100,
        cpu_prefix_hit_rate=g("cpu").cast(pl.Float64, strict=False) / 100,
    )
    return ok, errors


def merge_v0_prefix(
    stats: pl.DataFrame, prefix: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series | None]:
    """Merge each V0 prefix-cache line into the stats row printed just before it (the nearest earlier stats
    record of the chunk, when it has no prefix rate of its own and lies at most 5 s, one V0 interval,
    earlier). Returns (stats rows with the rates, `prefix_cache` rows for the lines left over, the merged
    lines' numbers: they made no row of their own). Both frames carry the chunk's record index `idx`."""
    if prefix.height == 0:
        return stats, pl.DataFrame(), None
    left = prefix.sort("idx")
    if stats.height:
        cand = stats.filter(pl.col("prefix_hit_rate").is_null()).select(
            "idx", _s_idx=pl.col("idx"), _s_ts=pl.col("ts")
        ).sort("idx")
        left = left.join_asof(cand, on="idx", strategy="backward")
        near = (pl.col("ts") - pl.col("_s_ts")).dt.total_seconds().is_between(0, 5)
        # One prefix line per stats row: the first after it.
        first = pl.col("idx") == pl.col("idx").min().over("_s_idx")
        left = left.with_columns(_m=(pl.col("_s_idx").is_not_null() & near & first).fill_null(False))
        merged = left.filter("_m")
        left = left.filter(~pl.col("_m"))
        if merged.height:
            rates = merged.select(
                idx=pl.col("_s_idx"), _p="prefix_hit_rate", _c="cpu_prefix_hit_rate"
            )
            stats = (
                stats.join(rates, on="idx", how="left")
                .with_columns(
                    prefix_hit_rate=pl.coalesce("prefix_hit_rate", "_p"),
                    cpu_prefix_hit_rate=pl.col("_c"),
                )
                .drop("_p", "_c")
            )
        consumed = merged["line"] if merged.height else None
    else:
        consumed = None
    rest = left.select(
        "ts", "line", "prefix_hit_rate", "cpu_prefix_hit_rate", engine=pl.lit("vllm"), kind=pl.lit("prefix_cache")
    )
    return stats, rest, consumed


def attach_engine(spec: pl.DataFrame, stats: pl.DataFrame, state: dict) -> pl.DataFrame:
    """The engine of each spec-decode row without one: vLLM prints the line right after its engine's stats
    line, in the same logger call (`LoggingStatLogger.log`), so the nearest earlier stats row printed in the
    same second names it (the last one of an earlier chunk is kept in `state`). Drops `idx`."""
    seed = state.get("last_stats")
    if stats.height:
        last = stats.sort("idx").row(stats.height - 1, named=True)
        state["last_stats"] = [last["engine_index"], last["ts"].isoformat() if last["ts"] else None]
    if spec.height == 0:
        return spec
    if spec["engine_index"].null_count():
        cand = stats.select("idx", _e="engine_index", _t="ts") if stats.height else None
        if seed is not None:
            first = pl.DataFrame(
                {"idx": [-1], "_e": [seed[0]], "_t": [datetime.fromisoformat(seed[1]) if seed[1] else None]},
                schema={"idx": pl.Int64, "_e": pl.Int64, "_t": pl.Datetime("us", "UTC")},
            )
            cand = first if cand is None else pl.concat([first, cand.cast({"idx": pl.Int64})])
        if cand is not None:
            spec = spec.with_columns(pl.col("idx").cast(pl.Int64, strict=False)).sort("idx")
            spec = spec.join_asof(cand.cast({"idx": pl.Int64}).sort("idx"), on="idx", strategy="backward")
            same = (pl.col("ts") - pl.col("_t")).dt.total_seconds().is_between(0, 1)
            spec = spec.with_columns(
                engine_index=pl.coalesce("engine_index", pl.when(same).then(pl.col("_e")))
            ).drop("_e", "_t")
    return spec.drop("idx")
