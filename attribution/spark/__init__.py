"""Running the analyses and the ingest on Spark (`--engine spark`): the same questions as the embedded DuckDB
path, over the same store, for data that does not fit on one machine. Optional: needs `pip install
'attribution[spark]'` and a Java runtime (17 or later)."""
