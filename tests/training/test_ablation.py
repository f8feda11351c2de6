"""Ablation arms, typed values from the command line, arm configs checked, the per-arm summary."""
import pytest

from tasks.config_checks import ConfigError
from tasks.training.ablation import arm_config, arms, label, parse_value, summarize, t975
from tasks.training.config import RLConfig


def test_arms_are_every_combination_first_field_slowest():
    got = arms({"loss": ["gppo", "grpo"], "sft_alpha": [0.0, 0.1]})
    assert [label(a) for a in got] == ["loss=gppo,sft_alpha=0.0", "loss=gppo,sft_alpha=0.1",
                                       "loss=grpo,sft_alpha=0.0", "loss=grpo,sft_alpha=0.1"]
    assert arms({}) == [{}] and label({}) == "base"


@pytest.mark.parametrize("name, text, want", [
    ("sft_alpha", "0.1", 0.1), ("steps", "7", 7), ("filter_zero_variance", "false", False),
    ("dual_clip", "none", None), ("dual_clip", "10", 10.0), ("loss", "cispo", "cispo"),
    ("reward.code_mode", "hard", "hard"), ("reward.scale_code", "on", True), ("domains", "math|code", ("math", "code")),
])
def test_values_from_the_command_line_take_the_field_type(name, text, want):
    assert parse_value(RLConfig, name, text) == want


@pytest.mark.parametrize("name, text, message", [
    ("steps", "many", "steps (--steps) expects int, got 'many'"),
    ("filter_zero_variance", "maybe", "filter_zero_variance (--filter-zero-variance) expects bool"),
    ("temprature", "1", "temprature (--temprature) is not a setting of RLConfig"),
])
def test_a_bad_value_or_name_is_one_line(name, text, message):
    with pytest.raises(ConfigError) as exc:
        parse_value(RLConfig, name, text)
    assert str(exc.value).startswith(message)


def test_arm_config_applies_overrides_nested_fields_and_the_seed():
    cfg = arm_config(RLConfig(steps=3), {"loss": "cispo", "reward.code_mode": "hard"}, seed=5)
    assert (cfg.loss, cfg.reward.code_mode, cfg.seed, cfg.steps) == ("cispo", "hard", 5, 3)


def test_arm_config_checks_the_result():
    with pytest.raises(ConfigError, match=r"^loss \(--loss\) must be one of"):
        arm_config(RLConfig(), {"loss": "ppo"}, seed=1)
    with pytest.raises(ConfigError, match=r"^reward.code_mode \(--reward-code-mode\) must be one of"):
        arm_config(RLConfig(), {"reward.code_mode": "partial"}, seed=1)


def test_summary_mean_and_95_interval_per_arm():
    runs = [{"arm": "a", "final_avg_at_k": x, "best_avg_at_k": x + 0.1} for x in (0.2, 0.4, 0.6)]
    runs += [{"arm": "b", "final_avg_at_k": 0.5, "best_avg_at_k": 0.5}]
    a, b = summarize(runs)
    assert a["arm"] == "a" and a["seeds"] == 3
    assert a["final_avg_at_k"] == pytest.approx(0.4) and a["best_avg_at_k"] == pytest.approx(0.5)
    assert a["final_ci95"] == pytest.approx(4.303 * 0.2 / 3 ** 0.5)   # t(0.975, 2) · s / √n, s = 0.2
    assert b["final_ci95"] is None                                     # one seed: no interval


def test_t_quantiles_are_never_narrower_than_the_true_ones():
    assert t975(2) == 4.303 and t975(12) == t975(10) and t975(1000) == 1.96
