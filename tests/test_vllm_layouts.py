"""vLLM lines as they arrive: Ray / framework prefixes on the real logs, a wrapper's record time (`rec_ts`)
for the year and for lines without a header, the V0 prefix-cache line across a chunk boundary, spec-decode
lines of a second real log, and the lines a row consumed without being its `line`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from chunked_parse import parse_in_chunks
from conftest import shared

from attribution.sources.vllm_log import VllmLog

SRC = VllmLog()
CASES = Path(__file__).resolve().parent / "cases" / "vllm_log"
DUMP = shared("traces/vllm_server_logs/01_2026_05_09_vllm_log_dump.txt")
SPARK = shared("traces/real_logs/vllm_repo-sostrowsk-dgx-spark-local-llm.log")
needs_shared = pytest.mark.skipif(not DUMP.exists(), reason="../shared/traces not present")
STATS = (
    "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%"
)


def frame(texts: list[str], rec_ts: list[datetime | None] | None = None) -> pl.DataFrame:
    cols = {"line": pl.Series(range(1, len(texts) + 1), dtype=pl.Int64), "text": pl.Series(texts, dtype=pl.Utf8)}
    if rec_ts is not None:
        cols["rec_ts"] = pl.Series(rec_ts, dtype=pl.Datetime("us", "UTC"))
    return pl.DataFrame(cols)


def run(lines: pl.DataFrame, *, year: int | None = None, tz: str = "UTC", chunk: int | None = None):
    """Parse in chunks of `chunk` lines with one ctx persisted as JSON between them, like the ingest."""
    tables, errors, consumed, _ = parse_in_chunks(SRC, lines, year=year, tz=tz, chunk=chunk)
    return {name: df.sort("line") for name, df in tables.items()}, (pl.concat(errors) if errors else None), consumed


def read_lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", errors="replace").split("\n")[:-1]


# --- rec_ts ---------------------------------------------------------------------------------------------


def test_rec_ts_gives_the_year_across_new_year() -> None:
    lines = frame(
        [f"INFO 12-31 23:59:58 [loggers.py:87] {STATS}", f"INFO 01-01 00:00:08 [loggers.py:87] {STATS}"],
        [datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)],
    )
    steps = run(lines, year=2030)[0]["engine_steps"]  # rec_ts comes before --year
    assert steps["ts"].to_list() == [datetime(2025, 12, 31, 23, 59, 58, tzinfo=UTC),
                                     datetime(2026, 1, 1, 0, 0, 8, tzinfo=UTC)]
    # the container's local time is already in the new year while the record (UTC) is not
    berlin = frame([f"INFO 01-01 00:30:00 [loggers.py:87] {STATS}"], [datetime(2025, 12, 31, 23, 30, tzinfo=UTC)])
    assert run(berlin, tz="Europe/Berlin")[0]["engine_steps"]["ts"][0] == datetime(2025, 12, 31, 23, 30, tzinfo=UTC)


def test_rec_ts_times_lines_without_a_header() -> None:
    texts = [
        f"(APIServer pid=1) INFO 05-07 20:50:03 [loggers.py:87] {STATS}",
        '(APIServer pid=1) INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        '(APIServer pid=1) INFO:     127.0.0.1:5001 - "GET /metrics HTTP/1.1" 200 OK',
    ]
    t0 = datetime(2026, 5, 7, 20, 50, 3, 500000, tzinfo=UTC)
    t1 = datetime(2026, 5, 7, 20, 50, 9, 250000, tzinfo=UTC)
    acc = run(frame(texts, [t0, t1, None]))[0]["access_log"]
    assert acc["ts"].to_list() == [t1, t1]  # a record without rec_ts carries the last time seen
    # without rec_ts nothing changes: the last header's time, the year from --year
    plain = run(frame(texts), year=2026)[0]
    assert plain["access_log"]["ts"].to_list() == [datetime(2026, 5, 7, 20, 50, 3, tzinfo=UTC)] * 2
    assert plain["engine_steps"]["ts"][0] == datetime(2026, 5, 7, 20, 50, 3, tzinfo=UTC)


def test_rec_ts_year_carries_to_chunks_without_it() -> None:
    texts = [f"INFO 03-01 10:00:0{i} [loggers.py:87] {STATS}" for i in range(4)]
    rec = [datetime(2024, 3, 1, 10, 0, 0, tzinfo=UTC), None, None, None]
    steps = run(frame(texts, rec), year=2030, chunk=1)[0]["engine_steps"]
    assert steps["ts"].dt.year().to_list() == [2024] * 4


# --- V0 prefix-cache line ------------------------------------------------------------------------------


def test_v0_prefix_cache_line_across_a_chunk_boundary() -> None:
    lines = frame(read_lines(CASES / "v0_prefix_cache_line.log"))
    whole, _, consumed = run(lines, year=2025)
    assert whole["engine_steps"]["kind"].to_list() == ["stats"]
    assert whole["engine_steps"]["cpu_prefix_hit_rate"][0] == pytest.approx(0.9)
    assert consumed == [2]
    split, errors, consumed = run(lines, year=2025, chunk=1)
    steps = split["engine_steps"]
    assert steps["kind"].to_list() == ["stats", "prefix_cache"]  # never a second `stats` row
    assert steps["prefix_hit_rate"].to_list() == [None, 0.0]
    assert steps["cpu_prefix_hit_rate"].to_list() == [None, pytest.approx(0.9)]
    assert steps["running"].to_list() == [1, None] and errors is None and consumed == []


def test_v0_prefix_line_far_from_a_stats_line_is_not_merged() -> None:
    texts = [
        "INFO 05-25 06:50:29 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "15.5 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV "
        "cache usage: 0.1%.",
        "INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 10.00%, CPU: 0.00%",
        "INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 20.00%, CPU: 0.00%",
        "INFO 05-25 06:51:29 [metrics.py:502] Prefix cache hit rate: GPU: 30.00%, CPU: 0.00%",
    ]
    steps = run(frame(texts), year=2025)[0]["engine_steps"]
    assert steps["kind"].to_list() == ["stats", "prefix_cache", "prefix_cache"]
    assert steps["prefix_hit_rate"].to_list() == pytest.approx([0.1, 0.2, 0.3])


# --- consumed lines ------------------------------------------------------------------------------------


def test_startup_lines_are_consumed() -> None:
    """`# cpu blocks: 1170, # CPU blocks: 0` (a CPU build: no block size, so no pool size) is a startup line
    folded into the start without a row of its own."""
    tables, _, consumed = run(frame(read_lines(CASES / "startup_v0.log")), year=2025)
    assert sorted(tables["engine_config"]["line"]) == [1, 2, 4]
    assert consumed == [3]


# --- real logs under prefixes --------------------------------------------------------------------------


def _without_provenance(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {k: v.sort("line", maintain_order=True) for k, v in tables.items()}


@needs_shared
@pytest.mark.parametrize("prefix", ["(RayWorkerWrapper pid=581, ip=10.225.128.18) ",
                                    "(EngineCore pid=925) (MyActor(index=2) pid=8272) ",
                                    "\x1b[36m(RayWorkerWrapper pid=581, ip=10.225.128.18)\x1b[0m "])
def test_real_log_under_ray_prefixes_gives_the_same_rows(prefix: str) -> None:
    texts = read_lines(DUMP)
    plain, plain_err, _ = run(frame(texts), year=2026)
    wrapped, wrapped_err, _ = run(frame([prefix + t for t in texts]), year=2026)
    assert plain.keys() == wrapped.keys()
    for name, df in _without_provenance(plain).items():
        assert wrapped[name].equals(df), name
    assert plain_err is None and wrapped_err is None


@needs_shared
def test_real_log_with_ray_dedup_reports_the_loss_once() -> None:
    texts = read_lines(DUMP)
    stats_at = [i for i, t in enumerate(texts) if "Avg prompt throughput" in t][:3]
    for i in stats_at:
        texts[i] += " [repeated 4x across cluster]"
    texts[stats_at[0]] += (  # Ray's one-time hint follows the first collapsed line
        " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
        "for more options.)"
    )
    tables, errors, _ = run(frame(texts), year=2026)
    assert errors is not None and errors.height == 1
    assert "at least 9 lines are lost" in errors["reason"][0] and "RAY_DEDUP_LOGS=0" in errors["reason"][0]
    assert errors["line"][0] == stats_at[0] + 1
    assert tables["engine_steps"].filter(pl.col("kind") == "stats").height == 392
    # in chunks: still one warning for the file (its count is a lower bound: what the first chunk showed)
    chunked, errors, _ = run(frame(texts), year=2026, chunk=200)
    assert errors is not None and errors.height == 1 and errors["line"][0] == stats_at[0] + 1
    assert chunked["engine_steps"].equals(tables["engine_steps"])


@needs_shared
def test_second_real_log_spec_decode_lines() -> None:
    text = SPARK.read_bytes().decode("utf-8", errors="replace")
    tables, errors, _ = run(frame(text.split("\n")[:-1]), year=2026)
    spec = tables["engine_steps"].filter(pl.col("kind") == "spec_decode")
    assert spec.height == len(re.findall(r"\] SpecDecoding metrics: Mean acceptance length", text)) == 64
    first = spec.row(0, named=True)  # checked by hand against the log
    assert first["ts"] == datetime(2026, 8, 1, 21, 24, 9, tzinfo=UTC)
    assert first["accept_len"] == pytest.approx(3.62)
    assert (first["spec_accepted_tokens"], first["spec_drafted_tokens"]) == (76, 435)
    assert first["spec_accept_rate"] == pytest.approx(0.175)
    assert len(first["spec_position_rates"]) == 15 and first["spec_position_rates"][:2] == pytest.approx([0.793, 0.552])
    assert spec["spec_position_rates"].list.len().unique().to_list() == [15]
    assert spec["spec_accepted_tokens"].sum() <= spec["spec_drafted_tokens"].sum()


@pytest.mark.parametrize("case", ["kserve", "dynamo", "parent_relog", "ray_prefixes", "ci_bracketed_utc"])
def test_layout_cases_are_chunk_invariant(case: str) -> None:
    spec = json.loads((CASES / f"{case}.expected.json").read_text())
    lines = frame(read_lines(CASES / f"{case}.log"))
    opts = spec["options"]
    whole = run(lines, year=opts.get("year"), tz=opts["tz"])[0]
    one = run(lines, year=opts.get("year"), tz=opts["tz"], chunk=1)[0]
    assert whole.keys() == one.keys()
    for name, df in whole.items():
        assert one[name].equals(df), name


@pytest.mark.parametrize("case", ["kserve", "dynamo", "parent_relog", "ray_prefixes", "ci_bracketed_utc"])
def test_prefixed_layouts_are_sniffed(case: str) -> None:
    head = (CASES / f"{case}.log").read_text()
    assert SRC.sniff(head, f"{case}.log") >= 0.8
    # without the strong markers (`[loggers.py:`, `Avg prompt throughput`, ...) the header alone decides
    first_vllm_line = next(t for t in head.splitlines() if re.search(r"(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d ", t))
    assert SRC.sniff(first_vllm_line.replace("loggers.py", "x.py").split("Engine 000:")[0], "x.log") >= 0.8


def test_lines_of_a_multi_line_message_are_consumed() -> None:
    """vLLM writes a message's newlines as `\\r\\n` plus the header again (V0 memory profiling block)."""
    head = "INFO 05-11 12:04:06 [worker.py:267] "
    texts = [
        f"{head}Memory profiling takes 0.51 seconds\r",
        f"{head}the current vLLM instance can use total_gpu_memory (23.55GiB) x gpu_memory_utilization (0.90) "
        "= 21.20GiB\r",
        f"{head}model weights take 14.99GiB; non_torch_memory takes 0.12GiB; PyTorch activation peak memory "
        "takes 1.23GiB; the rest of the memory reserved for KV Cache is 5.67GiB.",
        "INFO 05-11 12:04:07 [executor_base.py:117] Maximum concurrency for 32768 tokens per request: 4.57x\r",
        "INFO 05-11 12:04:08 [llm_engine.py:435] init engine (profile, create kv cache, warmup model) took 0.15 "
        "seconds\r",
    ]
    tables, _, consumed = run(frame(texts), year=2025)
    assert sorted(tables["engine_config"]["line"]) == [3, 4]
    assert consumed == [1, 2]  # line 5 (CRLF, another header) stays for the census


@needs_shared
def test_real_log_with_record_times_needs_no_year() -> None:
    """The dump as a wrapper would hand it over: each line with the time it was recorded (its header's time,
    carried to lines without one). Without --year and with a 1970 mtime, the rows are those of --year 2026."""
    texts = read_lines(DUMP)
    rec, last = [], None
    for t in texts:
        m = re.search(r"(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ", t)
        if m:
            last = datetime(2026, *map(int, m.groups()), tzinfo=UTC)
        rec.append(last)
    plain, _, _ = run(frame(texts), year=2026)
    wrapped, errors, _ = run(frame(texts, rec), chunk=300)
    assert errors is None and plain.keys() == wrapped.keys()
    for name, df in plain.items():
        assert wrapped[name].equals(df), name
