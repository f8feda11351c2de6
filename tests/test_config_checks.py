"""Config types refuse out-of-range values themselves (the CLI and deployments share the message)."""
import math

import pytest

from tasks.config_checks import ConfigError
from tasks.evaluation.difficulty import DifficultyConfig
from tasks.evaluation.evaluate import EvalConfig
from tasks.training.sft import SFTConfig


@pytest.mark.parametrize("cls, kw, flag", [
    (SFTConfig, {"epochs": 0}, "--epochs must be at least 1"),
    (SFTConfig, {"max_steps": -1}, "--max-steps must be at least 1"),
    (SFTConfig, {"lr": math.inf}, "--lr must be a finite number"),
    (SFTConfig, {"lr": 0.0}, "--lr must be above 0.0"),
    (SFTConfig, {"batch_size": 0}, "--batch-size must be at least 1"),
    (SFTConfig, {"micro_batch_size": 9, "batch_size": 4}, "--micro-batch-size must not exceed --batch-size 4"),
    (SFTConfig, {"seq_len": 1}, "--seq-len must be at least 8"),
    (SFTConfig, {"save_every": 0}, "--save-every must be at least 1"),
    (EvalConfig, {"k": 0}, "--k must be at least 1"),
    (EvalConfig, {"k": 2 ** 70}, "--k must be at most 4096"),
    (EvalConfig, {"temperature": math.nan}, "--temperature must be a finite number"),
    (EvalConfig, {"max_tokens": -1}, "--max-tokens must be at least 1"),
    (DifficultyConfig, {"k": 0}, "--k must be at least 1"),
    (DifficultyConfig, {"hard_below": 0.8, "easy_from": 0.5}, "--easy-from must be at least 0.8"),
])
def test_out_of_range_values_are_refused_with_the_flag_message(cls, kw, flag):
    with pytest.raises(ConfigError) as exc:
        cls(**kw)
    assert exc.value.flag_message.startswith(flag)


def test_micro_batch_defaults_to_fit_the_batch():
    assert SFTConfig(batch_size=4).micro_batch_size == 4
    assert SFTConfig().micro_batch_size == 8 and SFTConfig(batch_size=16, micro_batch_size=2).micro_batch_size == 2
