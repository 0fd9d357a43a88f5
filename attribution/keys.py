"""The request join key (schema.py's `request_key` column): the rules turning the ids engines and gateways
write into one key, so an engine request meets its gateway record. vLLM engine lines: `request_key` (rules 1-3
below); gateway and trace records: `gateway_request_key` (rule 3 only); SGLang's `rid` is the key as written
(its gateway sees the same id), so the SGLang sources copy it.
"""

from __future__ import annotations

import polars as pl

# V1 0.14+ engine lines add `-` and the first 8 hex digits of a uuid to the external id
_ENGINE_SUFFIX_RE = r"^.+-[0-9a-f]{8}$"
# rule 3: vLLM's OpenAI server prefixes its own ids; the key is the id without it
_PREFIX_RE = r"^(?:chatcmpl|cmpl)-"


def request_key(expr: pl.Expr, engine_side: pl.Expr | bool = False) -> pl.Expr:
    """The join key of a vLLM engine line's request id.

    Rule, in this order:
    1. `engine_side`: V1 0.14+ engine lines (Added / Aborted) name `f"{external_id}-{uuid[:8]}"`: drop a
       trailing `-xxxxxxxx` (8 lowercase hex). Only engine-side lines get this, because a client-chosen
       `X-Request-Id` may itself end that way.
    2. Completions: `cmpl-<id>-<n>` (one engine request per prompt of the batch) -> `<id>`; all prompts of
       one completion call share the gateway's response id `cmpl-<id>`.
    3. Drop the `chatcmpl-` / `cmpl-` prefix.
    `chatcmpl-b73b4b2d...-a8a65d16` (engine, 0.14+) -> `b73b4b2d...`; `cmpl-50c3...-0` -> `50c3...`.
    """
    # `^(.+)-[0-9a-f]{8}$` -> `$1` drops the last 9 (ASCII) characters of a match: a match test needs no
    # capture engine.
    if engine_side is False:
        key = expr
    else:
        strip = expr.str.contains(_ENGINE_SUFFIX_RE)
        key = (
            pl.when(strip if engine_side is True else engine_side & strip)
            .then(expr.str.head(-9))
            .otherwise(expr)
        )
    return key.str.replace(r"^cmpl-(.+)-\d+$", "$1").str.replace(_PREFIX_RE, "")


def request_keys(ids: pl.Series, engine_side: pl.Series | bool = False) -> pl.Series:
    """`request_key` of a column, skipping the rules that cannot apply: without a `cmpl-` id, rule 2 never
    matches and rule 3 only removes `chatcmpl-` (rule 1 never touches the start)."""
    if ids.str.starts_with("cmpl-").any():
        side = pl.lit(engine_side) if isinstance(engine_side, pl.Series) else engine_side
        return pl.select(request_key(pl.lit(ids), side)).to_series()
    key = ids
    if engine_side is not False:
        strip = ids.str.contains(_ENGINE_SUFFIX_RE)
        if isinstance(engine_side, pl.Series):
            strip = strip & engine_side
        if strip.any():
            key = pl.select(
                pl.when(pl.lit(strip)).then(pl.lit(ids).str.head(-9)).otherwise(pl.lit(ids))
            ).to_series()
    return key.str.strip_prefix("chatcmpl-")


def gateway_request_key(request_id: pl.Expr) -> pl.Expr:
    """The key of a gateway's (or trace's) response id: rule 3 of `request_key` only. vLLM answers with
    `chatcmpl-<id>` (chat) or `cmpl-<id>` (completions: one id for every prompt of the call), so rule 2, which
    folds the engine's per-prompt `cmpl-<id>-<n>`, must not cut a client id that ends in `-<digits>`."""
    return request_id.str.replace(_PREFIX_RE, "")
