"""Commands over the store itself: ingest, status, query, export. What a command runs (the ingest, DuckDB) is
imported inside it, so that starting the CLI does not load it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from attribution import render
from attribution.cli import options as opt
from attribution.cli.app import app, open_store
from attribution.errors import EXIT_INPUTS_NOT_READ
from attribution.render import Format
from attribution.store import default_store_path

if TYPE_CHECKING:
    from attribution.ingest import IngestSummary


class IngestProgress:
    """Rich progress on stderr: files, bytes and rows."""

    def __init__(self) -> None:
        self.p = Progress(
            TextColumn("[bold]ingest"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[files]}"),
            TextColumn("{task.fields[rows]:,} rows"), TimeElapsedColumn(),
            console=render.err, transient=True, disable=not render.err.is_terminal,
        )
        self.task: TaskID | None = None
        self.files_total = self.files_done = self.rows = 0

    def __call__(self, event: str, d: dict[str, Any]) -> None:
        if event == "start":
            self.files_total = d["files"]
            self.task = self.p.add_task("ingest", total=d["bytes"] or 1, files=f"0/{d['files']} files", rows=0)
        elif event == "advance":
            assert self.task is not None  # ("start" comes first)
            self.rows += d["rows"]
            self.p.update(self.task, advance=d["bytes"], rows=self.rows)
        elif event == "file_done":
            assert self.task is not None
            self.files_done += 1
            self.p.update(self.task, files=f"{self.files_done}/{self.files_total} files")


def print_summary(s: IngestSummary) -> None:
    e = render.err
    e.print(
        f"[bold]{len(s.files)} files[/]: {s.count('read')} read, {s.count('unchanged')} unchanged (not read again), "
        f"{s.count('unrecognised')} unrecognised, {s.count('failed')} failed"
        + "".join(f", {s.count(st)} {st}" for st in ("skipped", "vanished") if s.count(st)) + "; "
        f"{s.bytes / 1e6:,.1f} MB in {s.seconds:,.1f} s -> {s.store}"
    )
    if s.rows:
        names = {"engine_config": "engine_config (startup facts)"}
        e.print("rows added: " + ", ".join(f"{names.get(t, t)} {n:,}" for t, n in sorted(s.rows.items())
                                           if t not in ("ingest_errors", "ingest_line_shapes")))
    if s.errors:
        e.print(f"[yellow]{s.errors:,} problems recorded[/] (see `attribution status` or the ingest_errors table)")
    bad = [f for f in s.files
           if f.status in ("unrecognised", "failed", "skipped", "vanished") or (f.status == "read" and f.message)]
    for f in bad[:10]:
        e.print(f"  [yellow]{f.status}[/] {f.path}: {f.message}", highlight=False)
    if len(bad) > 10:
        e.print(f"  ... and {len(bad) - 10} more (see `attribution status`)")
    _print_census(s)


def _print_census(s: IngestSummary) -> None:
    """Lines by class; a warning for files read with lines but no row and no problem, and for engine files
    with unrecognised lines (their most frequent shapes)."""
    e = render.err
    read = [f for f in s.files if f.status == "read"]
    total = {c: sum(f.census.get(c, 0) for f in read) for c in ("parsed", "skipped", "unrecognised")}
    if sum(total.values()):
        e.print(f"lines read: {sum(total.values()):,} ({total['parsed']:,} parsed, {total['skipped']:,} skipped, "
                f"{total['unrecognised']:,} unrecognised)")
    for f in [f for f in read if f.silent][:10]:
        e.print(f"  [yellow]no rows[/] {f.path}: {f.lines:,} lines read as {f.format}, no row and no problem "
                "(see `attribution status`)", highlight=False)
    engine = [f for f in read if f.kind == "engine" and f.census.get("unrecognised")]
    if not engine:
        return
    n = sum(f.census["unrecognised"] for f in engine)
    e.print(f"[yellow]warning:[/] {n:,} unrecognised lines in {len(engine)} engine log(s); most frequent shapes:")
    shapes: dict[str, int] = {}
    for f in engine:
        for shape, k in f.unknown.items():
            shapes[shape] = shapes.get(shape, 0) + k
    for shape, k in sorted(shapes.items(), key=lambda kv: -kv[1])[:5]:
        e.print(f"  {k:>8,}  {shape}", highlight=False, markup=False)
    e.print("  (all of them: `attribution query \"select * from ingest_line_shapes where class = 'unrecognised'\"`)")


@app.command("ingest")
def ingest_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files, directories (recursed) or globs; .gz/.zst are read.")],
    store: opt.StoreOpt = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Force a format instead of sniffing it.")] = None,
    deployment: Annotated[str | None, typer.Option(help="Deployment (pod) name for these files.")] = None,
    label: Annotated[str | None, typer.Option(help="Cohort tag for comparisons, e.g. before / after.")] = None,
    year: Annotated[int | None, typer.Option(help="Year of vLLM timestamps (they have none); default: mtime.")] = None,
    tz: Annotated[str | None, typer.Option(help="Zone of naive log timestamps; default: this machine's.")] = None,
    start: Annotated[str | None, typer.Option(help="Start time for relative-time traces (Mooncake, BurstGPT, "
                                                   "bench); default 2024-01-01T00:00:00Z.")] = None,
    mapping: Annotated[Path | None, typer.Option(help="Field mapping (TOML) for a JSON access-log layout.")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Processes parsing files in parallel: the ingest's "
                                                        "own and N-1 workers; default $ATTRIBUTION_JOBS, else one "
                                                        "per CPU (1: no worker).")] = None,
    engine: Annotated[str | None, typer.Option(help="--engine spark: run on Spark (needs pyspark and Java); "
                                                   "default $ATTRIBUTION_ENGINE, else duckdb (here: local "
                                                   "worker processes).")] = None,
    spark_master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark; default "
                                                         "local[*].")] = None,
    spark_conf: Annotated[list[str] | None, typer.Option(help="Spark setting key=value for --engine spark "
                                                             "(repeatable).")] = None,
) -> None:
    """Read logs into the store: incremental (grown files are read from where they stopped), idempotent.

    Exit code 6 (after committing everything readable) when some input failed part way, was skipped (a FIFO,
    socket or device, a dangling symlink or loop, an unreadable file or directory) or vanished while read;
    `attribution status` and `ingest_files.reason` say which and why.

    With --engine spark the files are parsed on Spark executors, which write their rows into the store's
    staging area; the store and the inputs must be at the same path on every node (a shared filesystem).

    Example: attribution ingest /var/log/vllm/ --store ./store --year 2026 --tz UTC
    """
    from attribution.config import load_settings
    from attribution.ingest import ingest

    settings = load_settings({"engine": engine, "spark_master": spark_master, "spark_conf": spark_conf or ()})
    spark: dict[str, Any] = {}
    if settings.engine == "spark":
        from attribution.spark.session import parse_conf

        spark = {"engine": "spark", "spark_master": settings.spark_master,
                 "spark_conf": parse_conf(settings.spark_conf)}

    prog = IngestProgress()
    with prog.p:
        options = {k: v for k, v in {"start": start, "mapping": str(mapping) if mapping else None}.items() if v}
        summary = ingest(paths, default_store_path(store), fmt=fmt, deployment=deployment, label=label,
                         year=year, tz=tz, options=options, progress=prog, jobs=jobs, **spark)
    print_summary(summary)
    if summary.problems:
        raise typer.Exit(EXIT_INPUTS_NOT_READ)


COVERAGE_ROWS = 40


@app.command("status")
def status_cmd(store: opt.StoreOpt = None,
               fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format: table or json (its "
                                                   "tables differ in columns: no single CSV).")] = Format.table,
               ) -> None:
    """What the store holds: files, rows per table, time range per deployment, errors.

    Example: attribution status --format json
    """
    import polars as pl

    render.only(fmt, "status", Format.table, Format.json)
    from attribution.status import store_status

    st = store_status(open_store(store))
    if fmt == Format.json:
        render.data(st)
        return
    render.out.print(f"[bold]store[/] {st['store']}  (commit {st['commit']})")
    render.out.print(render.table(pl.DataFrame(st["files"]), "files"))
    render.out.print(render.table(pl.DataFrame({"table": list(st["rows"]), "rows": list(st["rows"].values())}),
                                  "rows"))
    if st["deployments"]:
        render.out.print(render.table(pl.DataFrame(st["deployments"]), "time range per deployment (UTC)"))
    if st["engine_versions"]:
        render.out.print(render.table(pl.DataFrame(st["engine_versions"]), "engine starts"))
    if st["joins"]:
        render.out.print(render.table(pl.DataFrame(st["joins"]), "engine <-> gateway matching per source"))
    if st["errors"]:
        render.out.print(render.table(pl.DataFrame(st["errors"]), f"problems ({st['error_count']:,} in all)"))
    if st["coverage"]:
        cov = pl.DataFrame(st["coverage"], infer_schema_length=None)
        # Paths relative to the folder all files share, and the counts that matter, so that the table stays
        # readable in a terminal (--format json has every column and the full paths).
        common = os.path.commonpath(cov["file"].to_list()) if cov.height > 1 else os.path.dirname(cov["file"][0])
        cov = cov.select(
            pl.col("file").map_elements(lambda f: os.path.relpath(f, common), return_dtype=pl.Utf8),
            "format", "lines", "parsed_pct", "skipped", "unrecognised", "flag",
        )
        if cov["flag"].null_count() == cov.height:
            cov = cov.drop("flag")
        lines = st["lines"]
        title = (f"line coverage per file ({sum(lines.values()):,} lines: {lines.get('parsed', 0):,} parsed, "
                 f"{lines.get('skipped', 0):,} skipped, {lines.get('unrecognised', 0):,} unrecognised)")
        if cov.height > COVERAGE_ROWS:  # most unrecognised first; --format json has every file
            title += f"; {COVERAGE_ROWS} of {cov.height} files shown"
        render.out.print(render.table(cov.head(COVERAGE_ROWS), title + f" (files under {common})"))
    if st["unrecognised_shapes"]:
        shapes = pl.DataFrame(st["unrecognised_shapes"], infer_schema_length=None).drop("source", "sample")
        shapes = shapes.with_columns(pl.col("shape").map_elements(escape, return_dtype=pl.Utf8))  # `[file.py:<n>]`
        render.out.print(render.table(shapes, "most frequent unrecognised lines (numbers, ids and strings masked)"))


@app.command("query")
def query_cmd(
    sql: Annotated[str, typer.Argument(help="SQL over requests, engine_steps, engine_config, access_log, "
                                            "ingest_files, ingest_line_shapes, ingest_errors.")],
    store: opt.StoreOpt = None,
    fmt: opt.FormatOpt = Format.table,
) -> None:
    """Run SQL against the store (DuckDB dialect).

    Example: attribution query "select kind, count(*) from engine_steps group by 1"
    """
    from attribution import queries

    con = open_store(store).connect()
    render.frame(queries.user_sql(con, sql), fmt)


@app.command("export")
def export_cmd(
    duckdb_file: Annotated[Path, typer.Option("--duckdb", help="Database file to write (replaced if it exists).")],
    store: opt.StoreOpt = None,
) -> None:
    """Write the store's tables into one DuckDB database file, for the DuckDB CLI or UI.

    Example: attribution export --duckdb traffic.duckdb
    """
    from attribution.export import export_duckdb

    n = export_duckdb(open_store(store), duckdb_file)
    render.err.print(f"wrote {duckdb_file} ({', '.join(f'{t} {c:,}' for t, c in n.items())})")


