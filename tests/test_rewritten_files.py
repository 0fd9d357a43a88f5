"""A log rewritten behind an unchanged first 4 KiB (a launcher's constant banner) is new content, read from its
start; growth, rename rotation and copytruncate behind the same banner stay exact."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from synthetic_source import register
from test_store import rows

from attribution.ingest import ingest

register()

BANNER = "SYNTH v1\n" + "".join(f"# launcher banner line {i:04d}: the same on every start\n" for i in range(120))


def _write(path: Path, start: int, count: int, banner: bool = True, mode: str = "w") -> None:
    body = "".join(f"ts=2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d} n={i}\n"
                   for i in range(start, start + count))
    with open(path, mode) as fh:
        fh.write((BANNER if banner else "") + body)


def test_banner_is_longer_than_the_head_fingerprint():
    assert len(BANNER.encode()) > 4096


def test_rewritten_behind_a_constant_banner_is_read_anew(tmp_path):
    log = tmp_path / "vllm.log"
    _write(log, 0, 1013)
    ingest([str(log)], tmp_path / "s", chunk_bytes=8192)
    _write(log, 100_000, 1013)  # the launcher started again: same banner, new (longer) content
    assert log.stat().st_size > 0
    second = ingest([str(log)], tmp_path / "s", chunk_bytes=8192)
    assert second.rows["engine_steps"] == 1013  # none of the new content skipped
    got = rows(tmp_path / "s")
    assert got.height == 2026
    assert set(got["running"]) == set(range(1013)) | set(range(100_000, 101_013))


def test_growth_behind_the_banner_is_still_read_from_the_offset(tmp_path):
    log = tmp_path / "vllm.log"
    _write(log, 0, 500)
    ingest([str(log)], tmp_path / "s", chunk_bytes=4096)
    _write(log, 500, 200, banner=False, mode="a")
    grown = ingest([str(log)], tmp_path / "s", chunk_bytes=4096)
    assert grown.rows["engine_steps"] == 200
    assert grown.files[0].bytes < log.stat().st_size / 2
    assert sorted(rows(tmp_path / "s")["running"]) == list(range(700))


def _read_then_grown(tmp_path: Path, more: int) -> tuple[Path, Path]:
    """logs/vllm.log (banner, n=0..299) ingested into `s`, then grown by `more` lines not yet read."""
    d = tmp_path / "logs"
    d.mkdir()
    log = d / "vllm.log"
    _write(log, 0, 300)
    ingest([str(d)], tmp_path / "s")
    _write(log, 300, more, banner=False, mode="a")
    return d, log


def test_rename_rotation_behind_the_banner_reads_the_rest_and_the_new_file(tmp_path):
    d, log = _read_then_grown(tmp_path, 50)  # grew, then was rotated before we saw the growth
    log.rename(d / "vllm.log.1")
    _write(log, 10_000, 400)  # the new file at the old path is longer than the old offset
    second = ingest([str(d)], tmp_path / "s")
    assert second.rows["engine_steps"] == 450  # 50 from the renamed file's unread part + 400 new
    assert sorted(rows(tmp_path / "s")["running"]) == [*range(350), *range(10_000, 10_400)]
    again = ingest([str(d)], tmp_path / "s")
    assert {f.status for f in again.files} == {"unchanged"}


def test_copytruncate_behind_the_banner(tmp_path):
    d, log = _read_then_grown(tmp_path, 20)
    shutil.copy2(log, d / "vllm.log.1")  # logrotate copytruncate: copy, then truncate in place
    os.truncate(log, 0)
    _write(log, 5000, 30, banner=False, mode="a")  # the engine writes on (no banner in the truncated file)
    ingest([str(d)], tmp_path / "s", fmt="synthetic")  # (the banner-less rest sniffs as nothing)
    got = sorted(rows(tmp_path / "s")["running"])
    assert got == [*range(320), *range(5000, 5030)]
