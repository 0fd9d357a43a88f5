"""Reading input files into the store: which files to read and from where, running their source over chunks
of lines, filling provenance, and committing rows together with the file's new offset.

Per file (`planning.plan_file`): an unchanged file (same size and mtime) is skipped without being read; a file
whose head and whose bytes just before the last offset still match their fingerprints is read from that offset
(a grown log, or a log renamed by rotation when its old path is gone); a file where either changed (rotated,
truncated or rewritten in place, even behind a constant banner) is new content and is read from the start.
Rows and the offset they lead to are committed together, so an interrupted ingest resumes exactly where its
last commit stopped. Inputs that are not read (see PROBLEMS) are recorded with the reason.

The jobs live in modules named for them: zones (time zones), naming (deployment names), framing (lines of a
chunk), parsing (one file, no store), units (a planned file, what a worker runs), planning, batching,
compaction, and run (the ingest itself). This package exports the entry points callers use.
"""

from attribution.ingest.naming import default_deployment
from attribution.ingest.parsing import ParsedFile, file_error, parse_path, parse_units
from attribution.ingest.run import ingest
from attribution.ingest.summary import PROBLEMS, FileReport, IngestSummary, Progress
from attribution.ingest.units import Plan, Unit, parse_plan
from attribution.ingest.zones import local_tz

__all__ = ["PROBLEMS", "FileReport", "IngestSummary", "ParsedFile", "Plan", "Progress", "Unit", "default_deployment",
           "file_error", "ingest", "local_tz", "parse_path", "parse_plan", "parse_units"]
