"""systemd-journald and syslog (log-wrappers.md §5): `journalctl -o json` (one object per line, keys in any
order, MESSAGE as text, as an array of byte values when it holds control bytes, or null when too long), the
text modes `short`/`short-precise` and RFC 3164, `short-iso[-precise]` and rsyslog RFC 3339 lines, and RFC
5424. `short` and RFC 3164 print local time without a year: the zone is `state["tz"]` and the year
`state["year"]` (both set by the layer from --tz/--year), else the year of `state["file_mtime"]` in that zone,
stepping at each December -> January (see `_platforms.short_ts`)."""

from __future__ import annotations

import re

import polars as pl

from attribution.wrappers._platforms import (
    epoch_ts,
    head_lines,
    iso_ts,
    json_lines,
    line_sniff,
    share,
    short_ts,
    split_message_lines,
    sure,
    utf8_from_bytes,
)
from attribution.wrappers.base import Wrapper, records_frame

# journalctl's own lines between entries ("-- Boot 3f2a… --", "-- Logs begin at …", "-- No entries --")
JOURNAL_NOTE = re.compile(r"^-- .* --$")


def _sniff_text(head: str, pattern: re.Pattern[str]) -> float:
    lines = [ln for ln in head_lines(head, 40) if not JOURNAL_NOTE.match(ln)]
    return sure(share(lines, pattern), lines)


class JournaldJson(Wrapper):
    name = "journald_json"
    description = "systemd journal: journalctl -o json (one JSON object per line)"
    FIELDS = (
        "__REALTIME_TIMESTAMP",
        "_SYSTEMD_UNIT",
        "SYSLOG_IDENTIFIER",
        "_HOSTNAME",
        "CONTAINER_NAME",
        "CONTAINER_ID",
        "CONTAINER_PARTIAL_MESSAGE",
        "PRIORITY",
    )
    TEXT = pl.Struct({"MESSAGE": pl.Utf8, **{f: pl.Utf8 for f in FIELDS}})
    BYTES = pl.Struct({"MESSAGE": pl.List(pl.Int64), **{f: pl.Utf8 for f in FIELDS}})
    HEAD = re.compile(r'^\{.*"__(?:REALTIME_TIMESTAMP|CURSOR)"\s*:\s*"')

    def sniff(self, head: str, path: str) -> float:
        return line_sniff(head, self.HEAD)

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        # MESSAGE comes as a string or as byte values: each kind of line is decoded with its own dtype
        text = lines["text"]
        as_bytes = text.str.contains(r'"MESSAGE"\s*:\s*\[')
        t_dec, t_ok = json_lines(text.zip_with(~as_bytes, pl.Series([None], dtype=pl.Utf8)), self.TEXT)
        b_dec, b_ok = json_lines(text.zip_with(as_bytes, pl.Series([None], dtype=pl.Utf8)), self.BYTES)
        t = t_dec.struct.unnest()
        b = b_dec.struct.unnest().with_columns(MESSAGE=utf8_from_bytes(b_dec.struct.field("MESSAGE")))
        df = pl.DataFrame({"line": lines["line"], "raw": text, "ok": t_ok.zip_with(~as_bytes, b_ok)})
        df = df.with_columns(
            [t[c].zip_with(~as_bytes, b[c]).alias(c) for c in self.FIELDS]
            + [t["MESSAGE"].zip_with(~as_bytes, b["MESSAGE"]).alias("msg")]
        )
        # MESSAGE null: the journal dropped a field over its size limit (journalctl without --all)
        ok = pl.col("ok") & pl.col("msg").is_not_null() & pl.col("__REALTIME_TIMESTAMP").is_not_null()
        docker = pl.col("CONTAINER_NAME").is_not_null() | pl.col("CONTAINER_ID").is_not_null()
        # a MESSAGE sent through the journal API can hold several lines: one record per line
        return split_message_lines(
            records_frame(
                df.select(
                    "line",
                    ok.alias("ok"),
                    pl.when(ok).then(pl.col("msg")).otherwise("raw").alias("text"),
                    (pl.col("CONTAINER_PARTIAL_MESSAGE") == "true").fill_null(False).alias("partial"),
                    epoch_ts(pl.col("__REALTIME_TIMESTAMP"), "us").alias("rec_ts"),
                    # Docker's journald driver logs stdout at priority 6 and stderr at 3
                    pl.when(docker)
                    .then(pl.col("PRIORITY").replace_strict({"6": "stdout", "3": "stderr"}, default=None))
                    .alias("stream"),
                    pl.col("CONTAINER_NAME").alias("container"),
                    pl.col("_HOSTNAME").alias("host"),
                    pl.coalesce("SYSLOG_IDENTIFIER", "_SYSTEMD_UNIT").alias("unit"),
                )
            )
        )


class _TextSyslog(Wrapper):
    """Shared decoding of `<time> <host> <ident>[<pid>]: <message>` lines; subclasses give the regex (named
    groups ts or month+day, host, ident, msg) and how its time becomes UTC. An ident has no quotes or braces:
    `<time> <stream> {"id": ...}` (a JSON line behind `aws logs tail`) is not `ident: msg`."""

    LINE: re.Pattern[str]

    def sniff(self, head: str, path: str) -> float:
        return _sniff_text(head, self.LINE)

    def _groups(self, lines: pl.DataFrame) -> pl.DataFrame:
        return lines.select("line", "text", g=pl.col("text").str.extract_groups(self.LINE.pattern)).unnest(
            "g"
        )

    def _ts(self, g: pl.DataFrame, state: dict) -> pl.Series:
        return g.select(iso_ts(pl.col("ts"))).to_series()

    def decode(self, lines: pl.DataFrame, state: dict) -> pl.DataFrame:
        g = self._groups(lines)
        ok = pl.col("host").is_not_null()
        blank = pl.col("host") == "-"
        return records_frame(
            g.with_columns(rec_ts=self._ts(g, state)).select(
                "line",
                ok.alias("ok"),
                pl.when(ok)
                .then(pl.col("msg").fill_null("").str.strip_prefix("\ufeff"))
                .otherwise("text")
                .alias("text"),
                "rec_ts",
                pl.when(~blank).then(pl.col("host")).alias("host"),
                pl.when(pl.col("ident") != "-").then(pl.col("ident")).alias("unit"),
            )
        )


class JournaldShort(_TextSyslog):
    name = "journald_short"
    description = (
        "journalctl -o short / short-precise and syslog RFC 3164 (Mmm dd HH:MM:SS host ident[pid]: …)"
    )
    LINE = re.compile(
        r"^(?:<\d{1,3}>)?(?P<month>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
        r"(?P<rest>[ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) (?P<host>\S+) "
        r'(?P<ident>[^\s\[\]:"{}]+)(?:\[\d+\])?:(?: (?P<msg>.*))?$'
    )

    def _ts(self, g: pl.DataFrame, state: dict) -> pl.Series:
        return short_ts(g["month"], g["rest"], state, "journald_short")


class JournaldIso(_TextSyslog):
    name = "journald_iso"
    description = "journalctl -o short-iso / short-iso-precise and rsyslog RFC 3339 lines"
    LINE = re.compile(
        r"^(?:<\d{1,3}>)?(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)) "
        r"(?P<host>\S+) "
        r'(?P<ident>[^\s\[\]:"{}]+)(?:\[\d+\])?:(?: (?P<msg>.*))?$'
    )


class Syslog5424(_TextSyslog):
    name = "syslog_5424"
    description = "syslog RFC 5424 (<PRI>1 TIMESTAMP HOST APP PROCID MSGID [SD] MSG)"
    LINE = re.compile(
        r"^<\d{1,3}>1 (?P<ts>\S+) (?P<host>\S+) (?P<ident>\S+) \S+ \S+ "
        r'(?:-|(?:\[(?:[^\]"\\]|"(?:[^"\\]|\\.)*")*\])+)(?: (?P<msg>.*))?$'
    )


WRAPPERS = [JournaldJson(), JournaldShort(), JournaldIso(), Syslog5424()]
