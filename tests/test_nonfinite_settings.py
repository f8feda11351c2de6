"""NaN and ±infinity are refused in every float setting, however it arrives — one rule
(tasks/config_checks.finite_problem), one line naming the flag or field, exit 2:

- every float-typed option of every `klear` command, found by walking the click command tree (a flag added
  later is covered without editing this test), refused as it is parsed, before the command looks at anything
  else (so `klear rl --dry-run --gpu-memory nan`, a flag no config field backs, no longer plans memory for a
  NaN-sized GPU and ends in a KV-cache refusal with exit 1);
- every float field of every config a flow takes (a deployment's parameters, a pipeline --config file, the
  nested configs), made directly or validated by pydantic as a deployment's parameters are.

The CLI cases run `flows.cli.main()` in this process (a parse, no subprocess); a few run the real command."""
import dataclasses
import math
import os
import signal
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from tasks.config_checks import ConfigError, finite_problem

ROOT = Path(__file__).resolve().parents[1]
NON_FINITE = ["nan", "inf", "-inf"]


# -- the rule ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, float("-nan")])
def test_the_rule_refuses_nan_and_infinities(value):
    assert finite_problem(value) == f"must be a finite number (got {value!r})"


@pytest.mark.parametrize("value", [0.0, -1.5, 1e308, 5e-324, 3, 0, None, True, "nan"])
def test_the_rule_leaves_finite_numbers_and_other_types_to_the_range_checks(value):
    assert finite_problem(value) is None


# -- every float flag of every command -----------------------------------------------------------------------

def _is_float_option(param) -> bool:
    """A float-typed option: click's FloatParamType/FloatRange (click-based typer) or, in typer ≥ 0.29 (its own
    click, no `type` attribute), an annotation of float (`float | None` is reported as float)."""
    kind = getattr(param, "type", None)
    if kind is not None and type(kind).__name__ in ("FloatParamType", "FloatRange"):
        return True
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is float or float in typing.get_args(annotation)


def float_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, flag) of every float-typed option of every `klear` command."""
    import typer.main

    from flows.cli import app

    def walk(command, path):
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                yield from walk(sub, (*path, name))
            return
        for param in command.params:
            if param.param_type_name == "option" and _is_float_option(param):
                yield path, max(param.opts, key=len)

    return sorted(walk(typer.main.get_command(app), ()))


FLOAT_OPTIONS = float_options()


def test_the_enumeration_finds_the_float_flags():
    """A guard on the walk itself: it must see the flags the fault sweep used (an empty list passes nothing)."""
    found = {(" ".join(path), flag) for path, flag in FLOAT_OPTIONS}
    for expected in [("rl", "--gpu-memory"), ("rl", "--eps-low"), ("rl", "--lr"), ("rl", "--temperature"),
                     ("rl", "--top-p"), ("rl", "--dual-clip"), ("rl", "--reward-correct"), ("eval", "--temperature"),
                     ("sft", "--lr"), ("curate", "--max-survival"), ("pipeline", "--scale")]:
        assert expected in found, (expected, sorted(found))


@pytest.fixture
def klear_main(monkeypatch, capsys, tmp_path):
    """`klear ARGS` through flows.cli.main() in this process: (exit code, stderr). The process's environment,
    Ctrl-C handler and help mode are restored after; Prefect is never reached (the refusal must come first)."""
    import flows.cli as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KLEAR_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(cli, "note_interrupts", lambda: None)  # this process's Ctrl-C stays pytest's
    monkeypatch.setattr(cli.app, "rich_markup_mode", cli.app.rich_markup_mode)
    for name, module in list(sys.modules.items()):
        if name.startswith("flows.cli") and hasattr(module, "quiet_prefect_defaults"):
            monkeypatch.setattr(module, "quiet_prefect_defaults", _prefect_reached)
    saved_env, saved_sigint = dict(os.environ), signal.getsignal(signal.SIGINT)

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["klear", *args])
        with pytest.raises(SystemExit) as ended:
            cli.main()
        return ended.value.code, capsys.readouterr().err

    yield run
    os.environ.clear()
    os.environ.update(saved_env)
    signal.signal(signal.SIGINT, saved_sigint)


def _prefect_reached():
    raise AssertionError("the command reached Prefect: a non-finite value was not refused first")


def assert_one_line_naming(code: int, err: str, flag: str, value: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err, (code, err[-3000:])
    assert len(lines) == 1 and lines[0].startswith("klear: error: "), err[-3000:]
    assert f" {flag} " in lines[0] or f"({flag})" in lines[0], (flag, lines[0])
    assert f"must be a finite number (got {float(value)!r})" in lines[0], lines[0]




@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("path, flag", FLOAT_OPTIONS, ids=[f"{' '.join(p)} {f}" for p, f in FLOAT_OPTIONS])
def test_every_float_flag_refuses_a_non_finite_value_in_one_line(klear_main, path, flag, value):
    """The flag alone: no other option is given, so the refusal must come before the command's own checks
    (a missing --model) and name the float flag."""
    assert_one_line_naming(*klear_main(*path, flag, value), flag, value)


@pytest.mark.parametrize("value", NON_FINITE)
def test_a_non_finite_flag_wins_over_other_arguments(klear_main, value):
    code, err = klear_main("rl", "--dry-run", "--model", "qwen3-8b", "--eps-high", "0.3", "--gpu-memory", value)
    assert_one_line_naming(code, err, "--gpu-memory", value)
    code, err = klear_main("rl", "--model", "nowhere", "--data", "nowhere.jsonl", "--out", "o", f"--top-p={value}")
    assert_one_line_naming(code, err, "--top-p", value)


def test_finite_float_flags_still_reach_their_range_checks(klear_main):
    code, err = klear_main("rl", "--dry-run", "--model", "qwen3-8b", "--gpu-memory", "-1")
    assert code == 2 and err.strip() == "klear: error: --gpu-memory must be positive (got -1.0)", err
    code, err = klear_main("rl", "--dry-run", "--model", "qwen3-8b", "--eps-low", "1.5")
    assert code == 2 and err.strip() == "klear: error: eps_low (--eps-low) must be at most 1.0 (got 1.5)", err


def test_a_non_finite_setting_in_a_pipeline_config_file_is_one_line(klear_main, tmp_path):
    config = tmp_path / "pipeline.yaml"
    config.write_text("rl:\n  eps_low: .nan\n")
    code, err = klear_main("pipeline", "--config", str(config), "--store", str(tmp_path / "store"))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err[-3000:]
    assert lines[0] == f"klear: error: --config {config}: rl.eps_low must be a finite number (got nan)", lines


def _klear(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("value", NON_FINITE)
def test_the_reported_dry_run_refuses_a_nan_gpu_memory_as_the_real_cli(value):
    """The fault sweep's case, as a user runs it: exit 2 and one line, not a plan and a KV-cache refusal."""
    r = _klear("rl", "--dry-run", "--model", "qwen3-8b", "--gpu-memory", value)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert r.stderr.splitlines() == [f"klear: error: --gpu-memory must be a finite number (got {float(value)!r})"]


def test_a_nan_sampling_flag_of_the_real_cli_is_one_line():
    r = _klear("eval", "--model", "nowhere", "--benchmark", "b=nowhere.jsonl", "--temperature", "nan")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.splitlines() == ["klear: error: temperature (--temperature) must be a finite number (got nan)"]


# -- every float field of every config a flow takes ----------------------------------------------------------

REQUIRED = {"CurateConfig": {"sources": [{"name": "a", "path": "a.jsonl"}]}}  # fields without a default


def _float_fields(cls) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls)
            if hints[f.name] is float or (float in typing.get_args(hints[f.name])
                                          and set(typing.get_args(hints[f.name])) <= {float, type(None)})]


def _config_float_fields() -> list[tuple[type, str]]:
    from tests.flows.test_unknown_keys import _flow_configs

    return [(cls, name) for cls in _flow_configs() for name in _float_fields(cls)]


CONFIG_FLOATS = _config_float_fields()


def test_the_config_enumeration_finds_the_float_fields():
    found = {(cls.__name__, name) for cls, name in CONFIG_FLOATS}
    for expected in [("RLConfig", "eps_low"), ("RLConfig", "lr"), ("RLConfig", "temperature"), ("SFTConfig", "lr"),
                     ("RewardConfig", "correct"), ("SelectionConfig", "math_max"), ("PipelineConfig", "demo_scale"),
                     ("CurateConfig", "near_dup_threshold"), ("StrengthConfig", "max_survival"),
                     ("EvalConfig", "top_p"), ("DifficultyConfig", "hard_below")]:
        assert expected in found, (expected, sorted(found))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=NON_FINITE)
@pytest.mark.parametrize("cls, name", CONFIG_FLOATS, ids=[f"{c.__name__}.{n}" for c, n in CONFIG_FLOATS])
def test_every_float_field_refuses_a_non_finite_value(cls, name, value):
    """Made directly (the CLI, the Python API, a nested config from JSON): the config's own check refuses it
    with the rule's words and the field's name."""
    with pytest.raises(ConfigError) as refused:
        cls(**{**REQUIRED.get(cls.__name__, {}), name: value})
    assert refused.value.field == name and refused.value.detail == finite_problem(value), refused.value.message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=NON_FINITE)
@pytest.mark.parametrize("cls, name", CONFIG_FLOATS, ids=[f"{c.__name__}.{n}" for c, n in CONFIG_FLOATS])
def test_every_float_field_of_a_deployment_refuses_a_non_finite_value(cls, name, value):
    """Validated as a deployment's parameters (and a pipeline --config file) are: one line naming the field."""
    from pydantic import TypeAdapter, ValidationError

    from flows.prefect_ui import validation_detail

    with pytest.raises(ValidationError) as refused:
        TypeAdapter(cls).validate_python({**REQUIRED.get(cls.__name__, {}), name: value})
    line = validation_detail(refused.value, cls)
    assert "\n" not in line and line.startswith(name) and finite_problem(value) in line, line
