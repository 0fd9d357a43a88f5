"""A store in object storage, for reading: `--store s3://bucket/prefix` answers like the local copy it was synced
from (a local S3 server, moto's, stands in for the real one); writing there is a clear error."""

from __future__ import annotations

import json
import math

import pytest
from conftest import litellm_line, run_cli

from attribution.errors import StoreError
from attribution.ingest import ingest
from attribution.spark.connection import data_path
from attribution.store import Store


def _s3fs():
    """s3fs, or the test skipped without the [test] extra. Imported by the tests that use it, not when the file
    is collected: moto and s3fs take seconds to import, and every xdist worker collects every file while one
    runs this one (conftest.ONE_WORKER_FILES)."""
    return pytest.importorskip("s3fs", reason="the [test] extra (moto[server], s3fs) is not installed")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A local S3 endpoint with a bucket, and a store synced into it under a prefix."""
    moto_server = pytest.importorskip("moto.server", reason="the [test] extra (moto[server], s3fs) is not installed")
    s3fs = _s3fs()
    mp = pytest.MonkeyPatch()
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION":
                 "us-east-1"}.items():
        mp.setenv(k, v)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    mp.setenv("ATTRIBUTION_S3_ENDPOINT", endpoint)
    tmp = tmp_path_factory.mktemp("remote")
    logs = tmp / "gw.jsonl"
    # three days (3, 2 and 1 requests): every day partition is a file each reader fetches through the fake S3
    # (moto, in this process), so few of them keep the reads cheap
    logs.write_text("".join(litellm_line(i, ("chat", "batch")[i % 2], 40000.0 * i, 40000.0 * i + 0.5,
                                         40000.0 * i + 4.0, 100 * (i + 1), 7 + i) + "\n" for i in range(6)))
    local = tmp / "store"
    ingest([str(logs)], local, tz="UTC", deployment="gw")
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint})
    fs.mkdir("bucket")
    fs.put(str(local) + "/", "bucket/prefix/", recursive=True)
    yield local, "s3://bucket/prefix"
    server.stop()
    mp.undo()


@pytest.mark.parametrize("command", ["lengths", "latency", "status"])
def test_an_s3_store_answers_like_the_local_one(s3, capsys, command):
    local, url = s3
    code, want, err = run_cli(capsys, command, "--store", str(local), "--format", "json")
    assert code == 0, err
    code, got, err = run_cli(capsys, command, "--store", url, "--format", "json")
    assert code == 0, err
    if command == "status":  # it names the store
        want = want.replace(str(local), url)
    assert _close(json.loads(got), json.loads(want))


def _close(a, b) -> bool:
    """Equal, floats to 1e-9 relative (DuckDB sums in parallel: the last digits vary run to run)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_an_s3_store_reads_a_partition_and_refuses_writes(s3, capsys):
    local, url = s3
    st = Store.open(url)
    assert st.snapshot().data == Store.open(local).snapshot().data
    days = sorted({p.split("day=")[1][:10] for p in st.snapshot().live("requests")})
    assert len(days) > 1
    con = st.connect(days=(days[0], days[0]))
    assert con.execute("select count(*) from requests").fetchall()[0][0] == 3  # 40000 s apart: 3 a day
    with pytest.raises(StoreError, match="not supported"):
        st.writer()
    code, _out, err = run_cli(capsys, "ingest", str(local / "data"), "--store", url)
    assert code == 4 and "object store is not supported" in err


def test_spark_reads_an_s3_stores_files_by_their_hadoop_urls(s3):
    # --engine spark builds its views from these paths (spark.read.parquet); Hadoop's S3 connector is s3a://
    # (Spark itself cannot run against the local S3 here: its connector jar is not on PyPI)
    local, url = s3
    st = Store.open(url)
    fs = _s3fs().S3FileSystem(client_kwargs={"endpoint_url": st.remote.fs.client_kwargs["endpoint_url"]})
    live = sorted(st.snapshot().live("requests"))
    paths = [data_path(st, p) for p in live]
    assert paths and all(p.startswith("s3a://bucket/prefix/data/requests/day=") for p in paths)
    assert all(fs.exists(p.replace("s3a://", "s3://", 1)) for p in paths)
    assert data_path(Store.open(local), live[0]) == str(local / live[0])
