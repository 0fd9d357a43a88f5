"""The generic wrapper layer: `WrappedSource`, the Source that reads a wrapped file through one Wrapper.

It decodes records, reassembles partial ones per (identity, stream) across chunks, splits the records by
identity (each identity is its own log with its own inner format, parser state and deployment), calls the
inner source, and fills `ParseResult.records` so the line census counts physical lines. Before each `decode` /
`records` call the wrapper's state holds `year` (--year or None), `tz` (--tz) and `file_mtime` (POSIX s).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

import polars as pl

from attribution import reader, sources
from attribution.sources.base import ParseContext, ParseResult, Source
from attribution.wrappers import base as wbase

MAX_DEPTH = 3  # wrappers inside wrappers (a CRI line inside a CloudWatch message inside JSON)
LABELS = ("namespace", "pod", "container", "host", "unit")
_SEP, _KS = "\x1f", "\x1e"

# Bytes that are not UTF-8 are decoded to private-use characters U+F780..U+F7FF (one per byte) instead of
# U+FFFD, so a partial record that ends inside a multi-byte character can be reassembled byte for byte.
BYTE_ESCAPE = "attribution-wrapped"
_PUA_LO, _PUA_RE = 0xF700, "[\uf780-\uf7ff]"


def _escape(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)  # (registered for decoding only)
    return "".join(chr(_PUA_LO + b) for b in exc.object[exc.start:exc.end]), exc.end


codecs.register_error(BYTE_ESCAPE, _escape)


def _unescape_one(text: str) -> str:
    out = bytearray()
    for ch in text:
        o = ord(ch)
        out += bytes([o - _PUA_LO]) if 0xF780 <= o <= 0xF7FF else ch.encode("utf-8")
    return out.decode("utf-8", errors="replace")


def unescape(df: pl.DataFrame, col: str = "text") -> pl.DataFrame:
    """`df` with the escaped bytes of `col` decoded again (invalid sequences as U+FFFD, as a plain file's
    are). Rows without any are left alone; they are almost all (`when` would run the Python on every row)."""
    hit = df[col].str.contains(_PUA_RE)
    if not hit.any():
        return df
    idx = hit.arg_true()
    fixed = df[col].clone()
    fixed.scatter(idx, pl.Series([_unescape_one(t) for t in df[col].gather(idx)], dtype=pl.Utf8))
    return df.with_columns(fixed.alias(col))


def wrapped(name: str, depth: int = 0) -> WrappedSource:
    """The one WrappedSource of a wrapper name (and nesting depth)."""
    return _wrapped(name, depth)


@cache
def _wrapped(name: str, depth: int) -> WrappedSource:
    from attribution import wrappers

    w = wrappers.get(name)
    if w is None:
        raise KeyError(name)
    return WrappedSource(w, depth)


def _line_sources() -> list[Source]:
    return [s for s in sources.registry().values() if s.mode == "lines"]


def sniff_inner(head: str, path: str, depth: int) -> str | None:
    """The inner format of unwrapped text: a nested line wrapper ("wrapper:<name>") or a line source."""
    if depth < MAX_DEPTH:
        nested = sniff_wrapped(head, path, depth + 1)
        if nested is not None and nested.wrapper.mode == "lines":
            return "wrapper:" + nested.name
    best: tuple[float, Source] | None = None
    for src in _line_sources():
        score = src.sniff(head, path)
        if score >= 0.5 and (best is None or score > best[0]):
            best = (score, src)
    return best[1].name if best else None


def sniff_wrapped(head: str, path: str, depth: int = 0, mtime: float = 0.0) -> WrappedSource | None:
    """A WrappedSource when a wrapper recognises the head and (line wrappers) the unwrapped head is a known
    format, else None; the most confident such wrapper wins. A document wrapper's head is a fragment of one
    document: its own sniff decides."""
    from attribution import wrappers

    for w in wrappers.candidates(head, path):
        if w.mode == "document" or _inner_known(w, head, path, depth, mtime):
            return wrapped(w.name, depth)
    return None


def _inner_known(w: wbase.Wrapper, head: str, path: str, depth: int, mtime: float) -> bool:
    lines = head.split("\n")
    if len(head) >= reader.HEAD_BYTES and len(lines) > 1:
        lines = lines[:-1]  # cut off by the head's size
    frame = pl.DataFrame({"line": pl.int_range(1, len(lines) + 1, eager=True, dtype=pl.Int64), "text": lines})
    try:
        recs = wbase.records_frame(w.decode(frame, _wstate({}, None, "UTC", mtime)))
    except Exception:  # a sniff must never fail the ingest
        return False
    ok = recs.filter("ok")  # partial pieces joined (streams not told apart: a sniff needs no more)
    inner_text = "".join(t + ("" if p else "\n") for t, p in zip(ok["text"].fill_null(""), ok["partial"], strict=True))
    return sniff_inner(inner_text, path, depth) is not None


def _wstate(state: dict, year: int | None, tz: str, mtime: float) -> dict:
    state.update(year=year, tz=tz, file_mtime=mtime)
    return state


def _deployment(key: str, default: str) -> str:
    labels = dict(zip(LABELS, key.split(_SEP), strict=True))
    for name in ("pod", "container", "unit", "host"):
        if labels[name]:
            return labels[name]
    return default


class WrappedSource(Source):
    """A Source that peels one wrapper off a file and hands each identity's lines to its inner source."""

    kind = "wrapped"

    def __init__(self, wrapper: wbase.Wrapper, depth: int = 0):
        self.wrapper, self.depth = wrapper, depth
        self.name = wrapper.name
        self.mode = "whole" if wrapper.mode == "document" else "lines"  # document files are re-read whole
        self.description = wrapper.description

    def __reduce__(self):  # workers resolve the same instance by name
        return wrapped, (self.name, self.depth)

    def __repr__(self) -> str:
        return f"WrappedSource({self.name!r})"

    def sniff(self, head: str, path: str) -> float:
        return self.wrapper.sniff(head, path)

    def parse(self, lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        st = ctx.state
        wst = _wstate(st.setdefault("w", {}), ctx.year, ctx.tz, ctx.file_mtime)
        recs = wbase.records_frame(self.wrapper.decode(lines.select("line", "text"), wst))
        if "span" in lines.columns or "rec_ts" in lines.columns:  # a nested layer: carry the outer columns
            outer = lines.select("line", *[c for c in ("span", "rec_ts") if c in lines.columns])
            recs = recs.join(outer.rename({"rec_ts": "_outer_ts"}, strict=False), on="line", how="left",
                             maintain_order="left")
            if "_outer_ts" in recs.columns:
                recs = recs.with_columns(pl.coalesce("rec_ts", "_outer_ts").alias("rec_ts")).drop("_outer_ts")
        return self._records(recs, ctx)

    def parse_document(self, pieces: Iterable[bytes], ctx: ParseContext) -> Iterator[ParseResult]:
        """Mode "document": one result per batch of the wrapper's records (`line`: the record's ordinal in the
        order they come), then the flush's."""
        wst = _wstate(ctx.state.setdefault("w", {}), ctx.year, ctx.tz, ctx.file_mtime)
        wst["path"] = ctx.path  # (an S3 export's key names its log stream)
        for batch in self.wrapper.records(pieces, wst):
            # A record's `line` becomes its place in the order the wrapper hands records over: exports sorted
            # back to oldest-first (Loki, gcloud) give document ordinals that run backwards, and the engine
            # parsers order lines by `line`. An export already in order keeps its ordinals.
            b = wbase.records_frame(batch)
            n0 = ctx.state.get("seq", 0)
            b = b.with_columns(pl.int_range(n0 + 1, n0 + 1 + b.height, dtype=pl.Int64).alias("line"))
            yield self._records(b, ctx)
            _wstate(wst, ctx.year, ctx.tz, ctx.file_mtime)
        yield self.finish(ctx)

    # -- the layer ---------------------------------------------------------------------------------------

    def _records(self, recs: pl.DataFrame, ctx: ParseContext) -> ParseResult:
        res = ParseResult()
        census: list[pl.DataFrame] = []
        # Records are parsed in the order they arrive, which is not always their `line` order (an export
        # sorted back to oldest-first); `seq` numbers them across chunks for reassembly and holding.
        seq0 = ctx.state.get("seq", 0)
        ctx.state["seq"] = seq0 + recs.height
        recs = recs.with_columns(pl.int_range(seq0, seq0 + recs.height, dtype=pl.Int64).alias("seq"))
        if "span" not in recs.columns:
            recs = recs.with_columns(pl.lit(1, pl.Int64).alias("span"))
        recs = recs.with_columns(pl.col("span").fill_null(1).cast(pl.Int64))
        bad = recs.filter(~pl.col("ok").fill_null(False))
        if bad.height:
            bad = unescape(bad.with_columns(pl.col("text").fill_null("")))
            res.add_errors(bad.select("line", pl.lit(f"not a {self.name} record: not parsed").alias("reason"),
                                      pl.col("text").alias("sample")))
            census.append(bad.select("line", "span", "text", pl.lit(None, pl.Utf8).alias("source")))
        good = recs.filter(pl.col("ok").fill_null(False))
        key = pl.concat_str([pl.col(c).fill_null("") for c in LABELS], separator=_SEP)
        good = good.with_columns(key.alias("key"), pl.col("text").fill_null(""),
                                 pl.col("partial").fill_null(False))
        good = good.with_columns(pl.concat_str("key", pl.col("stream").fill_null(""), separator=_KS).alias("ks"))
        limit = int(ctx.options.get("_max_line_bytes", reader.DEFAULT_MAX_LINE_BYTES))
        complete, over = _reassemble(good, ctx.state.setdefault("pend", {}), limit)
        if over.height:
            res.add_errors(pl.DataFrame(  # rare: formatted in Python for the thousands separators
                {"line": over["line"], "reason": [_too_long(n, limit) for n in over["nbytes"]], "sample": None},
                schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}))
            census.append(over.select("line", "span", pl.lit("").alias("text"), pl.lit(None, pl.Utf8).alias("source")))
        complete = _without_nul(unescape(complete).with_columns(pl.col("text").str.strip_suffix("\r")), res)
        complete = _hold_behind_partials(complete, ctx.state)
        ids = ctx.state.setdefault("ids", {})
        for (k,), grp in complete.partition_by("key", maintain_order=True, as_dict=True).items():
            self._identity(k, grp.select("line", "span", "text", "rec_ts"), ids, ctx, res, census, final=False)
        _add_census(res, census)
        return res

    def finish(self, ctx: ParseContext) -> ParseResult:
        """End of the input seen so far: pending partial records count as complete (a last line without
        newline), undecided identities are sniffed on what they hold. The ingest keeps the state from before
        this call, so a file that grows continues the pending records."""
        res = ParseResult()
        census: list[pl.DataFrame] = []
        pend = ctx.state.get("pend", {})
        ids = ctx.state.setdefault("ids", {})
        rows = []
        for ks, p in pend.items():
            if p["over"]:
                limit = int(ctx.options.get("_max_line_bytes", reader.DEFAULT_MAX_LINE_BYTES))
                res.add_errors(pl.DataFrame({"line": [p["line"]], "reason": [_too_long(p["nbytes"], limit)],
                                             "sample": [None]},
                                            schema={"line": pl.Int64, "reason": pl.Utf8, "sample": pl.Utf8}))
                census.append(pl.DataFrame({"line": [p["line"]], "span": [p["span"]], "text": [""], "source": [None]},
                                           schema=_CENSUS))
            else:
                rows.append({"key": ks.split(_KS)[0], "seq": p["seq"], "line": p["line"], "span": p["span"],
                             "text": p["text"], "rec_ts": p["ts"]})
        ctx.state["pend"] = {}
        frame = pl.DataFrame(rows, schema=_WAIT)
        frame = _without_nul(unescape(frame.with_columns(pl.col("rec_ts").cast(wbase.TS)))
                             .with_columns(pl.col("text").str.strip_suffix("\r")), res)
        frame = _hold_behind_partials(frame, ctx.state).sort("seq")
        keys = list(dict.fromkeys(list(frame["key"]) + [k for k, v in ids.items() if "held" in v
                                                         or (v["fmt"] or "").startswith("wrapper:")]))
        for k in keys:
            grp = frame.filter(pl.col("key") == k).select("line", "span", "text", "rec_ts")
            self._identity(k, grp, ids, ctx, res, census, final=True)
        _add_census(res, census)
        return res

    def _identity(self, key: str, recs: pl.DataFrame, ids: dict[str, Any], ctx: ParseContext, res: ParseResult,
                  census: list[pl.DataFrame], *, final: bool) -> None:
        ident = ids.setdefault(key, {"fmt": None, "st": {}, "held": []})
        if "held" in ident:  # inner format not decided yet: hold the records until a head's worth of text
            if ident["held"]:
                held = pl.DataFrame(ident["held"], schema=_HELD, orient="row", infer_schema_length=None)
                recs = pl.concat([held.with_columns(pl.col("rec_ts").cast(wbase.TS)), recs])
            size = recs["text"].str.len_bytes() + 1
            if int(size.sum()) < reader.HEAD_BYTES and not final:
                ident["held"] = recs.with_columns(pl.col("rec_ts").dt.epoch("us")).rows()
                return
            head = recs["text"].filter((size.cum_sum() - size) < reader.HEAD_BYTES)
            ident["fmt"] = sniff_inner("\n".join(head.to_list())[: reader.HEAD_BYTES], ctx.path, self.depth)
            del ident["held"]
        fmt = ident["fmt"]
        if recs.height == 0 and not (final and fmt and fmt.startswith("wrapper:")):
            return
        if fmt is None:
            census.append(recs.select("line", "span", "text", pl.lit(None, pl.Utf8).alias("source")))
            return
        dep = _deployment(key, ctx.deployment)
        sub = ParseContext(ctx.path, dep, ctx.label, ctx.year, ctx.tz, ctx.file_mtime, ctx.options, ident["st"])
        inner: Source
        if fmt.startswith("wrapper:"):
            inner = layer = wrapped(fmt.split(":", 1)[1], self.depth + 1)
            r = layer.parse(recs, sub)
            if final:
                fin = layer.finish(sub)
                for t, df in fin.tables.items():
                    r.add(t, df)
                r.add_errors(fin.errors)
                r.add_consumed(fin.consumed)
                if fin.records is not None:
                    r.records = fin.records if r.records is None else pl.concat([r.records, fin.records])
        else:
            inner = sources.registry()[fmt]  # (sniff_inner names a line source of the registry)
            r = inner.parse(recs.select("line", "text", "rec_ts"), sub)
        ident["st"] = sub.state
        for table, df in r.tables.items():
            cols = [pl.col("deployment").fill_null(dep) if "deployment" in df.columns
                    else pl.lit(dep, pl.Utf8).alias("deployment")]
            cols += [pl.lit(v, pl.Utf8).alias(c) for c, v in (("source", inner.name), ("source_kind", inner.kind))
                     if c not in df.columns]
            res.add(table, df.with_columns(cols))
        res.add_errors(r.errors)
        res.add_consumed(r.consumed)
        if isinstance(inner, WrappedSource):  # the nested layer counts its records (some may still be held)
            if r.records is not None:
                census.append(r.records.select(list(_CENSUS)))
        else:
            census.append(recs.select("line", "span", "text", pl.lit(fmt, pl.Utf8).alias("source")))


def _without_nul(recs: pl.DataFrame, res: ParseResult) -> pl.DataFrame:
    """Records with their NUL characters removed (`\\u0000` in a JSON wrapper: a regex over the line would miss
    its message), each such record noted, as the ingest does for raw NUL bytes."""
    n = pl.col("text").str.count_matches("\x00", literal=True)
    hit = recs.filter(n > 0)
    if hit.height == 0:
        return recs
    res.add_errors(hit.select("line", pl.format("{} NUL byte(s) removed from the line", n).alias("reason"),
                              pl.lit(None, pl.Utf8).alias("sample")))
    return recs.with_columns(pl.col("text").str.replace_all("\x00", "", literal=True))


def _too_long(nbytes: int, limit: int) -> str:
    return f"record of {nbytes:,} bytes is longer than the {limit:,}-byte limit: skipped"


_HELD = {"line": pl.Int64, "span": pl.Int64, "text": pl.Utf8, "rec_ts": pl.Int64}
_CENSUS = {"line": pl.Int64, "span": pl.Int64, "text": pl.Utf8, "source": pl.Utf8}


def _add_census(res: ParseResult, parts: list[pl.DataFrame]) -> None:
    """Set `res.records`, empty rather than None when every record is still held or pending: the census then
    counts nothing for this unit instead of counting its physical lines one for one."""
    parts = [p.select(pl.col(c).cast(t) for c, t in _CENSUS.items()) for p in parts if p.height]
    df = pl.concat(parts).sort("line") if parts else pl.DataFrame(schema=_CENSUS)
    res.records = df if res.records is None else pl.concat([res.records, df])


_WAIT = {"key": pl.Utf8, "seq": pl.Int64, "line": pl.Int64, "span": pl.Int64, "text": pl.Utf8, "rec_ts": pl.Int64}


def _hold_behind_partials(complete: pl.DataFrame, state: dict[str, Any]) -> pl.DataFrame:
    """The complete records that may be parsed now, in line order: an identity's records that come after one
    of its partial records still pending (the other stream's lines between the pieces of a split line) wait
    in `state["wait"]` until it ends, so that chunk boundaries never change the order a parser sees."""
    complete = complete.select(list(_WAIT))
    if state.get("wait"):
        prev = pl.DataFrame(state.pop("wait"), schema=_WAIT, orient="row").with_columns(pl.col("rec_ts").cast(wbase.TS))
        complete = pl.concat([prev, complete]).sort("seq")
    state.pop("wait", None)
    bound: dict[str, int] = {}
    for ks, p in state.get("pend", {}).items():
        key = ks.split(_KS)[0]
        bound[key] = min(bound.get(key, p["seq"]), p["seq"])
    if not bound:
        return complete
    later = pl.col("seq") > pl.col("key").replace_strict(bound, default=None, return_dtype=pl.Int64)
    waiting = complete.filter(later.fill_null(False))
    if waiting.height:
        state["wait"] = waiting.with_columns(pl.col("rec_ts").dt.epoch("us")).rows()
    return complete.filter(~later.fill_null(False))


def _reassemble(good: pl.DataFrame, pend: dict[str, Any], limit: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Complete records (partial pieces joined per `ks`, pieces of earlier chunks from `pend`) and those over
    `limit` bytes; the unfinished ones go back into `pend`."""
    cols = ["key", "ks", "seq", "line", "span", "text", "rec_ts"]
    if not pend and not good["partial"].any():
        return good.select(cols), pl.DataFrame(schema={"line": pl.Int64, "span": pl.Int64, "nbytes": pl.Int64})
    prev = pl.DataFrame(
        [{"key": ks.split(_KS)[0], "ks": ks, "seq": p["seq"], "line": p["line"], "span": p["span"], "text": p["text"],
          "rec_ts": p["ts"], "partial": True, "over": p["over"], "nbytes": p["nbytes"]} for ks, p in pend.items()],
        schema={"key": pl.Utf8, "ks": pl.Utf8, "seq": pl.Int64, "line": pl.Int64, "span": pl.Int64, "text": pl.Utf8,
                "rec_ts": pl.Int64, "partial": pl.Boolean, "over": pl.Boolean, "nbytes": pl.Int64},
    ).with_columns(pl.col("rec_ts").cast(wbase.TS))
    cur = good.select(*cols, "partial", pl.lit(False).alias("over"), pl.col("text").str.len_bytes().cast(pl.Int64)
                      .alias("nbytes"))
    df = pl.concat([prev, cur], how="vertical_relaxed")
    df = df.with_columns((~pl.col("partial")).cast(pl.Int64).cum_sum().shift(1, fill_value=0).over("ks").alias("grp"))
    g = df.group_by("ks", "grp", maintain_order=True).agg(
        pl.col("key").first(), pl.col("seq").first(), pl.col("line").first(), pl.col("span").sum(), pl.col("text").str.join(""),
        pl.col("rec_ts").first(), pl.col("partial").last(), pl.col("over").any(), pl.col("nbytes").sum(),
    ).with_columns((pl.col("over") | (pl.col("nbytes") > limit)).alias("over"))
    pend.clear()
    for r in g.filter("partial").with_columns(pl.col("rec_ts").dt.epoch("us")).iter_rows(named=True):
        pend[r["ks"]] = {"seq": r["seq"], "line": r["line"], "span": r["span"], "text": "" if r["over"] else r["text"],
                         "ts": r["rec_ts"], "over": r["over"], "nbytes": r["nbytes"]}
    done = g.filter(~pl.col("partial")).sort("seq")
    return done.filter(~pl.col("over")).select(cols), done.filter("over").select("line", "span", "nbytes")
