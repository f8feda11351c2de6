"""Every config field is a flag with the config's default and its comment as help; flag values rebuild the
config (nested configs and comma-separated names included), whose own checks name the flag."""
import dataclasses

import pytest
import typer

from flows.cli_config_options import build_config, config_parameters, field_comments
from tasks.config_checks import ConfigError
from tasks.grading.rewards import RewardConfig
from tasks.training.config import RL_NESTED, RLConfig

NESTED = RL_NESTED


def _rl_click_params() -> dict:
    from flows.cli import app

    return {p.name: p for p in typer.main.get_command(app).commands["rl"].params}


def test_every_rl_setting_is_a_klear_rl_flag_with_help():
    params = _rl_click_params()
    for f in dataclasses.fields(RLConfig):
        names = ([f"{f.name}_{g.name}" for g in dataclasses.fields(NESTED[f.name])] if f.name in NESTED
                 else [f.name])
        for name in names:
            assert name in params, f"klear rl has no flag for {name}"
            assert params[name].help, f"--{name.replace('_', '-')} has no help"


def test_field_comments_include_continuations_and_inherited_fields():
    comments = field_comments(RLConfig)
    assert comments["bf16"].endswith("None: on when the GPU supports it, CPU stays fp32")
    assert "evaluation" not in comments["temperature"]      # RL's own comment wins over Sampling's
    assert comments["max_tokens"].startswith("response budget")  # inherited from Sampling


def test_flag_values_rebuild_the_config():
    values = {p.name: p.default.default for p in config_parameters(RLConfig, nested=NESTED)}
    values.update(domains="math", reward_code_mode="hard", filter_zero_variance=False, eps_high=0.3)
    cfg = build_config(RLConfig, values, nested=NESTED)
    assert cfg.domains == ("math",) and cfg.reward.code_mode == "hard" and not cfg.filter_zero_variance
    assert cfg.eps_high == 0.3 and dataclasses.replace(cfg, domains=("math", "code"), eps_high=0.28,
                                                       filter_zero_variance=True,
                                                       reward=RewardConfig()) == RLConfig()


def test_a_bad_nested_value_names_the_nested_flag():
    with pytest.raises(ConfigError) as exc:
        build_config(RLConfig, {"reward_code_mode": "partial"}, nested=NESTED)
    assert str(exc.value).startswith("reward.code_mode (--reward-code-mode) must be one of hard, soft")


def _curate_click_params() -> dict:
    from flows.cli import app

    return {p.name: p for p in typer.main.get_command(app).commands["curate"].params}


def test_every_curate_setting_is_a_klear_curate_flag_spelled_as_its_field_says():
    from tasks.curation.config import CurateConfig, flag_of

    params = _curate_click_params()
    for f in dataclasses.fields(CurateConfig):
        if f.name in ("sources", "benchmarks"):  # built from --source/--layout/--map/--domain and --benchmark
            continue
        assert f.name in params, f"klear curate has no flag for {f.name}"
        assert params[f.name].opts == [flag_of(CurateConfig, f.name)], params[f.name].opts
        if f.name != "store":  # --store's default is resolved at run time ($KLEAR_STORE or ./klear-store)
            assert params[f.name].default == f.default and params[f.name].help, f.name
    assert params["dask_workers"].opts == ["--workers"] and params["near_dup_threshold"].opts == ["--near-threshold"]


@pytest.mark.parametrize("values, message", [
    ({"near_dup_threshold": 2.0}, "near_dup_threshold (--near-threshold) must be at most 1.0 (got 2.0)"),
    ({"dask_workers": 0}, "dask_workers (--workers) must be at least 1 (got 0)"),
    ({"sources": [{"name": "a", "path": "a.jsonl", "layout": "zz"}]}, "layout (--layout) must be one of"),
])
def test_a_bad_curate_value_names_the_flag_that_sets_it(values, message):
    from tasks.curation.config import CurateConfig

    with pytest.raises(ConfigError) as exc:
        build_config(CurateConfig, {"sources": [{"name": "a", "path": "a.jsonl"}], **values})
    assert str(exc.value).startswith(message), str(exc.value)
