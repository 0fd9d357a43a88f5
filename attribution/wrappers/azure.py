"""Azure Monitor Log Analytics `ContainerLogV2` (and the legacy `ContainerLog`) exports (log-wrappers.md §11):
the JSON array of row objects `az monitor log-analytics query` prints (every value text; `LogMessage` may be
an object when the container's line was JSON) and the portal's CSV export (`TimeGenerated [UTC]`-style column
names, ISO or `5/12/2026, 8:01:39.331 AM` times). Identity from `PodName`, `PodNamespace`, `ContainerName`,
`Computer`; rows come in the query's order, so records go back to time order through the spill sort."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

import polars as pl

from attribution.wrappers._platforms import (
    iso_ts,
    item_batches,
    split_message_lines,
    table_records,
)
from attribution.wrappers.base import TS, Wrapper, records_frame
from attribution.wrappers.kibana import csv_records, header_names
from attribution.wrappers.spill import sorted_records

# record column -> the table's column names (ContainerLogV2 first, then the legacy ContainerLog's)
COLUMNS: dict[str, tuple[str, ...]] = {
    "text": ("LogMessage", "LogEntry"),
    "rec_ts": ("TimeGenerated",),
    "stream": ("LogSource", "LogEntrySource"),
    "pod": ("PodName",),
    "namespace": ("PodNamespace",),
    "container": ("ContainerName", "ContainerID", "ContainerId"),
    "host": ("Computer",),
}
NAMES = {n for names in COLUMNS.values() for n in names}
PORTAL_TIME = "%m/%d/%Y, %I:%M:%S%.f %p"
ROW = re.compile(r'"TimeGenerated"\s*:\s*"')
TEXT_KEY = re.compile(r'"(?:LogMessage|LogEntry)"\s*:')
BATCH = 20_000


def column_name(name: str) -> str:
    """A portal CSV column name without its unit suffix: `TimeGenerated [UTC]` -> `TimeGenerated`."""
    return re.sub(r"\s*\[[^\]]*\]$", "", name.strip())


def azure_records(df: pl.DataFrame, first_line: int) -> pl.DataFrame:
    rows = table_records(df.rename(column_name), COLUMNS, first_line)
    ts = pl.coalesce(iso_ts(pl.col("rec_ts")),
                     pl.col("rec_ts").str.to_datetime(PORTAL_TIME, time_unit="us", time_zone="UTC", strict=False)
                     .cast(TS))
    return split_message_lines(records_frame(rows.with_columns(rec_ts=ts)))


def _text(v: object) -> str | None:
    """A row value as the table's text: a dynamic object (a JSON line) back to compact JSON."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return str(v)


class AzureJson(Wrapper):
    name = "azure_json"
    mode = "document"
    description = "Azure Monitor ContainerLogV2 rows as a JSON array (az monitor log-analytics query)"

    def sniff(self, head: str, path: str) -> float:
        s = head.lstrip()
        if not re.match(r"\[\s*\{", s):
            return 0.0
        return 0.98 if ROW.search(s[:65536]) and TEXT_KEY.search(s[:65536]) else 0.0

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_records(item_batches(pieces, "item", BATCH, _row_object, _rows_records),
                                  "no ContainerLogV2 rows in this JSON document")


def _row_object(r: object) -> dict:
    return r if isinstance(r, dict) else {}  # anything else stands for an empty row


def _rows_records(rows: list, first_line: int) -> pl.DataFrame:
    """Row objects -> records."""
    cols = {c: [_text(r.get(c)) for r in rows] for c in NAMES}
    return azure_records(pl.DataFrame(cols, schema=dict.fromkeys(NAMES, pl.Utf8)), first_line)


class AzureCsv(Wrapper):
    name = "azure_csv"
    mode = "document"
    description = "Azure Monitor ContainerLogV2 rows as a CSV export (portal: TimeGenerated [UTC], LogMessage)"

    def sniff(self, head: str, path: str) -> float:
        names = {column_name(n) for n in header_names(head)}
        return 0.98 if "TimeGenerated" in names and names & {"LogMessage", "LogEntry"} else 0.0

    def records(self, pieces: Iterable[bytes], state: dict) -> Iterator[pl.DataFrame]:
        yield from sorted_records(csv_records(pieces, azure_records), "no rows in this ContainerLogV2 CSV export")


WRAPPERS = [AzureJson(), AzureCsv()]
