"""`attribution simulate`, in process: the files of a small run, laid out so the ingest names each log after its
pod; the same seed gives the same bytes; an earlier run's files are replaced; bad arguments give one line on
stderr and exit code 2."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attribution.cli import app, main
from attribution.ingest import default_deployment, ingest
from attribution.store import Store

SMALL = ["simulate", "--scenario", "sample", "--requests", "600", "--seed", "3"]


def files_of(root: Path) -> dict[str, bytes]:
    """Every file written, but the `.attributionignore` that keeps ground_truth.json out of an ingest."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".attributionignore"}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "out"
    res = CliRunner().invoke(app, [*SMALL, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, res


def test_writes_one_log_per_pod_and_engine_start(small):
    out, res = small
    truth = json.loads((out / "ground_truth.json").read_text())
    # The `sample` bundle: two vLLM pods before and after the upgrade, one SGLang pod, one gateway.
    assert set(files_of(out)) == {
        "vllm/before/qwen35-vllm-0/vllm.log.gz", "vllm/before/qwen35-vllm-1/vllm.log.gz",
        "vllm/after/qwen35-vllm-0/vllm.log.gz", "vllm/after/qwen35-vllm-1/vllm.log.gz",
        "sglang/agents/qwen35-sglang-0/sglang.log.gz", "gateway/litellm.jsonl.gz", "ground_truth.json",
        "prometheus/qwen35-vllm-0.json.gz", "prometheus/qwen35-vllm-1.json.gz",  # the vLLM pods' metrics
    }  # fmt: skip
    assert sorted(f["path"] for f in truth["files"]) == sorted(set(files_of(out)) - {"ground_truth.json"})
    for f in truth["files"]:
        with gzip.open(out / f["path"], "rt") as fh:
            lines = fh.read().splitlines()
        if f["format"] == "litellm":
            assert len(lines) == f["requests"] == truth["totals"]["requests"]
        elif f["format"] == "prometheus_api":  # one JSON document: a query_range matrix of the pod's series
            doc = json.loads("\n".join(lines))
            assert doc["data"]["resultType"] == "matrix" and f["engine"] == "vllm"
            assert {s["metric"]["pod"] for s in doc["data"]["result"]} == {f["deployment"]}
        else:
            assert default_deployment(out / f["path"]) == f["deployment"]
            first = {"vllm_log": "vLLM API server version", "sglang_log": "server_args=ServerArgs("}[f["format"]]
            assert first in lines[0]
            if f["format"] == "vllm_log":
                assert lines[0].endswith(f"version {f['engine_version']}")
                assert sum(" Added request chatcmpl-" in ln for ln in lines) == f["requests"]
            else:
                assert sum(" Finish: obj=" in ln for ln in lines) == f["requests"]
    assert "simulating sample-hybrid" in res.stderr and "writing the gateway log" in res.stderr
    assert f"{truth['totals']['requests']:,} requests from " in res.stderr
    assert res.stdout == ""  # stdout carries data only


def test_small_run_ingests_under_its_pod_names(small, tmp_path):
    out, _ = small
    truth = json.loads((out / "ground_truth.json").read_text())
    summary = ingest([str(out)], tmp_path / "store", year=truth["year"], tz="UTC")
    assert "ground_truth.json" not in {Path(f.path).name for f in summary.files}  # .attributionignore
    assert summary.errors == 0
    con = Store.open(tmp_path / "store").connect()
    got = con.execute("select deployment, engine, count(*) from joined_requests where matched = 'both' "
                      "group by 1, 2 order by 1").fetchall()
    want: dict[tuple[str, str], int] = {}
    for d in truth["deployments"]:
        want[(d["deployment"], d["engine"])] = want.get((d["deployment"], d["engine"]), 0) + d["requests"]
    assert got == [(dep, eng, n) for (dep, eng), n in sorted(want.items())]


def test_same_seed_same_bytes_other_seed_other_bytes(small, tmp_path):
    out, _ = small
    again = tmp_path / "again"
    assert CliRunner().invoke(app, [*SMALL, "--out", str(again)]).exit_code == 0
    assert files_of(again) == files_of(out)
    other = tmp_path / "other"
    assert CliRunner().invoke(app, [*SMALL[:-1], "4", "--out", str(other)]).exit_code == 0
    assert files_of(other)["gateway/litellm.jsonl.gz"] != files_of(out)["gateway/litellm.jsonl.gz"]


def test_a_new_run_replaces_only_what_the_last_one_wrote(tmp_path):
    out = tmp_path / "out"
    assert CliRunner().invoke(app, [*SMALL, "--out", str(out)]).exit_code == 0
    (out / "NOTES.md").write_text("mine")
    res = CliRunner().invoke(app, ["simulate", "--scenario", "sglang-hybrid-small", "--requests", "200",
                                   "--no-gzip", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert set(files_of(out)) == {"NOTES.md", "ground_truth.json", "gateway/litellm.jsonl",
                                  "sglang/small/pod-00/sglang.log"}


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, list[str]]:
    monkeypatch.setattr(sys, "argv", ["attribution", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    return exc.value.code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "error: --requests must be at least 1 (got 0)"),
        (["--days", "-1"], "error: --days must be positive (got -1.0)"),
        (["--days", "0"], "error: --days must be positive (got 0.0)"),
    ],
)
def test_bad_arguments_one_line_exit_2(monkeypatch, capsys, tmp_path, args, message):
    code, err = run_main(monkeypatch, capsys, "simulate", "--scenario", "sample", "--out", str(tmp_path / "o"), *args)
    assert (code, err) == (2, [message])
    assert not (tmp_path / "o").exists()


def test_out_is_a_file_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    Path("taken").write_text("")
    code, err = run_main(monkeypatch, capsys, "simulate", "--scenario", "mmc", "--out", "taken")
    assert (code, err) == (2, ["error: --out taken: is a file, not a directory"])


def test_unknown_scenario_is_an_input_error(monkeypatch, capsys, tmp_path):
    code, err = run_main(monkeypatch, capsys, "simulate", "--scenario", "nope", "--out", str(tmp_path / "o"))
    assert code == 3
    text = " ".join(err)
    assert text.startswith("error: no scenario named 'nope' (known: ") and "sample" in text
