"""vLLM startup lines -> `engine_config` partial rows (section V-3 of ../shared/formats/engine-logs.md).

Owns the engine-start grouping (`start_line`), the version/model/flags lines, the memory lines, and the
per-start context (version, served model, `--max-log-len`, block size) that request rows and later facts
need. Helper of `vllm_log`; it has no `SOURCES` of its own.
"""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Any

import polars as pl

from attribution.privacy import SECRET_FLAG_RE, hash_key

if TYPE_CHECKING:
    from attribution.schema import PolarsType

GIB = 1 << 30

# Start markers and their rank in the order one process start prints them. A marker opens a new engine
# start when no start is open, when its rank is lower than the previous marker's (the sequence began
# again), when it repeats a rank other than the engine-init line (a second `non-default args`), or when
# the engine served traffic (a stats, Received or Added line) since the previous marker. The engine-init
# line may repeat within one start (one per data-parallel engine core). Facts seen before any marker
# open an implicit start at their own line.
RANK_BANNER, RANK_API, RANK_ARGS, RANK_INIT = 0, 1, 2, 3

_BLOCK = r"[\u2580-\u259f]"  # the ASCII-art banner of 0.20+ is drawn with block elements
BANNER_VERSION_RE = rf"{_BLOCK}\s+version\s+(\S+)\s*$"
BANNER_MODEL_RE = rf"{_BLOCK}\s+model\s+(\S+)\s*$"
API_VERSION_RE = r"^vLLM API server version (\S+)"
# 0.2-0.3 print no version: `Initializing an LLM engine with config: model=...`.
INIT_RE = r"^Initializing an? (?:V1 )?LLM engine (?:\(v([^)\s]+)\) )?with config"

# (regex that marks the line, regex that must then match, output columns and casts). A line that is
# marked but does not match is an error, not silence.
_SPECS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        r"^Available KV cache memory:",
        r"^Available KV cache memory: ([\d.]+) ?GiB",
        [("available_kv_gib", "f")],
    ),
    (
        r"^[\w +]+ KV cache size:",
        r"^([\w +]+?) KV cache size: ([\d,]+) tokens(?:, Maximum concurrency for ([\d,]+) tokens per "
        r"request: ([\d.]+)x)?",
        [("_dev", "s"), ("kv_pool_tokens", "c"), ("max_model_len", "c"), ("max_concurrency", "f")],
    ),
    (
        r"^Maximum concurrency for",
        r"^Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
        [("max_model_len", "c"), ("max_concurrency", "f")],
    ),
    (r"^Model loading took", r"^Model loading took ([\d.]+) ?GiB", [("weights_gib", "f")]),
    (r"^Loading model weights took", r"^Loading model weights took ([\d.]+) ?GB", [("weights_gib", "f")]),
    (r"^model weights take", r"^model weights take ([\d.]+) ?GiB", [("weights_gib", "f")]),
    (r"reserved for KV Cache is", r"reserved for KV Cache is ([\d.]+) ?GiB", [("available_kv_gib", "f")]),
    (r"^Memory profiling results:", r"kv_cache_size=([\d.]+) ?GiB", [("available_kv_gib", "f")]),
    (r"^# \w+ blocks:", r"^# (\w+) blocks: (\d+)", [("_blocks_dev", "s"), ("_blocks", "i")]),
    # 0.9.x without, 0.10+ with the `Engine 000: ` prefix (engine-logs.md V-3)
    (
        r"^(?:Engine \d+: )?vllm cache_config_info with",
        r"^(?:Engine \d+: )?vllm cache_config_info with initialization after num_(gpu)_blocks is: (\d+)",
        [("_blocks_dev", "s"), ("_blocks", "i")],
    ),
    (
        r"^Setting attention block size to",
        r"^Setting attention block size to (\d+) tokens",
        [("block_size", "i")],
    ),
    (r"^Padding mamba page size by", r"^Padding mamba page size by ([\d.]+)%", [("mamba_page_padding", "p")]),
    (
        r"^Chunked prefill is enabled with",
        r"^Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
        [("chunked_prefill_size", "i")],
    ),
    (r"^vLLM API server version", API_VERSION_RE, [("_v_api", "s")]),
    (r"^Initializing an? (?:V1 )?LLM engine", INIT_RE, [("_v_init", "s")]),
]
# Cheap literal pre-filter: every marked line contains one of these. `args:`, not `args`: the latter is in
# every 0.20 `Received request` line (`extra_args=None`).
_LITERALS = [
    "KV cache memory",
    "KV cache size",
    "KV Cache is",
    "Maximum concurrency",
    "took",
    "take",
    "blocks:",
    "cache_config_info",
    "Memory profiling",
    "Setting attention",
    "Padding mamba",
    "Chunked prefill",
    "version",
    "model",
    "args:",
]
_LITERALS_RE = "|".join(re.escape(lit) for lit in _LITERALS)  # one pass, not one per literal
_META = set(r".^$*+?{}[]\|()#")
_MARKS_RE = [m for m, _, _ in _SPECS if set(m.removeprefix("^")) & _META]  # marks that are regexes


def _marked(mark: str) -> pl.Expr:
    """Whether the message has a spec's mark: a literal test where the mark is literal text (no regex
    compiled: Polars caches only 32 compiled patterns per thread, and a chunk's parse uses more), else a regex."""
    msg, text = pl.col("msg"), mark.removeprefix("^")
    if mark in _MARKS_RE:
        return msg.str.contains(mark)
    return msg.str.starts_with(text) if mark.startswith("^") else msg.str.contains(text, literal=True)


# A line with none of the marks, the banner, the engine-init line or the args makes no fact and no error:
# one pattern for the regex ones (the init line's INIT_RE implies its mark) rules such lines out first.
_ANY_MARK_RE = "|".join(f"(?:{rx})" for rx in [*_MARKS_RE, BANNER_VERSION_RE, BANNER_MODEL_RE])

# Flags whose name is a secret *word* (`api_key`, `hf_token`), not a substring (`max_num_batched_tokens`,
# `tokenizer`): privacy.SECRET_FLAG_RE alone would hash token counts.
_SECRET_SEGMENT_RE = re.compile(
    r"(?i)(?:^|[_-])(?:api[_-]?key|keys?|tokens?|secret|password|passwd|credentials?|auth(?:orization)?)(?:$|[_-])"
)
_NOT_SECRET = re.compile(r"(?i)(?:^|_)(?:max|num|min)_|_tokens$|token_ids")
# Object reprs are not literals: `<ConfigFormat.AUTO: 'auto'>`, `<function cmd at 0x7f66>`. Quoted strings
# are matched first so that a `<think>` inside a value is left alone.
_OBJECT_REPR_RE = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|<([A-Za-z_][\w.]*)(?:[: ][^<>]*)?>""")


def is_secret_flag(key: str) -> bool:
    return bool(SECRET_FLAG_RE.search(key) and _SECRET_SEGMENT_RE.search(key) and not _NOT_SECRET.search(key))


def render_flag(key: str, value: Any) -> str | None:
    """A flag value as stored: strings as they are, other values as JSON; secrets as sha256 hex."""
    if value is None:
        return None
    if is_secret_flag(key):
        if isinstance(value, str):
            return hash_key(value)
        if isinstance(value, list | tuple):
            return json.dumps([hash_key(str(v)) for v in value])
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def parse_args_text(text: str) -> dict[str, Any]:
    """`{'model': ..., ...}` (non-default args) or `Namespace(a=1, ...)` (0.8.x `args:`) -> dict.

    Parsed with `ast`, never evaluated. Object reprs (`<Enum.X: 1>`, `<function f at 0x..>`) become their
    names; a value that is not a literal (`torch.bfloat16`, a config object) is kept as its source text.
    Raises ValueError if the text is not a dict or a call.
    """
    text = _OBJECT_REPR_RE.sub(
        lambda m: m.group(1) if m.group(1) is not None else repr(m.group(2)), text.strip()
    )
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a Python literal ({type(exc).__name__})") from None
    if isinstance(node, ast.Dict):
        items = [(k, v) for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)]
        pairs = [(str(k.value), v) for k, v in items]
    elif isinstance(node, ast.Call):
        pairs = [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
    else:
        raise ValueError("expected a dict or Namespace(...)")
    out: dict[str, Any] = {}
    for key, val in pairs:
        try:
            out[key] = ast.literal_eval(val)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            out[key] = ast.unparse(val)
    return out


def _args_facts(idx: int, msg: str) -> dict[str, Any]:
    """One args line -> the facts it carries (or an `_error`)."""
    body = msg.split(":", 1)[1].strip() if msg.startswith("non-default args:") else msg[len("args: ") :]
    try:
        args = parse_args_text(body)
    except ValueError as exc:
        return {"idx": idx, "_error": f"unparseable startup args: {exc}"}
    served = args.get("served_model_name")
    if isinstance(served, list | tuple):
        served = served[0] if served else None

    def as_int(key: str) -> int | None:
        v = args.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return {
        "idx": idx,
        "flags": [{"key": k, "value": render_flag(k, v)} for k, v in args.items()],
        "model": args.get("model") or args.get("model_tag"),
        "served_model": served,
        "max_running_requests": as_int("max_num_seqs"),
        "tp_size": as_int("tensor_parallel_size"),
        "max_model_len": as_int("max_model_len"),
        "block_size": as_int("block_size"),
        "_max_log_len": as_int("max_log_len"),
    }


_ARGS_SCHEMA: dict[str, PolarsType] = {
    "idx": pl.UInt32,
    "_error": pl.Utf8,
    "flags": pl.List(pl.Struct({"key": pl.Utf8, "value": pl.Utf8})),
    "model": pl.Utf8,
    "served_model": pl.Utf8,
    "max_running_requests": pl.Int64,
    "tp_size": pl.Int64,
    "max_model_len": pl.Int64,
    "block_size": pl.Int64,
    "_max_log_len": pl.Int64,
}


_CAST: dict[str, PolarsType] = {"s": pl.Utf8, "c": pl.Int64, "i": pl.Int64, "f": pl.Float64, "p": pl.Float64}
_BLOCK_CHAR = re.compile(_BLOCK)
_INIT_SPEC = next(i for i, (_, regex, _) in enumerate(_SPECS) if regex == INIT_RE)  # (the engine-init line's)


def _cast(expr: pl.Expr, how: str) -> pl.Expr:
    if how == "c":
        return expr.str.replace_all(",", "", literal=True).cast(pl.Int64, strict=False)
    if how == "i":
        return expr.cast(pl.Int64, strict=False)
    if how == "f":
        return expr.cast(pl.Float64, strict=False)
    if how == "p":
        return expr.cast(pl.Float64, strict=False) / 100
    return expr


def _present(cand: pl.DataFrame) -> tuple[tuple[bool, ...], bool]:
    """Which specs some line of `cand` is marked for (in _SPECS' order), and whether a line can be a banner
    line. Only those are built (a spec no line has gives nulls and no error): a chunk's startup lines hold a
    few of the 15 specs, and each spec built is a regex Polars compiles (see _marked) and expressions to make."""
    specs = cand.select(_marked(m).any().alias(str(i)) for i, (m, _, _) in enumerate(_SPECS)).row(0)
    return specs, any(_BLOCK_CHAR.search(m) for m in cand["msg"].to_list())  # (a banner line has a block)


def extract_facts(recs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Headed records (idx, line, ts, msg) -> (facts: one row per startup line with a fact, errors)."""
    cand = recs.filter(pl.col("msg").str.contains(_LITERALS_RE))
    if cand.height:
        msg = pl.col("msg")
        literal_marks = [_marked(m) for m, _, _ in _SPECS if m not in _MARKS_RE]
        cand = cand.filter(pl.any_horizontal(*literal_marks, msg.str.contains(_ANY_MARK_RE),
                                             msg.str.starts_with("non-default args:"),
                                             msg.str.starts_with("args: Namespace(")))
    if cand.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    msg = pl.col("msg")
    present, banner = _present(cand)
    cols: dict[str, pl.Expr] = {}
    errs: list[pl.Expr] = []
    for (mark, regex, outs), here in zip(_SPECS, present, strict=True):
        marked = _marked(mark)
        for i, (name, how) in enumerate(outs, start=1):
            val = pl.when(marked).then(_cast(msg.str.extract(regex, i), how)) if here else pl.lit(None, _CAST[how])
            cols[name] = val if name not in cols else pl.coalesce(cols[name], val)
        if here:
            errs.append(
                pl.when(marked & ~msg.str.contains(regex)).then(pl.lit(f"unparseable startup line: {mark}"))
            )
    facts = cand.with_columns(
        **cols,
        _v_banner=msg.str.extract(BANNER_VERSION_RE, 1) if banner else pl.lit(None, pl.Utf8),
        _m_banner=msg.str.extract(BANNER_MODEL_RE, 1) if banner else pl.lit(None, pl.Utf8),
        _is_args=msg.str.starts_with("non-default args:") | msg.str.starts_with("args: Namespace("),
        _err=pl.coalesce(errs) if errs else pl.lit(None, pl.Utf8),
    )
    # (INIT_RE implies the engine-init spec's mark: without a marked line, no line is an init line)
    init = msg.str.contains(INIT_RE) if present[_INIT_SPEC] else pl.lit(False)
    facts = facts.with_columns(
        _m_init=pl.when(init).then(msg.str.extract(r"with config: model='([^']*)'", 1)),
        _s_init=pl.when(init).then(msg.str.extract(r", served_model_name=([^,]+), ", 1)),
        _tp_init=pl.when(init).then(msg.str.extract(r", tensor_parallel_size=(\d+), ", 1).cast(pl.Int64, strict=False)),
        _len_init=pl.when(init).then(msg.str.extract(r", max_seq_len=(\d+), ", 1).cast(pl.Int64, strict=False)),
    ) if present[_INIT_SPEC] else facts.with_columns(
        _m_init=pl.lit(None, pl.Utf8), _s_init=pl.lit(None, pl.Utf8),
        _tp_init=pl.lit(None, pl.Int64), _len_init=pl.lit(None, pl.Int64),
    )
    args_rows = facts.filter("_is_args")
    parsed = pl.DataFrame(
        [_args_facts(i, m) for i, m in zip(args_rows["idx"], args_rows["msg"], strict=True)],
        schema=_ARGS_SCHEMA,
    )
    parsed = parsed.rename({c: f"_a_{c}" for c in parsed.columns if c != "idx" and not c.startswith("_")})
    facts = facts.join(parsed, on="idx", how="left").with_columns(
        version=pl.coalesce("_v_banner", "_v_api", "_v_init"),
        model=pl.coalesce("_a_model", "_m_banner", "_m_init"),
        served_model=pl.coalesce("_a_served_model", "_s_init"),
        flags="_a_flags",
        max_running_requests="_a_max_running_requests",
        tp_size=pl.coalesce("_a_tp_size", "_tp_init"),
        max_model_len=pl.coalesce("_a_max_model_len", "max_model_len", "_len_init"),
        block_size=pl.coalesce("_a_block_size", "block_size"),
        available_kv_bytes=(pl.col("available_kv_gib") * GIB).round(0).cast(pl.Int64, strict=False),
        weights_bytes=(pl.col("weights_gib") * GIB).round(0).cast(pl.Int64, strict=False),
        _err=pl.coalesce("_err", "_error"),
        rank=pl.when(pl.col("_v_banner").is_not_null())
        .then(RANK_BANNER)
        .when(pl.col("_v_api").is_not_null())
        .then(RANK_API)
        .when(pl.col("_is_args"))
        .then(RANK_ARGS)
        .when(init)
        .then(RANK_INIT),
    )
    errors = facts.filter(pl.col("_err").is_not_null())
    errors = errors.select("line", reason="_err", sample=msg.str.replace(r"[{(].*$", "...") if errors.height else msg)
    useful = pl.any_horizontal(pl.col(c).is_not_null() for c in [*FACT_COLUMNS, "_blocks", "rank"])
    return facts.filter(pl.col("_err").is_null() & useful), errors


FACT_COLUMNS = [
    "version",
    "model",
    "served_model",
    "flags",
    "kv_pool_tokens",
    "available_kv_bytes",
    "max_concurrency",
    "max_running_requests",
    "max_model_len",
    "block_size",
    "mamba_page_padding",
    "chunked_prefill_size",
    "weights_bytes",
    "tp_size",
]
_CTX = {"version": pl.Utf8, "model": pl.Utf8, "max_log_len": pl.Int64, "block_size": pl.Int64}


def assign_starts(recs: pl.DataFrame, facts: pl.DataFrame, state: dict[str, Any]) -> pl.DataFrame:
    """Add `start_line` and the per-start context columns (`ctx_version`, `ctx_model`, `ctx_max_log_len`,
    `ctx_block_size`) to the records; update `state` (see the marker rule above)."""
    st = state.setdefault("start", {"line": None, "rank": None, "traffic": False, "ctx": {}})
    if facts.height:
        recs = recs.join(
            facts.select(
                "idx",
                "rank",
                _f_version="version",
                _f_model=pl.coalesce("served_model", "model"),
                _f_max_log_len="_max_log_len",
                _f_block_size="block_size",
                _fact=pl.lit(True),
            ),
            on="idx",
            how="left",
        )
    else:
        recs = recs.with_columns(
            rank=pl.lit(None, pl.Int32),
            _fact=pl.lit(None, pl.Boolean),
            **{f"_f_{k}": pl.lit(None, t) for k, t in _CTX.items()},
        )
    recs = recs.with_columns(_cum=pl.col("traffic").cast(pl.Int64, strict=False).cum_sum())
    marks = recs.filter(pl.col("rank").is_not_null()).select("idx", "line", "rank", "_cum")
    if marks.height:
        prev_rank = marks["rank"].shift(1)
        prev_rank = prev_rank.scatter(0, st["rank"]) if st["rank"] is not None else prev_rank
        prev_cum = marks["_cum"].shift(1).fill_null(0 if not st["traffic"] else -1)
        rank = marks["rank"]
        new = (
            prev_rank.is_null()
            | (rank < prev_rank)
            | ((rank == prev_rank) & (rank < RANK_INIT))
            | (marks["_cum"] > prev_cum)
        )
        starts = marks.filter(new).select("idx", _start=pl.col("line"))
        recs = recs.join(starts, on="idx", how="left")
    else:
        recs = recs.with_columns(_start=pl.lit(None, pl.Int64))
    prior = st["line"]
    recs = recs.with_columns(start_line=pl.col("_start").forward_fill().fill_null(pl.lit(prior, pl.Int64)))
    orphans = recs.filter(pl.col("_fact") & pl.col("start_line").is_null())
    if orphans.height:
        recs = recs.with_columns(start_line=pl.col("start_line").fill_null(orphans["line"][0]))
    in_prior = pl.col("start_line") == prior if prior is not None else pl.lit(False)
    # Nearly every chunk lies within one start: then the per-start forward fill is a plain one.
    one_start = recs["start_line"].n_unique() <= 1

    def ffill(col: str) -> pl.Expr:
        return pl.col(col).forward_fill() if one_start else pl.col(col).forward_fill().over("start_line")

    recs = recs.with_columns(
        ffill(f"_f_{k}").fill_null(pl.when(in_prior).then(pl.lit(st["ctx"].get(k), t))).alias(f"ctx_{k}")
        for k, t in _CTX.items()
    )
    if recs.height:
        last = recs.row(recs.height - 1, named=True)
        if last["start_line"] is not None:
            st["line"] = int(last["start_line"])
            st["ctx"] = {k: last[f"ctx_{k}"] for k in _CTX}
        if marks.height:
            st["rank"] = int(marks["rank"][-1])
            st["traffic"] = bool(recs["_cum"][-1] > marks["_cum"][-1])
        else:
            st["traffic"] = bool(st["traffic"] or recs["traffic"].any())
    return recs.drop("rank", "_fact", "_cum", "_start", *(f"_f_{k}" for k in _CTX))


def config_rows(facts: pl.DataFrame, recs: pl.DataFrame) -> pl.DataFrame:
    """Partial `engine_config` rows: one per fact line, keyed by its start."""
    if facts.height == 0:
        return pl.DataFrame()
    f = facts.join(recs.select("idx", "start_line", "ctx_block_size"), on="idx", how="left")
    # `# GPU blocks` counts blocks; vLLM's default block size is 16 tokens on CUDA.
    block = pl.col("ctx_block_size").fill_null(
        pl.when(pl.col("_blocks_dev").str.to_lowercase().is_in(["gpu", "cuda"])).then(16)
    )
    f = f.with_columns(
        kv_pool_tokens=pl.coalesce("kv_pool_tokens", pl.col("_blocks") * block), engine=pl.lit("vllm")
    )
    has_fact = pl.any_horizontal(pl.col(c).is_not_null() for c in FACT_COLUMNS)
    return f.filter(has_fact).select("start_line", "ts", "line", "engine", *FACT_COLUMNS)
