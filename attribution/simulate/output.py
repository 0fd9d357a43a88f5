"""Writing a simulation to a directory as a deployment would keep it: one engine log per pod and engine start,
`<engine>/<label>/<deployment>/<engine>.log.gz` (the ingest names a generic `vllm.log` after its directory, so
the pod), one LiteLLM gateway log for every request, `gateway/litellm.jsonl.gz`, and `ground_truth.json`.

A scenario file may instead be a bundle (`[[members]]`, e.g. `scenarios/sample.toml`): several scenarios run
side by side behind one gateway, each naming its pods with a `deployment` pattern such as `"qwen-{pod}"`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from attribution.errors import UsageError
from attribution.simulate.model import SCENARIO_DIR, Scenario, find_file, load_scenario
from attribution.simulate.result import SimResult
from attribution.simulate.run import simulate
from attribution.simulate.truth import ground_truth
from attribution.simulate.writers import write_litellm, write_sglang_logs, write_vllm_logs
from attribution.simulate.writers.litellm import priced
from attribution.simulate.writers.prometheus import write_prometheus

TRUTH_FILE = "ground_truth.json"
IGNORE_FILE = ".attributionignore"  # attribution.discovery.IGNORE_FILE
WRITERS = {"vllm": (write_vllm_logs, "vllm_log"), "sglang": (write_sglang_logs, "sglang_log")}
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # names that become directory names

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Member:
    scenario: Scenario
    deployment: str = "pod-{pod:02d}"  # the simulator's own pod names


@dataclass(frozen=True)
class Plan:
    name: str
    members: tuple[Member, ...]
    prometheus_step_s: int | None = None  # also write vLLM pods' Prometheus range-query exports at this step


def load_plan(scenario: str | Path) -> Plan:
    """A scenario (name or .toml path) as a one-member plan, or a bundle file's members."""
    path = find_file(str(scenario), SCENARIO_DIR, "scenario", None)
    doc = tomllib.loads(path.read_text())
    step = doc.get("prometheus_step_s")
    if step is not None and not (isinstance(step, int) and step >= 1):
        raise UsageError(f"{path}: prometheus_step_s must be a whole number of seconds >= 1 (got {step!r})")
    if "members" not in doc:
        return Plan(doc.get("name", path.stem), (Member(load_scenario(path)),), step)
    members = []
    for i, m in enumerate(doc["members"]):
        if "scenario" not in m or "deployment" not in m:
            raise UsageError(f"{path}: member {i + 1} needs `scenario` and `deployment` (e.g. \"web-{{pod}}\")")
        members.append(Member(load_scenario(find_file(m["scenario"], SCENARIO_DIR, "scenario", path.parent)),
                              m["deployment"]))
    return Plan(doc.get("name", path.stem), tuple(members), step)


def _names(member: Member) -> dict[str, str]:
    try:
        names = {f"pod-{i:02d}": member.deployment.format(pod=i) for i in range(member.scenario.pods)}
    except (KeyError, IndexError, ValueError):
        raise UsageError(f"deployment pattern {member.deployment!r}: use {{pod}} for the pod index") from None
    if len(set(names.values())) < len(names):
        raise UsageError(f"deployment pattern {member.deployment!r} gives several pods one name: add {{pod}}")
    return names


def _rename(res: SimResult, names: dict[str, str]) -> SimResult:
    ren = pl.col("deployment").replace_strict(names)
    return replace(res, requests=res.requests.with_columns(ren), stats=res.stats.with_columns(ren),
                   pods=res.pods.with_columns(ren), steps=None if res.steps is None else res.steps.with_columns(ren))


def run_plan(plan: Plan, *, requests: int | None = None, days: float | None = None, seed: int | None = None,
             workers: int | None = None, progress: Progress | None = None) -> list[SimResult]:
    """Simulate every member. `requests` is split over the members in proportion to their traffic; `days`
    applies to each; `seed` S gives member i the seed S + i (members must not share request ids)."""
    if requests is not None and requests < 1:
        raise UsageError(f"--requests must be at least 1 (got {requests})")
    if days is not None and not days > 0:
        raise UsageError(f"--days must be positive (got {days})")
    say = progress or (lambda _m: None)
    expected = [m.scenario.requests_per_day * m.scenario.days for m in plan.members]
    results: list[SimResult] = []
    seen: set[str] = set()
    for i, m in enumerate(plan.members):
        scn, names = m.scenario, _names(m)
        if seen & set(names.values()):
            raise UsageError(f"plan {plan.name}: deployment names {sorted(seen & set(names.values()))} repeat")
        seen |= set(names.values())
        n = None if requests is None else max(1, round(requests * expected[i] / sum(expected)))
        sglang = any(p.profile.engine == "sglang" for p in scn.phases)
        t0 = time.perf_counter()
        say(f"simulating {scn.name}: {scn.pods} pod(s) x {len(scn.phases)} phase(s) ...")
        res = simulate(scn, requests=n, days=days, seed=None if seed is None else seed + i, workers=workers,
                       steps=sglang)  # only the SGLang writer needs per-step rows
        say(f"  {res.requests.height:,} requests in {time.perf_counter() - t0:.1f} s")
        results.append(_rename(res, names))
    ids = pl.concat([r.requests.select("request_id") for r in results])["request_id"]
    if ids.is_duplicated().any():
        raise UsageError(f"plan {plan.name}: members produced the same request ids; give them different seeds")
    return results


def _only(res: SimResult, engine: str) -> SimResult | None:
    pods = res.pods.filter(pl.col("engine") == engine)
    if pods.height == 0:
        return None
    keys = pods.select("deployment", "label")
    return replace(
        res, pods=pods, requests=res.requests.join(keys, on=["deployment", "label"], how="semi"),
        stats=res.stats.join(keys, on=["deployment", "label"], how="semi"),
        steps=None if res.steps is None else res.steps.join(keys, on=["deployment", "label"], how="semi"),
    )  # fmt: skip


def _clear_previous(out: Path) -> None:
    """Remove the files an earlier run listed in out/ground_truth.json (and nothing else), so a smaller or
    different run leaves no stale logs behind."""
    try:
        old = json.loads((out / TRUTH_FILE).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    root = out.resolve()
    for f in old:
        p = (out / str(f.get("path", ""))).resolve()
        if p.is_file() and root in p.parents:
            p.unlink()
            for d in p.parents:
                if d == root or any(d.iterdir()):
                    break
                d.rmdir()


def write_outputs(results: list[SimResult], out_dir: str | Path, *, compress: bool = True,
                  progress: Progress | None = None, meta: dict[str, Any] | None = None,
                  prometheus_step_s: int | None = None) -> dict[str, Any]:
    """Write the engine logs, the gateway log, the vLLM pods' Prometheus exports (`prometheus/<pod>.json`,
    when `prometheus_step_s` is set) and ground_truth.json; return the ground truth (whose `files` lists what
    was written, relative to `out_dir`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory")
    say = progress or (lambda _m: None)
    gz = ".gz" if compress else ""
    out.mkdir(parents=True, exist_ok=True)
    _clear_previous(out)
    tmp = out / ".simulate-tmp"  # hidden: never read by an ingest of `out`, even if a run is interrupted
    files = []
    try:
        for res in results:
            for engine, (writer, fmt) in WRITERS.items():
                sub = _only(res, engine)
                if sub is None:
                    continue
                say(f"writing {sub.pods.height} {engine} log(s) of {res.scenario.name} ...")
                writer(sub, tmp, gz=compress)
                for pod in sub.pods.to_dicts():
                    for name in (pod["deployment"], pod["label"]):
                        if not _SAFE.match(name):
                            raise UsageError(f"{name!r} cannot name a directory: use letters, digits, . _ -")
                    rel = Path(engine, pod["label"], pod["deployment"], f"{engine}.log{gz}")
                    (out / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(tmp / f"{pod['deployment']}-{pod['label']}.log{gz}", out / rel)
                    files.append({"path": rel.as_posix(), "format": fmt, "deployment": pod["deployment"],
                                  "label": pod["label"], "engine": engine, "engine_version": pod["version"],
                                  "requests": pod["requests"]})
        if prometheus_step_s:
            say(f"writing the vLLM pods' Prometheus exports ({prometheus_step_s} s step) ...")
            for res in results:
                for path in write_prometheus(res, out / "prometheus", prometheus_step_s, gz=compress):
                    files.append({"path": path.relative_to(out).as_posix(), "format": "prometheus_api",
                                  "deployment": path.name.split(".json")[0], "label": None, "engine": "vllm",
                                  "engine_version": None, "requests": None})
        unknown = {e for r in results for e in r.pods["engine"].unique()} - set(WRITERS)
        if unknown:
            raise UsageError(f"no log writer for engine(s) {sorted(unknown)} (known: vllm, sglang)")
        say("writing the gateway log ...")
        # each scenario's own price, before the requests of several scenarios share one gateway log
        every = replace(results[0], requests=pl.concat([priced(r).requests for r in results],
                                                       how="vertical_relaxed"))
        rel = Path("gateway", f"litellm.jsonl{gz}")
        write_litellm(every, out / rel)
        files.append({"path": rel.as_posix(), "format": "litellm", "deployment": None, "label": None,
                      "engine": None, "engine_version": None, "requests": every.requests.height})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in files:
        f["bytes"] = (out / f["path"]).stat().st_size
    start = min(r.scenario.start for r in results)
    truth = {**(meta or {}), "year": start.year, "tz": "UTC", "files": files, **ground_truth(results)}
    (out / TRUTH_FILE).write_text(json.dumps(truth, indent=1) + "\n")
    # `attribution ingest OUT` reads the logs only: the ground truth and notes beside them are not inputs.
    (out / IGNORE_FILE).write_text(f"# not logs: passed over by `attribution ingest`\n{TRUTH_FILE}\nREADME.md\n")
    return truth


def simulate_to_dir(scenario: str | Path, out_dir: str | Path, *, requests: int | None = None,
                    days: float | None = None, seed: int | None = None, compress: bool = True,
                    workers: int | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Load `scenario` (a scenario or a bundle), simulate it and write it to `out_dir` (see write_outputs)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory")
    plan = load_plan(scenario)
    results = run_plan(plan, requests=requests, days=days, seed=seed, workers=workers, progress=progress)
    meta = {"scenario": plan.name, "seed": seed, "requests_option": requests, "days_option": days,
            "members": [{"scenario": r.scenario.name, "seed": r.scenario.seed, "deployment": m.deployment,
                         "start": r.scenario.start.isoformat().replace("+00:00", "Z"), "days": r.scenario.days}
                        for m, r in zip(plan.members, results, strict=True)]}
    return write_outputs(results, out, compress=compress, progress=progress, meta=meta,
                         prometheus_step_s=plan.prometheus_step_s)
