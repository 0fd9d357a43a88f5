"""Kibana / OpenSearch Dashboards Discover CSV exports (log-wrappers.md §7.3): a header row of the chosen
columns (dotted field names such as `kubernetes.pod.name`), `@timestamp` in Kibana's default `dateFormat`
(`Feb 14, 2012 @ 17:47:08.000`, no zone: read in `--tz`, Kibana writes the browser's zone) or ISO 8601 with
its zone, newest first by default. The text and identity columns are the shipper fields Elasticsearch holds
(elastic.FIELDS); records go back to time order through the spill sort."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import polars as pl

from attribution.wrappers._platforms import (
    iso_ts,
    iter_csv_batches,
    split_message_lines,
    table_records,
)
from attribution.wrappers.base import TS, Wrapper, records_frame
from attribution.wrappers.elastic import FIELDS, path_identity
from attribution.wrappers.spill import sorted_records

TIME_COLUMNS = ("@timestamp", "timestamp", "time")
# The export's column names for each record column: the shipper's dotted field names, time first.
COLUMNS: dict[str, tuple[str, ...]] = {
    **{col: names for col, names in FIELDS.items() if col != "rec_ts"},
    "rec_ts": TIME_COLUMNS,
}
_NAME = r'(?:"[^"\n]*"|[^,"\n]*)'
HEADER = re.compile(rf"^{_NAME}(?:,{_NAME})*$")
KIBANA_TIME = "%b %d, %Y @ %H:%M:%S%.f"  # moment's `MMM D, YYYY @ HH:mm:ss.SSS`


def header_names(head: str) -> list[str]:
    """The column names of a CSV head's first line (quotes removed), or [] when it is not a CSV header."""
    first = head.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    if not HEADER.match(first):
        return []
    return [n.strip().strip('"') for n in first.split(",")]


def csv_records(pieces: Iterable[bytes], to_records: Callable[[pl.DataFrame, int], pl.DataFrame]
                ) -> Iterator[pl.DataFrame]:
    """A CSV export's batches of rows -> records (`to_records(rows, first record number)`)."""
    n = 0
    for df in iter_csv_batches(pieces):
        yield to_records(df, n + 1)
        n += df.height


def kibana_time(text: pl.Expr, tz: str) -> pl.Expr:
    """Kibana's default date text in the zone `tz`, else ISO 8601 with a zone -> UTC."""
    local = (
        text.str.to_datetime(KIBANA_TIME, time_unit="us", strict=False)
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .cast(TS)
    )
    return pl.coalesce(local, iso_ts(text))


class KibanaCsv(Wrapper):
    name = "kibana_csv"
    mode = "document"
    description = "Kibana / OpenSearch Dashboards Discover CSV export (@timestamp and message columns)"

    def sniff(self, head: str, path: str) -> float:
        names = set(header_names(head))
        has_text = bool(names & set(FIELDS["text"]))
        return 0.98 if has_text and names & set(TIME_COLUMNS) else 0.0

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        tz = state.get("tz") or "UTC"
        yield from sorted_records(csv_records(pieces, lambda df, first: self._records(df, first, tz)),
                                  "no rows in this Kibana CSV export", newest_first=True)

    @staticmethod
    def _records(df: pl.DataFrame, first_line: int, tz: str) -> pl.DataFrame:
        rows = table_records(df, COLUMNS, first_line).with_columns(
            pl.col(c).replace("-", None) for c in ("pod", "namespace", "container", "host", "path", "stream")
        )  # Kibana prints `-` for a field the document lacks
        rows = path_identity(rows).with_columns(rec_ts=kibana_time(pl.col("rec_ts"), tz))
        return split_message_lines(records_frame(rows))  # a stitched multi-line event: one record per line


WRAPPERS = [KibanaCsv()]
