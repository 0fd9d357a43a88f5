"""Settings precedence, checked one layer at a time: a flag beats the environment, the environment beats the
config file, the file beats the default; attribution.toml beats pyproject.toml's [tool.attribution] in one
directory, the nearest directory wins, $ATTRIBUTION_CONFIG names a file outright; paths in a file are relative
to it; bad files and values fail with a message naming them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from attribution.cli import app
from attribution.config import Settings, find_config, load_settings, read_config, workload_map
from attribution.errors import UsageError

NO_ENV: dict[str, str] = {}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_any_file(tmp_path):
    s = load_settings(env=NO_ENV, cwd=tmp_path)
    assert s == Settings()
    assert s.config_file is None
    assert set(s.sources.values()) == {"default"}
    assert (s.window, s.by, s.resamples, s.whatif, s.gpu_hour_cost) == ("7d", "workload", 200, False, None)


def test_each_layer_beats_the_next(tmp_path):
    write(tmp_path / "attribution.toml", 'gpu_hour_cost = 1.5\nslo = ["ttft=0.3"]\nwindow = "14d"\nresamples = 50\n')
    env = {"ATTRIBUTION_GPU_HOUR_COST": "2.25", "ATTRIBUTION_SLO": "ttft=0.4, tpot=40ms"}
    s = load_settings({"gpu_hour_cost": 3.0, "slo": None}, env=env, cwd=tmp_path)
    assert s.gpu_hour_cost == 3.0 and s.sources["gpu_hour_cost"] == "flag"
    assert s.slo == ("ttft=0.4", "tpot=40ms") and s.sources["slo"] == "env ATTRIBUTION_SLO"
    assert s.window == "14d" and s.sources["window"] == f"file {tmp_path / 'attribution.toml'}"
    assert s.resamples == 50
    assert s.by == "workload" and s.sources["by"] == "default"
    # without the flag the environment wins; without both, the file
    assert load_settings(env=env, cwd=tmp_path).gpu_hour_cost == 2.25
    assert load_settings(env=NO_ENV, cwd=tmp_path).gpu_hour_cost == 1.5


def test_attribution_toml_beats_pyproject_and_the_nearest_directory_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.attribution]\ngpu_hour_cost = 1.0\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep, NO_ENV) == tmp_path / "pyproject.toml"
    assert load_settings(env=NO_ENV, cwd=deep).gpu_hour_cost == 1.0
    write(tmp_path / "attribution.toml", "gpu_hour_cost = 2.0\n")
    assert load_settings(env=NO_ENV, cwd=deep).gpu_hour_cost == 2.0
    # a pyproject.toml without [tool.attribution] nearer to the working directory is passed over
    write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "y"\n')
    assert find_config(deep, NO_ENV) == tmp_path / "attribution.toml"
    write(tmp_path / "a" / "attribution.toml", "gpu_hour_cost = 4.0\n")
    assert load_settings(env=NO_ENV, cwd=deep).gpu_hour_cost == 4.0


def test_environment_names_the_file_and_an_explicit_file_beats_it(tmp_path):
    named = write(tmp_path / "elsewhere" / "team.toml", "gpu_hour_cost = 7.0\n")
    write(tmp_path / "attribution.toml", "gpu_hour_cost = 1.0\n")
    env = {"ATTRIBUTION_CONFIG": str(named)}
    assert load_settings(env=env, cwd=tmp_path).gpu_hour_cost == 7.0
    other = write(tmp_path / "other.toml", "gpu_hour_cost = 8.0\n")
    assert load_settings(config=other, env=env, cwd=tmp_path).gpu_hour_cost == 8.0


def test_paths_in_a_file_are_relative_to_it_and_preset_names_stay(tmp_path):
    cfg = write(tmp_path / "conf" / "attribution.toml",
                'model = "models/config.json"\nworkloads = "names.toml"\ncatalogue = ["extra.toml"]\n'
                'store = "../store"\n')
    s = load_settings(config=cfg, env=NO_ENV)
    assert s.model == str((tmp_path / "conf" / "models" / "config.json").resolve())
    assert s.workloads == str((tmp_path / "conf" / "names.toml").resolve())
    assert s.catalogue == (str((tmp_path / "conf" / "extra.toml").resolve()),)
    assert s.store == str((tmp_path / "store").resolve())
    write(cfg, 'model = "qwen3.5-35b-a3b"\n')
    assert load_settings(config=cfg, env=NO_ENV).model == "qwen3.5-35b-a3b"


def test_slo_as_a_table_a_list_or_a_string(tmp_path):
    for text in ('slo = ["ttft=0.5", "tpot=50ms"]\n', 'slo = "ttft=0.5 tpot=50ms"\n'):
        cfg = write(tmp_path / "attribution.toml", text)
        assert load_settings(config=cfg, env=NO_ENV).slo == ("ttft=0.5", "tpot=50ms")


def test_workload_names_inline_or_from_a_file_and_the_environment_file_wins(tmp_path):
    cfg = write(tmp_path / "attribution.toml", '[workloads]\n"key-a" = "search"\n"3f2a" = "etl"\n')
    s = load_settings(config=cfg, env=NO_ENV)
    assert workload_map(s, env=NO_ENV).rows() == [("key-a", "search"), ("3f2a", "etl")]
    names = write(tmp_path / "names.toml", '[workloads]\n"key-b" = "chat"\n')
    s = load_settings(config=write(cfg, f'workloads = "{names}"\n'), env=NO_ENV)
    assert workload_map(s, env=NO_ENV).rows() == [("key-b", "chat")]
    # $ATTRIBUTION_WORKLOADS is read by the store's views: the settings add nothing on top
    assert workload_map(s, env={"ATTRIBUTION_WORKLOADS": str(names)}) is None
    assert workload_map(Settings(), env=NO_ENV) is None


@pytest.mark.parametrize(("text", "needle"), [
    ("gpu_hour_cost = -1\n", "gpu_hour_cost"),
    ("resamples = 2.5\n", "resamples"),
    ("whatif = \"maybe\"\n", "whatif"),
    ("gpu_hour_cost = \"two\"\n", "gpu_hour_cost"),
    ("[workloads]\nkey = 3\n", "workloads"),
])
def test_bad_values_name_the_file_and_the_key(tmp_path, text, needle):
    cfg = write(tmp_path / "attribution.toml", text)
    with pytest.raises(UsageError, match=needle) as exc:
        load_settings(config=cfg, env=NO_ENV)
    assert str(cfg) in str(exc.value)


def test_unknown_keys_and_broken_files_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="unknown setting gpu_cost"):
        read_config(write(tmp_path / "files" / "attribution.toml", "gpu_cost = 2\n"))
    with pytest.raises(UsageError, match="not a readable TOML"):
        read_config(write(tmp_path / "broken.toml", "gpu_hour_cost = \n"))
    with pytest.raises(UsageError, match="no such config file"):
        load_settings(config=tmp_path / "missing.toml", env=NO_ENV)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="ATTRIBUTION_RESAMPLES"):
        load_settings(env={"ATTRIBUTION_RESAMPLES": "lots"}, cwd=tmp_path / "empty")


def test_the_report_command_reports_a_bad_config_as_a_usage_error(tmp_path):
    cfg = write(tmp_path / "attribution.toml", "gpu_cost = 2\n")
    res = CliRunner().invoke(app, ["report", "--config", str(cfg), "--out", str(tmp_path / "r.json")])
    assert isinstance(res.exception, UsageError) and res.exception.exit_code == 2
    assert not (tmp_path / "r.json").exists()
