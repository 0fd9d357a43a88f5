"""The CRI log line that containerd and CRI-O write under /var/log/pods on every Kubernetes node
(../shared/formats/log-wrappers.md §3.1): `<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <content>`. `P` pieces
are reassembled by the layer up to the `F` that ends them; the content is raw bytes, so a piece can end inside
a UTF-8 character (the layer joins bytes before decoding). The pod comes from the path (ingest.default_deployment).
"""

from __future__ import annotations

import re

import polars as pl

from attribution.wrappers.base import Wrapper, records_frame
from attribution.wrappers.docker import parse_time

# containerd: Go RFC3339Nano (0-9 digits, `Z` or the node's offset); CRI-O: 9 digits and `+00:00`.
_TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
LINE_RE = rf"^({_TS}) (stdout|stderr) ([PF])(?::\S*)?(?: (.*))?$"
_SNIFF = re.compile(LINE_RE, re.S)


class Cri(Wrapper):
    name = "cri"
    description = "Kubernetes CRI log file (containerd, CRI-O): /var/log/pods/<ns>_<pod>_<uid>/<container>/N.log"

    def sniff(self, head: str, path: str) -> float:
        lines = [ln for ln in head.split("\n")[:20] if ln]
        if not lines:
            return 0.0
        hits = sum(1 for ln in lines if _SNIFF.match(ln))
        return 0.99 if hits >= 0.8 * (len(lines) - 1 if len(lines) > 3 else len(lines)) else 0.0

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        # Four fields split on the first three spaces (1.6x faster than LINE_RE's groups), then checked.
        df = lines.with_columns(pl.col("text").str.splitn(" ", 4).alias("_p"))
        f = pl.col("_p").struct
        ts = parse_time(f.field("field_0"))
        tag = f.field("field_2")
        ok = (ts.is_not_null() & f.field("field_1").is_in(["stdout", "stderr"])
              & tag.str.contains(r"^[PF](?::\S*)?$")).fill_null(False)
        out = df.select(
            "line",
            ok.alias("ok"),
            pl.when(ok).then(f.field("field_3").fill_null("")).otherwise(pl.col("text")).alias("text"),
            tag.str.starts_with("P").fill_null(False).alias("partial"),
            ts.alias("rec_ts"),
            f.field("field_1").alias("stream"),
        )
        return records_frame(out)


WRAPPERS = [Cri()]
