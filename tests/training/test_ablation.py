"""Ablation arms, typed values from the command line, arm configs checked, the per-arm summary."""
import pytest

from tasks.config_checks import ConfigError
from tasks.stats import t975, welch
from tasks.training.ablation import (arm_config, area_under_curve, arms, label, pair_line, pairwise, parse_value,
                                     repeated_run, run_figures, summarize, training_figures)
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


def test_a_run_planned_twice_is_named():
    """A seed given twice, or an arm whose value is written two ways, plans the same run twice; an ablation
    (CLI or deployment) refuses it, since the run would count twice in its arm's mean."""
    base = RLConfig()
    plan = [(a, s, arm_config(base, a, s)) for a in [{"lr": 0.1}, {"lr": 1e-1}] for s in (1, 2)]
    assert repeated_run(plan) == "arm lr=0.1 with seed 1 is the run of arm lr=0.1 with seed 1"
    seeds = [({}, s, arm_config(base, {}, s)) for s in (3, 3)]
    assert repeated_run(seeds) == "arm base with seed 3 is the run of arm base with seed 3"
    assert repeated_run([(a, 1, arm_config(base, a, 1)) for a in arms({"loss": ["gppo", "grpo"]})]) is None


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
    assert a["final_ci95"] == pytest.approx(4.3027 * 0.2 / 3 ** 0.5, rel=1e-4)   # t(0.975, 2) · s / √n, s = 0.2
    assert b["final_ci95"] is None                                     # one seed: no interval
    assert a["best_ci95"] == pytest.approx(a["final_ci95"]) and a["entropy"] is None  # no figures in the runs


def test_training_figures_average_the_steps_that_trained_then_the_seeds():
    steps = [{"step": 0, "eval_avg_at_k": 0.5},   # the starting evaluation: not a training step
             {"step": 1, "trained_rollouts": 8, "clip_frac_low": 0.1, "clip_frac_high": 0.3, "entropy": 2.0},
             {"step": 2, "trained_rollouts": 0, "clip_frac_low": 0.0, "clip_frac_high": 0.0, "entropy": 0.0},
             {"step": 3, "trained_rollouts": 4, "clip_frac_low": 0.3, "clip_frac_high": 0.1, "entropy": 1.0}]
    figs = {k: v for k, v in training_figures(steps).items() if v is not None}
    assert figs == pytest.approx({"clip_frac_low": 0.2, "clip_frac_high": 0.2, "entropy": 1.5})
    assert set(training_figures(steps[:3]).values()) == {None} or training_figures([steps[2]])["entropy"] is None
    runs = [{"arm": "a", "final_avg_at_k": 0.5, "best_avg_at_k": 0.5, **figs},
            {"arm": "a", "final_avg_at_k": 0.5, "best_avg_at_k": 0.5, "clip_frac_low": 0.4, "clip_frac_high": 0.0,
             "entropy": 0.5}]
    (row,) = summarize(runs)
    assert (row["clip_frac_low"], row["clip_frac_high"], row["entropy"]) == pytest.approx((0.3, 0.1, 1.0))


def test_run_figures_from_the_held_out_curve():
    rows = [{"step": 0, "eval_avg_at_k": 0.2}, {"step": 1, "reward_mean": 0.1},
            {"step": 2, "eval_avg_at_k": 0.6}, {"step": 4, "eval_avg_at_k": 0.4}]
    got = run_figures(rows)
    # trapezoids: (2·(0.2+0.6)/2 + 2·(0.6+0.4)/2) / 4 = (0.8 + 1.0) / 4
    assert got == pytest.approx({"initial_avg_at_k": 0.2, "final_avg_at_k": 0.4, "best_avg_at_k": 0.6,
                                 "gain": 0.2, "auc": 0.45})
    assert area_under_curve([(0, 0.3)]) is None
    no_start = run_figures(rows[1:])
    assert no_start["initial_avg_at_k"] is None and no_start["gain"] is None and no_start["final_avg_at_k"] == 0.4


def test_summary_carries_each_run_figure_with_its_interval():
    runs = [{"arm": "a", "auc": x, "gain": x - 0.1} for x in (0.3, 0.5)]
    (row,) = summarize(runs)
    assert row["auc"] == pytest.approx(0.4) and row["auc_ci95"] == pytest.approx(t975(1) * 0.1)  # s = √0.02, s/√2 = 0.1
    assert row["gain"] == pytest.approx(0.3) and row["initial_avg_at_k"] is None and row["initial_ci95"] is None


def test_welch_matches_the_textbook_example():
    # two samples of unequal variance: diff −0.3, se² = 0.01/3 + 0.04/3, df = 2.94 (Welch–Satterthwaite)
    a, b = [0.1, 0.2, 0.3], [0.3, 0.5, 0.7]
    w = welch(a, b)
    se = ((0.01 / 3) + (0.04 / 3)) ** 0.5
    assert w["diff"] == pytest.approx(-0.3)
    assert w["high"] - w["diff"] == pytest.approx(t975((se ** 4) / ((0.01 / 3) ** 2 / 2 + (0.04 / 3) ** 2 / 2)) * se)
    assert w["p"] == pytest.approx(0.10448, abs=1e-5)  # t = −2.324 on 2.94 df, as scipy's ttest_ind(equal_var=False)
    assert welch([0.5, 0.5], [0.5, 0.5])["p"] == 1.0 and welch([0.4, 0.4], [0.5, 0.5])["p"] == 0.0
    assert welch([0.1], [0.2, 0.3]) is None


def test_pairs_of_arms_say_whether_they_are_separated():
    runs = [{"arm": "gppo", "auc": x} for x in (0.60, 0.62, 0.61, 0.63, 0.59)]
    runs += [{"arm": "grpo", "auc": x} for x in (0.40, 0.42, 0.41, 0.43, 0.39)]
    runs += [{"arm": "cispo", "auc": x} for x in (0.50, 0.70, 0.45, 0.75, 0.60)]
    pairs = {(p["a"], p["b"]): p for p in pairwise(runs)}
    assert list(pairs) == [("gppo", "grpo"), ("gppo", "cispo"), ("grpo", "cispo")]
    assert pairs[("gppo", "grpo")]["separated"] and not pairs[("gppo", "cispo")]["separated"]
    line = pair_line(pairs[("gppo", "grpo")])
    assert line.startswith("gppo vs grpo: auc +0.200 [") and line.endswith("separated at 95%") and "not" not in line


def test_plot_arms_writes_one_panel_per_metric(tmp_path):
    from tasks.reporting import plot_arms

    runs = [[{"step": s, "entropy": 1.0 / s} for s in (1, 2, 3)], [{"step": s, "entropy": 2.0 / s} for s in (1, 2)]]
    out = plot_arms({"gppo": runs}, ("entropy",), tmp_path / "c.png", "t")
    assert out.stat().st_size > 1000


def test_t_quantiles_are_students():
    assert t975(2) == pytest.approx(4.303, abs=1e-3) and t975(4) == pytest.approx(2.776, abs=1e-3)
    assert t975(1e6) == pytest.approx(1.96, abs=1e-3)


def test_markdown_summary_has_a_row_per_arm_and_a_line_per_pair():
    from tasks.training.ablation import ablation_markdown

    runs = [{"arm": a, "auc": x, "final_avg_at_k": x, "initial_avg_at_k": 0.3} for a in ("gppo", "grpo")
            for x in (0.4, 0.5, 0.6)]
    text = ablation_markdown(summarize(runs), pairwise(runs), 8, [1, 2, 3])
    lines = text.splitlines()
    assert lines[0] == "Held-out avg@8, mean over seeds 1, 2, 3 (± 95% interval)"
    rows = [line for line in lines if line.startswith("| `")]
    assert [r.split("|")[1].strip() for r in rows] == ["`gppo`", "`grpo`"]
    assert all(len(r.split(" | ")) == 11 for r in rows)   # every column filled ("—" where no figure)
    assert lines[-1].startswith("- gppo vs grpo: auc +0.000") and lines[-1].endswith("not separated at 95%")
