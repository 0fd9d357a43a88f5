"""Secrets never reach the store: API keys become sha256 hex (what LiteLLM stores as `hashed_token`), and
text samples kept for error messages are short, have keys replaced and stop where content starts (the
positions the parsers anchor on: vLLM `prompt: '` and `prompt_token_ids`, SGLang `text=`, JSON `"messages"`)."""

from __future__ import annotations

import hashlib
import re
from typing import overload

import polars as pl

# sk-... (OpenAI/LiteLLM style), Bearer tokens, and key=... / "api_key": "..." forms.
SECRET_RE = r"(?i)(\bsk-[A-Za-z0-9_\-]{6,}|bearer\s+[A-Za-z0-9_\-\.=:/+]{6,})"
# A flag name that holds a secret: `api_key`, `hf_token`, `auth`, `password`... but not `max_num_batched_tokens`,
# `num_speculative_tokens` or `tokenizer`: whole words only, counts excluded. Two patterns without look-arounds
# so Polars (Rust regex) can use them too.
SECRET_FLAG_RE = re.compile(
    r"(?i)(?:^|[_-])(?:api[_-]?key|keys?|tokens?|secret|password|passwd|credentials?|auth(?:orization)?)(?:$|[_-])"
)
NOT_SECRET_FLAG_RE = re.compile(r"(?i)^(?:max|num)[_-]|(?:[_-]tokens|token[_-]ids)$")
SAMPLE_CHARS = 160
# Where content (prompt or answer text, messages, token ids, request/response bodies) starts in a line of
# any format the parsers read: a sample keeps only what comes before the first of these. vLLM
# `Received request ...: prompt: '...', params: ..., prompt_token_ids: [...]`; SGLang `Receive:
# obj=GenerateReqInput(text='...', input_ids=[...])` and `Finish: ... out={'text': ...}`; LiteLLM, OTel and
# gateway JSON keys (`"messages"`, `"prompt"`, `"response"`, `gen_ai.prompt`, `"input"`, `"body"`, ...).
CONTENT_RE = (
    r"(?i)(?:\bprompt(?:_token_ids|_embeds)?\s*[:=]|\b(?:text|input_ids|output_ids|input_embeds|messages|"
    r"input|output|out|content|completion|response|body|request_body|response_body)\s*=|"
    r"[\"'](?:messages|prompt|prompts|input|inputs|content|text|completion|response|choices|output|"
    r"proxy_server_request|request_body|response_body|body|gen_ai\.[a-z_.]*(?:prompt|completion|messages)[a-z_.]*)"
    r"[\"']\s*:|\bgen_ai\.[a-z_.]*(?:prompt|completion|messages)\b)"
)


def is_secret_flag(name: str) -> bool:
    return bool(SECRET_FLAG_RE.search(name)) and not NOT_SECRET_FLAG_RE.search(name)


def secret_flag_expr(name: pl.Expr) -> pl.Expr:
    """Vectorised `is_secret_flag` over a column of flag names."""
    return name.str.contains(SECRET_FLAG_RE.pattern) & ~name.str.contains(NOT_SECRET_FLAG_RE.pattern)


@overload
def hash_key(raw: str) -> str: ...
@overload
def hash_key(raw: None) -> None: ...
def hash_key(raw: str | None) -> str | None:
    """sha256 hex of a raw key; a `Bearer ` prefix is dropped first, an already-hashed value is kept."""
    if raw is None:
        return None
    raw = raw.strip()
    if raw.lower().startswith("bearer "):
        raw = raw[7:].strip()
    if re.fullmatch(r"[0-9a-f]{64}", raw):
        return raw
    return hashlib.sha256(raw.encode()).hexdigest()


def hash_key_expr(expr: pl.Expr) -> pl.Expr:
    """Vectorised `hash_key` for a Utf8 column (64-hex values are kept as they are)."""
    stripped = expr.str.strip_chars().str.replace(r"(?i)^bearer\s+", "")
    return (
        pl.when(stripped.str.contains(r"^[0-9a-f]{64}$"))
        .then(stripped)
        .otherwise(stripped.map_batches(_sha256_hex, return_dtype=pl.Utf8, is_elementwise=True))
    )


def _sha256_hex(values: pl.Series) -> pl.Series:
    """sha256 hex of each value, computed once per distinct value (a log repeats a few keys millions of times)."""
    distinct = values.drop_nulls().unique().to_list()
    digests = {v: hashlib.sha256(v.encode()).hexdigest() for v in distinct}
    return values.replace_strict(digests, default=None, return_dtype=pl.Utf8)


def redact(text: str | None, limit: int = SAMPLE_CHARS) -> str | None:
    """A short, key-free sample of a line for `ingest_errors`."""
    if text is None:
        return None
    text = re.sub(SECRET_RE, lambda m: "sha256:" + hash_key(m.group(0))[:16], text[: limit * 4])
    return text[:limit]


def before_content(expr: pl.Expr) -> pl.Expr:
    """The text before the first content marker (CONTENT_RE), the marker kept and the rest replaced by
    `<removed>`; null where the line has no marker (the caller then keeps only the line's shape)."""
    marked = pl.concat_str(expr.str.extract(f"(?s)^(.*?{CONTENT_RE})", 1), pl.lit(" <removed>"))
    return pl.when(expr.str.contains(CONTENT_RE)).then(marked)


def redact_expr(expr: pl.Expr, limit: int = SAMPLE_CHARS) -> pl.Expr:
    return expr.str.slice(0, limit * 4).str.replace_all(SECRET_RE, "<secret>").str.slice(0, limit)
