"""Hand-worked wrapper fixtures (tests/fixtures/wrappers, built from the verbatim examples of
../shared/formats/log-wrappers.md) read through the ingest's own path, and the layer's contract: partial
records, identities, the census records, `--format`, resume and pickling."""

from __future__ import annotations

import os
import pickle
import random
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from attribution import formats, reader
from attribution.ingest import default_deployment, ingest, parse_path
from attribution.ingest.framing import lines_frame
from attribution.wrappers.cri import Cri
from attribution.wrappers.layer import BYTE_ESCAPE, WrappedSource

FIX = Path(__file__).resolve().parent / "fixtures" / "wrappers"
POD_LOG = FIX / "var/log/pods/llm_sglang-0_6f1c2a4e-1d2b-4c3d-9e8f-0a1b2c3d4e5f/sglang/0.log"


def _steps(parsed) -> list[tuple]:
    df = parsed.tables["engine_steps"].sort("line")
    return df.select("line", "deployment", "running", "waiting", "kv_usage").rows()


def layer_records(path: Path, chunk_bytes: int = 1 << 20, fmt: str | None = None
                  ) -> tuple[pl.DataFrame, WrappedSource]:
    """The census records a wrapped file's parse gives, chunk by chunk and at the end, as the ingest does."""
    from attribution.sources.base import ParseContext

    src = formats.get(fmt) if fmt else formats.sniff(reader.read_head(path).decode("utf-8", "replace"), str(path))
    assert isinstance(src, WrappedSource)
    ctx = ParseContext(str(path), "d", None, 2026, "UTC", path.stat().st_mtime, {}, {})
    parts = []
    for chunk in reader.chunks(path, chunk_bytes=chunk_bytes):
        if chunk.n_lines:
            parts.append(src.parse(lines_frame(chunk, BYTE_ESCAPE), ctx).records)
    parts.append(src.finish(ctx).records)
    return pl.concat([p for p in parts if p is not None]).sort("line"), src


def test_docker_json_file():
    p = parse_path(FIX / "docker_json_vllm.log", year=2026)
    assert p.source == "docker_json"
    # Line 1: ANSI escapes and `\r\n` inside the JSON string; line 3 continues on line 5 (no `\n` in `log`),
    # with a stderr record between the pieces; line 6 was cut while copying.
    assert _steps(p) == [(1, "docker_json_vllm", 18, 33, 0.877), (3, "docker_json_vllm", 17, 30, 0.88)]
    acc = p.tables["access_log"].sort("line")
    assert acc.select("line", "path", "http_status").rows() == [(2, "/v1/chat/completions", 200), (4, "/metrics", 200)]
    err = p.errors
    assert err.select("line", "source").rows() == [(6, "docker_json")]
    assert "not a docker_json record" in err["reason"][0]
    assert set(p.tables["engine_steps"]["source"]) == {"vllm_log"}


def test_docker_json_census_counts_physical_lines():
    recs, _ = layer_records(FIX / "docker_json_vllm.log")
    # The split record covers lines 3 and 5 (span 2); 6 lines in all.
    assert recs.select("line", "span").rows() == [(1, 1), (2, 1), (3, 2), (4, 1), (6, 1)]
    assert recs["span"].sum() == 6
    assert recs.filter(pl.col("line") == 3)["text"][0].endswith("Running: 17 reqs, Waiting: 30 reqs, "
                                                                  "GPU KV cache usage: 88.0%, Prefix cache hit rate: 0.0%")
    assert recs.filter(pl.col("line") == 4)["text"][0].endswith("200 OK <&>")  # \u003c \u0026 \u003e
    assert recs.filter(pl.col("line") == 1)["text"][0].startswith("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO")
    assert not recs.filter(pl.col("line") == 1)["text"][0].endswith("\r")
    assert recs["source"].to_list() == ["vllm_log"] * 4 + [None]


def test_docker_16k_split_only_last_piece_has_newline(tmp_path):
    # A >16 KiB line (a long `non-default args` dict) as Docker stores it: 16 KiB pieces, `\n` on the last only.
    head = "(APIServer pid=1) INFO 05-12 08:01:30 [api_server.py:1000] non-default args: {"
    long = head + ", ".join(f"'k{i}': {i}" for i in range(3000)) + "}"
    stats = ("(APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 "
             "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 5 reqs, Waiting: 0 reqs, GPU KV cache "
             "usage: 1.0%, Prefix cache hit rate: 0.0%")
    from wrapping import docker_json

    data = docker_json([long, stats], datetime(2026, 5, 12, tzinfo=UTC), split=16384)
    pieces = -(-(len(long) + 1) // 16384)
    assert pieces == 3 and data.count(b"\n") == pieces + 1 and data.count(b'\\n"') == 2
    f = tmp_path / "c" / "x-json.log"
    f.parent.mkdir()
    f.write_bytes(data)
    recs, _ = layer_records(f, chunk_bytes=5000)
    assert recs.select("line", "span").rows() == [(1, 3), (4, 1)]  # records 1-3 are one line
    assert recs["text"][0] == long
    assert _steps(parse_path(f, year=2026, chunk_bytes=5000))[0][2:] == (5, 0, 0.01)


def test_docker_stream_json():
    p = parse_path(FIX / "docker_stream_vllm.log", year=2026)
    assert p.source == "docker_stream_json"
    assert _steps(p) == [(1, "docker_stream_vllm", 18, 33, 0.877)]
    assert p.tables["access_log"].height == 1


def test_cri_containerd_pod_path():
    p = parse_path(POD_LOG)
    assert p.source == "cri"
    # P piece of line 2 ends at F on line 4 (an empty stdout F between them is its own record).
    df = p.tables["engine_steps"].sort("line")
    assert df.select("line", "deployment", "kind", "running", "new_tokens", "cached_tokens").rows() == [
        (1, "sglang-0", "decode", 3, None, None), (2, "sglang-0", "prefill", 3, 50, 10)]
    assert p.errors.height == 0


def test_cri_partial_inside_utf8_character_and_empty_f():
    recs, _ = layer_records(POD_LOG, chunk_bytes=200)
    assert recs.select("line", "span").rows() == [(1, 1), (2, 2), (3, 1), (5, 2)]
    assert recs.filter(pl.col("line") == 3)["text"][0] == ""
    assert recs.filter(pl.col("line") == 5)["text"][0] == "Loading weights: café done"
    assert recs["span"].sum() == 6


def test_crio_offsets_are_utc():
    lines = (FIX / "crio_offsets.log").read_text().splitlines()
    recs = Cri().decode(pl.DataFrame({"line": [1, 2, 3], "text": lines}), {})
    assert recs["rec_ts"].to_list() == [datetime(2026, 5, 12, 8, 1, 39, 331095, tzinfo=UTC),
                                        datetime(2026, 5, 12, 8, 1, 49, tzinfo=UTC),
                                        datetime(2026, 5, 12, 8, 1, 49, tzinfo=UTC)]
    assert recs["partial"].to_list() == [False, True, False]
    p = parse_path(FIX / "crio_offsets.log", year=2026)
    assert _steps(p) == [(1, "crio_offsets", 18, 33, 0.877), (2, "crio_offsets", 17, 30, 0.88)]


def test_compose_padded_prefix_names_the_service():
    p = parse_path(FIX / "compose_padded.log", year=2026)
    assert p.source == "compose"
    assert _steps(p) == [(1, "llm-engine-1", 18, 33, 0.877), (4, "llm-engine-1", 17, 30, 0.88)]
    assert p.tables["access_log"]["deployment"].to_list() == ["llm-engine-1"]
    recs, _ = layer_records(FIX / "compose_padded.log")
    # The other service's line is its own log, of no known format.
    assert recs.filter(pl.col("line") == 3).select("text", "source").rows() == [("Ready to accept connections", None)]


def test_kubectl_prefix_with_timestamps_splits_pods():
    p = parse_path(FIX / "kubectl_prefix_timestamps.log", year=2026)
    assert p.source == "kubectl_prefix"
    assert _steps(p) == [(1, "vllm-0", 18, 33, 0.877), (2, "vllm-1", 17, 30, 0.88)]
    assert p.tables["access_log"].select("line", "deployment").rows() == [(3, "vllm-0")]


@pytest.mark.parametrize("name", ["github_actions.log", "bracketed.log"])
def test_timestamp_prefixes(name):
    p = parse_path(FIX / name, year=2026)
    assert p.source == "timestamped"
    assert _steps(p) == [(2, name[:-4], 18, 33, 0.877)]
    recs, _ = layer_records(FIX / name)
    assert recs["text"][0].startswith("(EngineCore_")  # the prefix is gone from the first line too


def test_plain_logs_are_not_taken_for_wrapped():
    for f in ["vllm_log/docker_rfc3339_prefix.log", "sglang_log/docker_supervisor_ansi.log",
              "vllm_log/apiserver_prefix_ansi.log"]:
        path = Path(__file__).resolve().parent / "cases" / f
        src = formats.sniff(path.read_text(), str(path))
        assert not isinstance(src, WrappedSource), f


def test_format_forces_a_wrapper_and_resolves_again(tmp_path):
    src = formats.get("docker_json")
    assert isinstance(src, WrappedSource) and src is formats.get("docker_json")
    assert pickle.loads(pickle.dumps(src)) is src  # Plan pickles its source to worker processes
    # Forced on a file whose inner text alone would not be recognised as Docker's: still read.
    f = tmp_path / "forced.log"
    f.write_text((FIX / "docker_json_vllm.log").read_text().replace('"stream":"stdout"', '"stream":"stdout" '))
    p = parse_path(f, "docker_json", year=2026)
    assert p.source == "docker_json" and p.tables["engine_steps"].height == 2
    with pytest.raises(Exception, match="unknown format"):
        formats.get("no_such_wrapper")


def test_kubernetes_and_docker_paths_give_the_deployment():
    h = "0123456789abcdef" * 4
    assert default_deployment(Path("/var/log/pods/llm_vllm-0_50835643-aa/vllm/0.log")) == "vllm-0"
    assert default_deployment(Path("/var/log/pods/llm_vllm-0_50835643-aa/vllm/1.log.20260501-120000.gz")) == "vllm-0"
    assert default_deployment(Path(f"/var/log/containers/vllm-0_llm_vllm-server-{h}.log")) == "vllm-0"
    assert default_deployment(Path(f"/var/lib/docker/containers/{h}/{h}-json.log.2.gz")) == h[:12]
    assert default_deployment(Path("/srv/logs/vllm-a100.log")) == "vllm-a100"


def test_wrapped_file_resumes_across_ingests(tmp_path):
    # Appended in three steps, cut inside a partial record and inside a line: same rows as in one go.
    from test_store import rows

    data = (FIX / "docker_json_vllm.log").read_bytes()
    cut1, cut2 = data.index(b"Waiting: 30") - 40, data.index(b"Waiting: 30") + 10
    f = tmp_path / "logs" / "vllm-a.log"
    f.parent.mkdir()
    for part in (data[:cut1], data[:cut2], data):
        f.write_bytes(part)
        ingest([str(f)], tmp_path / "pieces", year=2026, tz="UTC", chunk_bytes=256)
    ingest([str(f)], tmp_path / "whole", year=2026, tz="UTC")
    for table in ("engine_steps", "access_log", "ingest_errors"):
        a, b = rows(tmp_path / "pieces", table), rows(tmp_path / "whole", table)
        assert a.height and a.equals(b), table
    again = ingest([str(f)], tmp_path / "pieces", year=2026, tz="UTC")
    assert [x.status for x in again.files] == ["unchanged"]


def test_docker_time_gives_the_year_vllm_does_not_print(tmp_path):
    f = tmp_path / "a" / "x.log"
    f.parent.mkdir()
    f.write_bytes((FIX / "docker_json_vllm.log").read_bytes())
    t = datetime(2030, 6, 1, tzinfo=UTC).timestamp()
    os.utime(f, (t, t))  # the mtime's year would be 2030; Docker's time says 2026
    p = parse_path(f)
    assert {ts.year for ts in p.tables["engine_steps"]["ts"]} == {2026}


# -- mode "document": a tiny document wrapper of the tests' own ----------------------------------------------


class _PieceReader:
    """A file-like view of `reader.Pieces` for ijson (it reads the document as it streams)."""

    def __init__(self, pieces):
        self._it, self._buf = iter(pieces), b""

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buf) < n) and (piece := next(self._it, None)) is not None:
            self._buf += piece
        out, self._buf = (self._buf, b"") if n < 0 else (self._buf[:n], self._buf[n:])
        return out


class TinyDoc:
    """`{"tiny_entries": [{"msg": ..., "ts": <epoch ms>, "pod": ...}, ...]}`, three records a batch."""

    name, mode, description = "tiny_doc", "document", "test document wrapper"

    def sniff(self, head: str, path: str) -> float:
        return 0.99 if "".join(head[:40].split()).startswith('{"tiny_entries"') else 0.0

    def records(self, pieces, state):
        import ijson

        from attribution.wrappers.base import records_frame

        batch: list[dict] = []
        for i, e in enumerate(ijson.items(_PieceReader(pieces), "tiny_entries.item"), 1):
            batch.append({"line": i, "text": e["msg"], "rec_ts": datetime.fromtimestamp(int(e["ts"]) / 1000, UTC),
                          "pod": e.get("pod")})
            if len(batch) == 3:
                yield records_frame(pl.DataFrame(batch))
                batch = []
        if batch:
            yield records_frame(pl.DataFrame(batch))


@pytest.fixture
def tiny_doc(monkeypatch):
    from attribution import wrappers
    from attribution.wrappers import layer

    monkeypatch.setitem(wrappers.registry(), "tiny_doc", TinyDoc())
    layer._wrapped.cache_clear()
    yield
    layer._wrapped.cache_clear()


def _doc(lines: list[str], pod: str | None = None) -> str:
    import json

    return json.dumps({"tiny_entries": [{"msg": ln, "ts": 1778572899000 + i, **({"pod": pod} if pod else {})}
                                        for i, ln in enumerate(lines)]}, indent=1)


def test_document_wrapper_streams_batches(tiny_doc, tmp_path):
    from test_wrappers_metamorphic import comparable, plain_lines

    plain = FIX.parent.parent / "cases" / "vllm_log" / "restart_after_traffic.log"
    lines = plain_lines(plain)
    f = tmp_path / "vllm_log" / plain.name
    f.parent.mkdir()
    f.write_text(_doc(lines))
    got = parse_path(f, year=2026)
    assert got.source == "tiny_doc"
    want = parse_path(plain, year=2026)
    assert comparable(got.tables, "tiny_doc") == comparable(want.tables, "tiny_doc")
    assert got.tables["engine_steps"]["line"].max() <= len(lines)  # record ordinals
    f.write_text(_doc(lines, pod="vllm-7"))
    assert set(parse_path(f, year=2026).tables["engine_steps"]["deployment"]) == {"vllm-7"}


def test_document_wrapper_file_is_read_again_whole_when_it_changes(tiny_doc, tmp_path):
    from test_store import rows

    plain = FIX.parent.parent / "cases" / "vllm_log" / "restart_after_traffic.log"
    lines = plain.read_text().splitlines()
    f = tmp_path / "export.json"
    f.write_text(_doc(lines[: len(lines) // 2]))
    first = ingest([str(f)], tmp_path / "s", year=2026, tz="UTC")
    assert first.files[0].format == "tiny_doc" and first.files[0].bytes == f.stat().st_size
    f.write_text(_doc(lines))
    ingest([str(f)], tmp_path / "s", year=2026, tz="UTC")
    ingest([str(f)], tmp_path / "whole", year=2026, tz="UTC")
    for table in ("engine_steps", "engine_config"):
        a, b = rows(tmp_path / "s", table), rows(tmp_path / "whole", table)
        assert a.height and a.drop("file").equals(b.drop("file")), table


def test_rotated_gzipped_cri_file_in_the_pod_folder(tmp_path):
    import gzip

    pod = tmp_path / "var/log/pods/llm_sglang-0_6f1c2a4e-1d2b-4c3d-9e8f-0a1b2c3d4e5f/sglang"
    pod.mkdir(parents=True)
    rotated = pod / "0.log.20260501-120000.gz"
    rotated.write_bytes(gzip.compress(POD_LOG.read_bytes()))
    p = parse_path(rotated)
    assert p.source == "cri"
    assert _steps(p) == _steps(parse_path(POD_LOG))
    assert set(p.tables["engine_steps"]["deployment"]) == {"sglang-0"}


def test_every_wrapped_unit_lists_its_census_records(tmp_path):
    # A chunk whose records are all still pending or held lists none (an empty frame, not None: None would
    # make the census count the chunk's physical lines, and the records again when they are parsed).
    from attribution.sources.base import ParseContext

    src = formats.get("cri")
    ctx = ParseContext(str(POD_LOG), "d", None, 2026, "UTC", 0.0, {}, {})
    seen = 0
    for chunk in reader.chunks(POD_LOG, chunk_bytes=100):
        res = src.parse(lines_frame(chunk, BYTE_ESCAPE), ctx)
        assert res.records is not None
        seen += res.records.height
    assert seen == 0  # a small file: its identity's format is decided at the end
    assert src.finish(ctx).records["span"].sum() == 6


def test_a_chunk_gives_the_same_lines_split_in_python_or_read_by_the_csv_reader(monkeypatch):
    """lines_frame splits a small chunk in Python and reads a large one with Polars' CSV reader (falling back
    to the split where the reader would not give the lines byte for byte): the same lines either way, on
    every fixture and real log and on edge bytes (CR, BOM, \\x01, NUL, invalid UTF-8, empty lines, no end)."""
    from conftest import shared

    from attribution.ingest import framing

    files = [*sorted(FIX.rglob("*.log")), *sorted(shared("traces", "real_logs").glob("*.log"))]
    edges = [b"a\r\nb\n", b"\xef\xbb\xbfx\ny\n", b"a\x01b\nc\n", b"a\x00b\n", b"\xff\xfe bad\nok\n", b"\n\n\n",
             b"no end", b"x\r", b"a\n\nb\n"]
    datas = [f.read_bytes() for f in files] + edges
    assert max(len(d) for d in datas) > 50_000
    for data in datas:
        chunk = reader.Chunk(data=data, first_line=7, n_lines=data.count(b"\n") + (not data.endswith(b"\n")),
                             start=0, end=len(data), tail=not data.endswith(b"\n"))
        for errors in ("replace", BYTE_ESCAPE):
            monkeypatch.setattr(framing, "SPLIT_MAX_BYTES", 1 << 40)
            split = lines_frame(chunk, errors)
            monkeypatch.setattr(framing, "SPLIT_MAX_BYTES", -1)
            read = lines_frame(chunk, errors)
            assert split.equals(read), data[:60]
            assert split.height == chunk.n_lines


def test_a_chunks_lines_are_counted_as_bytes_count_counts_them(tmp_path, monkeypatch):
    """reader.count_newlines (NumPy, a block at a time) gives `data.count(b"\\n")` on sizes around its blocks and
    on newlines at a block's first and last byte, and chunks() numbers every line of a file with it."""
    block = 1 << 12
    monkeypatch.setattr(reader, "_COUNT_BLOCK", block)
    rng = random.Random(7)
    for size in (0, 1, block - 1, block, block + 1, 3 * block + 5):
        for data in (bytes(rng.choice(b"ab\n\r\x00\xff") for _ in range(size)), b"\n" * size,
                     b"x" * size, bytes(10 if i % block in (0, block - 1) else 121 for i in range(size))):
            assert reader.count_newlines(data) == data.count(b"\n"), (size, data[:20])
    lines = [f"line {i} " + "z" * rng.randrange(0, 300) for i in range(3000)]
    path = tmp_path / "f.log"
    path.write_text("\n".join(lines) + "\nno end")
    got = [c for c in reader.chunks(path, chunk_bytes=3 * block + 17)]
    assert len(got) > 30 and all(len(c.data) > block for c in got[:-2])
    assert [c.first_line for c in got[1:]] == [c.first_line + c.n_lines for c in got[:-1]]
    assert sum(c.n_lines for c in got) == 3001 and got[-1].tail
    assert all(c.n_lines == c.data.count(b"\n") for c in got[:-1])
