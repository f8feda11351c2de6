"""Ablation arms, typed values from the command line, arm configs checked, the per-arm summary."""
import pytest

from tasks.config_checks import ConfigError
from tasks.training.ablation import arm_config, arms, label, parse_value, summarize, t975, training_figures
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
    assert a["best_ci95"] == pytest.approx(a["final_ci95"]) and a["entropy"] is None  # no figures in the runs


def test_training_figures_average_the_steps_that_trained_then_the_seeds():
    steps = [{"step": 1, "trained_rollouts": 8, "clip_frac_low": 0.1, "clip_frac_high": 0.3, "entropy": 2.0},
             {"step": 2, "trained_rollouts": 0, "clip_frac_low": 0.0, "clip_frac_high": 0.0, "entropy": 0.0},
             {"step": 3, "trained_rollouts": 4, "clip_frac_low": 0.3, "clip_frac_high": 0.1, "entropy": 1.0}]
    figs = training_figures(steps)
    assert figs == pytest.approx({"clip_frac_low": 0.2, "clip_frac_high": 0.2, "entropy": 1.5})
    assert training_figures([steps[1]]) == {"clip_frac_low": None, "clip_frac_high": None, "entropy": None}
    runs = [{"arm": "a", "final_avg_at_k": 0.5, "best_avg_at_k": 0.5, **figs},
            {"arm": "a", "final_avg_at_k": 0.5, "best_avg_at_k": 0.5, "clip_frac_low": 0.4, "clip_frac_high": 0.0,
             "entropy": 0.5}]
    (row,) = summarize(runs)
    assert (row["clip_frac_low"], row["clip_frac_high"], row["entropy"]) == pytest.approx((0.3, 0.1, 1.0))


def test_plot_arms_writes_one_panel_per_metric(tmp_path):
    from tasks.reporting import plot_arms

    runs = [[{"step": s, "entropy": 1.0 / s} for s in (1, 2, 3)], [{"step": s, "entropy": 2.0 / s} for s in (1, 2)]]
    out = plot_arms({"gppo": runs}, ("entropy",), tmp_path / "c.png", "t")
    assert out.stat().st_size > 1000


def test_t_quantiles_are_never_narrower_than_the_true_ones():
    assert t975(2) == 4.303 and t975(12) == t975(10) and t975(1000) == 1.96
