"""Fuzz the parsers with mutated real lines (issue 16): every parser gets at least `--cases` mutated lines per
run, built from its tests/cases files and the verbatim (📎) examples of ../shared/formats/engine-logs.md:
digits changed, lines truncated, bytes and NULs inserted, huge numbers, non-ASCII digits, fields swapped,
month 13, year 0000, DST-gap times. Each batch of cases is ingested (through the ingest's own path, the
format forced) into one store per parser; a case that makes the ingest raise or a file `failed` is a crash
(found by bisecting the batch). Afterwards every reader (status, the analyses, thresholds, memsplit, the
report) runs on each store: an exception there is a reader failure. Prints the figures.

    PYTHONPATH=. python bench/reliability/fuzz.py --cases 10000 [--seed 1] [--parsers vllm_log,sglang_log]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "cases"
FORMATS = REPO.parent / "shared" / "formats" / "engine-logs.md"
BATCH = 2000  # cases per ingested file
HEADED = {"azure_trace", "burstgpt_trace"}  # CSV: the header line stays first and intact
UNICODE_DIGITS = "\u0661\u0662\u0663\u06f4\u0967\u09e8\uff13\U0001d7d8"  # Arabic-Indic, Devanagari, fullwidth...


def seeds(parser: str) -> list[str]:
    """Lines of the parser's case files (CSV headers excluded) and, for the engine logs, the verbatim examples."""
    out: list[str] = []
    for f in sorted((CASES / parser).glob("*")):
        if f.name.endswith((".expected.json", ".md")) or f.suffix == ".json":
            continue
        lines = f.read_text(errors="replace").splitlines()
        out += lines[1:] if parser in HEADED else lines
    if parser in ("vllm_log", "sglang_log") and FORMATS.exists():
        text = FORMATS.read_text()
        for block in re.findall(r"📎[^\n]*\n```[^\n]*\n(.*?)```", text, flags=re.S):
            for ln in block.splitlines():
                ln = re.sub(r"\s{3,}\([^)]*\)\s*$", "", ln)  # the `(vllm#1234, 0.8.x)` annotations
                if ln.strip() and ("[" in ln[:40]) == (parser == "sglang_log" or "INFO" in ln[:60] or "(" in ln[:5]):
                    out.append(ln)
    return [s for s in out if s.strip()]


def header(parser: str) -> str | None:
    if parser not in HEADED:
        return None
    f = next(p for p in sorted((CASES / parser).glob("*.csv")))
    return f.read_text().splitlines()[0]


def _digits(rng: random.Random, s: str) -> str:
    idx = [i for i, c in enumerate(s) if c.isdigit()]
    if not idx:
        return s
    i = rng.choice(idx)
    return s[:i] + str(rng.randrange(10)) + s[i + 1:]


def _number(rng: random.Random, s: str, repl: str) -> str:
    spans = [m.span() for m in re.finditer(r"\d+(?:\.\d+)?", s)]
    if not spans:
        return s + repl
    a, b = rng.choice(spans)
    return s[:a] + repl + s[b:]


def _swap(rng: random.Random, s: str) -> str:
    parts = s.split(", ")
    if len(parts) < 3:
        return s[::-1]
    i, j = rng.sample(range(len(parts)), 2)
    parts[i], parts[j] = parts[j], parts[i]
    return ", ".join(parts)


MUTATIONS = {
    "digit": _digits,
    "truncate": lambda r, s: s[: r.randrange(max(len(s), 1))],
    "insert_bytes": lambda r, s: (lambda i: s[:i] + "".join(chr(r.randrange(1, 0x2FF)) for _ in range(r.randrange(1, 6)))
                                  + s[i:])(r.randrange(len(s) + 1)),
    "nul": lambda r, s: (lambda i: s[:i] + "\x00" * r.randrange(1, 4) + s[i:])(r.randrange(len(s) + 1)),
    "huge_number": lambda r, s: _number(r, s, r.choice(["99999999999999999999", "9223372036854775807",
                                                        "1e308", "-1", "1.5", "NaN", "inf", "0" * 40])),
    "unicode_digit": lambda r, s: _number(r, s, "".join(r.choice(UNICODE_DIGITS) for _ in range(r.randrange(1, 4)))),
    "swap_fields": _swap,
    "month_13": lambda r, s: re.sub(r"\b(\d\d)-(\d\d)( \d\d:\d\d)", r"13-\2\3", s, count=1) if r.random() < .5
    else re.sub(r"(\d{4})-(\d\d)-(\d\d)", r"\1-13-\3", s, count=1),
    "year_0000": lambda r, s: re.sub(r"\b(19|20)\d\d-", "0000-", s, count=1),
    "dst_gap": lambda r, s: re.sub(r"\b\d\d-\d\d \d\d:", "03-29 02:", re.sub(r"\b\d{4}-\d\d-\d\d \d\d:",
                                                                          "2026-03-29 02:", s, count=1), count=1),
    "epoch_ms": lambda r, s: re.sub(r"(\"(?:startTime|endTime|completionStartTime|timestamp)\":\s*)(\d{10})",
                                    r"\g<1>\g<2>000", s),
    "double": lambda r, s: s + s,
    "empty_quote": lambda r, s: s.replace("'", "", 1).replace('"', "", 1),
}


def mutate(rng: random.Random, seed_lines: list[str]) -> tuple[str, str]:
    line = rng.choice(seed_lines)
    kinds = rng.sample(sorted(MUTATIONS), rng.choice([1, 1, 2, 3]))
    for k in kinds:
        line = MUTATIONS[k](rng, line)
    # one physical line: a mutation may not add a line (the case would be two)
    return "+".join(kinds), line.replace("\n", " ").replace("\r", "\\r")


def _parse(path: Path, parser: str, tz: str) -> str | None:
    """None when the file parses, else the failure (an exception of the ingest's own path)."""
    from attribution.ingest import parse_path

    try:
        parse_path(path, parser, year=2026, tz=tz, options={"start": "2026-01-01T00:00:00Z"})
    except Exception as exc:  # a crash is what is being counted
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return None


def _bisect(lines: list[str], parser: str, hdr: str | None, tz: str, tmp: Path) -> list[tuple[str, str]]:
    """The single lines of a failing batch that fail alone."""
    if len(lines) == 1:
        f = tmp / "one.txt"
        f.write_text(((hdr + "\n") if hdr else "") + lines[0] + "\n", errors="surrogateescape")
        err = _parse(f, parser, tz)
        return [(lines[0], err)] if err else []
    f = tmp / "half.txt"
    f.write_text(((hdr + "\n") if hdr else "") + "\n".join(lines) + "\n")
    if _parse(f, parser, tz) is None:
        return []
    mid = len(lines) // 2
    return _bisect(lines[:mid], parser, hdr, tz, tmp) + _bisect(lines[mid:], parser, hdr, tz, tmp)


def fuzz_parser(parser: str, cases: int, rng: random.Random, work: Path, tz: str = "Europe/Berlin"
                ) -> dict[str, object]:
    """Ingest `cases` mutated lines of `parser` in batches into one store; returns the figures."""
    from attribution.ingest import ingest

    seed_lines = seeds(parser)
    hdr = header(parser)
    store = work / f"store-{parser}"
    crashes: list[tuple[str, str]] = []
    failed_files = 0
    done = 0
    n = 0
    while done < cases:
        size = min(BATCH, cases - done)
        batch = [mutate(rng, seed_lines)[1] for _ in range(size)]
        f = work / parser / f"batch{n:03d}.log"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(((hdr + "\n") if hdr else "") + "\n".join(batch) + "\n")
        try:
            summary = ingest([str(f)], store, fmt=parser, year=2026, tz=tz,
                             options={"start": "2026-01-01T00:00:00Z"}, jobs=1)
            bad = [r for r in summary.files if r.status == "failed"]
        except Exception as exc:
            bad = [exc]
        if bad:
            failed_files += 1
            crashes += _bisect(batch, parser, hdr, tz, work) or [("<batch>", str(bad[0]))]
        done += size
        n += 1
    return {"parser": parser, "cases": done, "seeds": len(seed_lines), "crashes": len(crashes),
            "failed_files": failed_files, "crash_samples": crashes[:5], "store": store}


def read_everything(store: Path, out_dir: Path) -> list[str]:
    """Every reader on a store; the failures (an exception that is not a documented usage answer)."""
    from attribution.analyses import analyze, capacity, concurrency, latency, lengths, select
    from attribution.config import load_settings
    from attribution.errors import InputError, UsageError
    from attribution.memsplit import memsplit
    from attribution.report import assemble, run_analyses, write
    from attribution.status import store_status
    from attribution.store import Store
    from attribution.thresholds import thresholds

    failures = []
    st = Store.open(store)

    def attempt(name, fn):
        try:
            fn()
        except UsageError:  # "no engine start", "needs requests": a documented answer (exit 2), not a failure
            pass
        except InputError as exc:  # "the store holds no requests: nothing to report" (exit 3) is an answer too
            if "holds no requests" not in str(exc):
                failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}\n{traceback.format_exc(limit=-3)}")

    attempt("status", lambda: store_status(st))
    con = st.connect()

    def analyses():
        sel = select(con, since="7d")
        for a in (lengths, concurrency, latency, capacity, thresholds):
            attempt(a.__name__, lambda a=a: a(sel))
        attempt("analyze", lambda: analyze(con, since="7d"))

    attempt("select", analyses)
    attempt("memsplit", lambda: memsplit(con))
    cfg = out_dir / "attribution.toml"
    cfg.write_text("")
    attempt("report", lambda: write(assemble(run_analyses(st, load_settings({}, config=cfg, env={}), since="30d"),
                                             st), out_dir=out_dir))
    return failures


PARSERS = ["vllm_log", "sglang_log", "litellm", "access_log", "otel", "mooncake_trace", "azure_trace",
           "burstgpt_trace", "sglang_metrics", "sglang_bench", "vllm_bench"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10000, help="mutated lines per parser (default 10000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--parsers", default=",".join(PARSERS))
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    t0 = time.time()
    load0 = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"] * 3
    total_crashes = total_reader = total_cases = 0
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        work = Path(tmp)
        for parser in args.parsers.split(","):
            t = time.time()
            r = fuzz_parser(parser, args.cases, rng, work)
            reader_failures = read_everything(r["store"], work)
            total_crashes += r["crashes"]
            total_reader += len(reader_failures)
            total_cases += r["cases"]
            print(f"{parser:15s} cases {r['cases']:6d}  seeds {r['seeds']:4d}  crashes {r['crashes']:3d}  "
                  f"reader failures {len(reader_failures)}  {time.time() - t:6.1f} s", flush=True)
            for line, err in r["crash_samples"]:
                print(f"    crash: {err}\n      line: {line[:200]!r}")
            for f in reader_failures[:3]:
                print(f"    reader: {f}")
    load1 = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"] * 3
    print(f"total: {total_cases} cases over {len(args.parsers.split(','))} parsers, {total_crashes} crashes, "
          f"{total_reader} reader failures, {time.time() - t0:.0f} s; load average {' '.join(load0)} before, "
          f"{' '.join(load1)} after; {os.cpu_count()} CPUs")
    return 1 if total_crashes or total_reader else 0


if __name__ == "__main__":
    sys.exit(main())
