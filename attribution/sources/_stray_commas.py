"""Stray commas in a streamed JSON document (`[,{...}`, `{...},,{...}`, `{...},]`): removed outside strings as
the pieces go by, so a hand-edited or concatenated LiteLLM array keeps every record (issue 16, finding 11).
Everything runs in `re` (no Python loop over bytes); a piece without a candidate pattern passes untouched."""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_ESCAPE = re.compile(rb"\\.", re.S)  # an escape pair inside a string (never a quote that ends it)
_HINT = re.compile(rb"[\[,]\s*,|,\s*\]")  # a stray comma may be here (or inside a string: checked below)
_TAIL = re.compile(rb"[\s,\[]*\Z")  # held back outside a string: the next piece may complete a pattern
# Strings are matched as whole tokens first (kept by the \1 template), so a comma inside one is never touched.
# (A comma followed by nothing but blanks and commas up to `]` is stray too: `{...},,]`.)
_STRAY = re.compile(rb'("(?:[^"\\]|\\.)*")|(?<=[\[,])\s*,|,(?=[\s,]*\])', re.S)


class StrayCommas:
    """Filters pieces of a JSON text; `removed` counts the commas taken out."""

    def __init__(self) -> None:
        self.removed = 0

    def __call__(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        inside, carry = False, b""  # `inside`: the next text starts inside a string
        for piece in pieces:
            out, inside, carry = self._clean(carry + piece, inside, final=False)
            if out:
                yield out
        if carry:
            yield self._clean(carry, inside, final=True)[0]

    def _clean(self, buf: bytes, inside: bool, final: bool) -> tuple[bytes, bool, bytes]:
        plain = _ESCAPE.sub(b"", buf)
        end_inside = inside ^ (plain.count(b'"') % 2 == 1)
        carry = b""
        if not final:
            if end_inside and plain.endswith(b"\\"):  # an escape cut in two: finish it with the next piece
                buf, carry = buf[:-1], buf[-1:]
            elif not end_inside:
                tail = _TAIL.search(buf)
                assert tail is not None  # (the pattern matches at the end of any buffer)
                cut = tail.start()
                buf, carry = buf[:cut], buf[cut:]
        if not _HINT.search(buf):
            return buf, end_inside, carry
        # Close a string cut at either end with a quote of our own, so the tokens line up, then drop them.
        pre, post = (b'"' if inside else b""), (b'"' if end_inside else b"")
        out = _STRAY.sub(rb"\1", pre + buf + post)
        out = out[len(pre):len(out) - len(post)]
        self.removed += buf.count(b",") - out.count(b",")
        return out, end_inside, carry
