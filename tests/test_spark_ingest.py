"""`ingest --engine spark` (files parsed on Spark executors, committed by the driver) gives the store exactly
what the local ingest gives: every table's rows, the ingest_files states and the ingest_errors, on a slice of
sample_logs/ (every file, cut short) and on wrapped, broken and growing files; a rerun adds nothing; a driver
that dies before its commit leaves the previous state. The session's one SparkSession (conftest's
spark_session): the JVM takes seconds to start."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, SAMPLE, SPARK_CONF, SPARK_MASTER, sample_slice
from test_store import rows
from typer.testing import CliRunner

from attribution.cli import app
from attribution.errors import UsageError
from attribution.ingest import ingest
from attribution.schema import TABLES
from attribution.store import Store, Writer

MASTER, CONF = SPARK_MASTER, SPARK_CONF
# file-state fields that say when a file was read or which data files hold its rows, not what was read
WHEN = ("first_ingested", "last_ingested", "seq", "unsealed_files")


@pytest.fixture
def spark(spark_session):
    return spark_session


def same_store(a: Path, b: Path) -> None:
    """Every table's rows and the ingest_files states equal (times of reading aside)."""
    for table in [*TABLES, "ingest_files"]:
        ra, rb = rows(a, table), rows(b, table)
        if table == "ingest_files":
            ra, rb = (df.drop([c for c in WHEN if c in df.columns]) for df in (ra, rb))
        assert ra.height == rb.height, table
        assert ra.equals(rb), table
    states = [{st["path"]: {k: v for k, v in st.items() if k not in WHEN} for st in Store.open(s).snapshot().files.values()}
              for s in (a, b)]
    assert states[0] == states[1]


def test_sample_logs_on_spark_equal_the_local_ingest(spark, tmp_path):
    # in chunks of 256 KiB: the gateway log's slice is several chunks on one executor, in order
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    sample_slice(tmp_path / "in")
    how = dict(year=truth["year"], tz=truth["tz"], chunk_bytes=256 << 10)
    ingest([str(tmp_path / "in")], tmp_path / "local", **how)
    got = ingest([str(tmp_path / "in")], tmp_path / "s", engine="spark", spark_master=MASTER, spark_conf=CONF,
                 **how)
    assert got.count("read") >= 7 and got.rows["requests"] > 1000 and got.rows["metric_histograms"] > 1000
    same_store(tmp_path / "local", tmp_path / "s")
    # the driver committed every file's rows in one commit (then compaction, when parts are many)
    first = json.loads((tmp_path / "s" / "_log" / f"{1:020d}.json").read_text())
    assert len(first["files"]) == len(got.files) and not list((tmp_path / "s" / "_tmp").iterdir())
    version = Store.open(tmp_path / "s").snapshot().version
    again = ingest([str(tmp_path / "in")], tmp_path / "s", engine="spark", spark_master=MASTER,
                   spark_conf=CONF, **how)
    assert again.count("unchanged") == len(again.files) and not again.rows
    assert Store.open(tmp_path / "s").snapshot().version == version


def _inputs(d: Path) -> None:
    """Wrapped logs, a vLLM log with a bad line and an unterminated last line, a cut-off .gz, an unrecognised
    file."""
    d.mkdir()
    for name in ("docker_json_vllm.log", "kubectl_prefix_timestamps.log"):
        shutil.copy(REPO / "tests" / "fixtures" / "wrappers" / name, d / name)
    lines = (REPO / "tests" / "fixtures" / "wrappers" / "kubectl_prefix_timestamps.log").read_text().splitlines()
    plain = [ln.split(" ", 2)[2] for ln in lines if ln.startswith("[pod/")]
    (d / "vllm.log").write_text("\n".join(plain[:3]) + "\n(APIServer pid=1) INFO 05-12 08:0" + "\x00" * 3 + "\n"
                                + "\n".join(plain[3:]))  # no newline at the end: an unterminated tail
    whole = gzip.compress(("\n".join(plain) + "\n").encode())
    (d / "cut.log.gz").write_bytes(whole[: len(whole) // 2])
    (d / "notes.txt").write_text("nothing a parser knows\n" * 3)


def test_wrapped_bad_and_growing_files_on_spark_equal_the_local_ingest(spark, tmp_path):
    src = tmp_path / "in"
    _inputs(src)
    runs = {"local": {}, "spark": dict(engine="spark", spark_master=MASTER, spark_conf=CONF)}
    for name, how in runs.items():
        ingest([str(src)], tmp_path / name, year=2026, tz="UTC", **how)
    same_store(tmp_path / "local", tmp_path / "spark")
    errors = rows(tmp_path / "spark", "ingest_errors")
    assert errors.filter(pl.col("file").str.ends_with("cut.log.gz")).height >= 1
    assert errors.filter(pl.col("file").str.ends_with("notes.txt")).height == 1
    with open(src / "vllm.log", "a") as fh:  # the tail completed and the log grown: read from its offset
        fh.write("\n" + (src / "vllm.log").read_text().splitlines()[0] + "\n")
    s = ingest([str(src)], tmp_path / "local", year=2026, tz="UTC")
    assert [f.status for f in s.files if f.path.endswith("/vllm.log")] == ["read"]
    res = CliRunner().invoke(app, ["ingest", str(src), "--store", str(tmp_path / "spark"), "--year", "2026",
                                   "--tz", "UTC", "--engine", "spark", "--spark-master", MASTER,
                                   *(a for k, v in CONF.items() for a in ("--spark-conf", f"{k}={v}"))])
    assert res.exit_code == 0, res.output
    same_store(tmp_path / "local", tmp_path / "spark")


def _orphans(store: Path) -> list[Path]:
    """Parquet files in the store that no commit names (staged, or adopted by a writer that died)."""
    snap = Store.open(store).snapshot()
    return [p for p in store.rglob("*.parquet") if p.relative_to(store).as_posix() not in snap.data]


def test_a_driver_dying_before_its_commit_leaves_the_previous_state(spark, tmp_path, monkeypatch):
    src = tmp_path / "in"
    _inputs(src)
    (src / "vllm.log").unlink()  # (a file not yet read stays out of the first ingest)
    ingest([str(src / "docker_json_vllm.log")], tmp_path / "s", year=2026, tz="UTC")
    before = Store.open(tmp_path / "s").snapshot()

    def die(*_a, **_k):
        raise KeyboardInterrupt  # the driver stops between the Spark job and its commit

    with monkeypatch.context() as m:
        m.setattr(Writer, "commit", die)
        with pytest.raises(KeyboardInterrupt):
            ingest([str(src)], tmp_path / "s", year=2026, tz="UTC", engine="spark", spark_master=MASTER,
                   spark_conf=CONF)
    assert Store.open(tmp_path / "s").snapshot().to_json() == before.to_json()
    assert _orphans(tmp_path / "s"), "the executors staged rows, no commit names them"
    ingest([str(src)], tmp_path / "s", year=2026, tz="UTC", engine="spark", spark_master=MASTER, spark_conf=CONF)
    assert not _orphans(tmp_path / "s"), "the next writer deleted them"
    ingest([str(src)], tmp_path / "ref", year=2026, tz="UTC")
    same_store(tmp_path / "ref", tmp_path / "s")


def test_spark_without_java_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    log = REPO / "tests" / "fixtures" / "wrappers" / "docker_json_vllm.log"
    res = CliRunner().invoke(app, ["ingest", str(log), "--store", str(tmp_path / "s"), "--engine", "spark"])
    assert isinstance(res.exception, UsageError) and res.exception.exit_code == 2
    assert "Java" in str(res.exception) and not (tmp_path / "s").exists()


def test_rows_staged_by_a_failed_attempt_of_a_task_are_deleted(tmp_path):
    """A task retried (or run speculatively twice) staged rows twice; only the returned attempt's are kept."""
    from attribution.spark.ingest import drop_retried
    from attribution.store import stage

    st = Store.open(tmp_path / "s", create=True)
    frame = pl.DataFrame({"x": [1]})
    kept, lost = stage(st.root, "requests", frame), stage(st.root, "requests", frame)
    drop_retried(st.root, [(0, ("unit", None, {}, {}, {"requests": kept})), (0, ("done",))])
    assert [p.name for p in (st.root / "_tmp").iterdir()] == [kept.name] and lost.name != kept.name
