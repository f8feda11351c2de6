from tasks.grading.grade import Grade
from tasks.grading.rewards import RewardConfig, is_correct, reward_from_grade

C = RewardConfig()


def test_math_rewards_and_format_penalties():
    ok, bad = Grade(1.0, True), Grade(0.0, False)
    assert reward_from_grade("math", "<think>x</think>\\boxed{1}", ok, C) == 1.0
    assert reward_from_grade("math", "<think>x</think>\\boxed{2}", bad, C) == -1.0
    assert reward_from_grade("math", "<think>x \\boxed{1}", ok, C) == -0.5
    assert reward_from_grade("math", "\\boxed{1}", ok, C) == -2.0
    no_fmt = RewardConfig(missing_think_close=None, missing_think_open=None)
    assert reward_from_grade("math", "\\boxed{1}", ok, no_fmt) == 1.0


def test_code_soft_hard_and_scaled():
    g = Grade(0.75, False)
    assert reward_from_grade("code", "<think></think>```python```", g, C) == 0.75
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(code_mode="hard")) == 0.0
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(scale_code=True)) == 0.5


def test_infrastructure_failures_are_not_wrong_answers():
    assert reward_from_grade("code", "<think></think>", Grade(0.0, False, "sandbox_error"), C) is None
    assert reward_from_grade("math", "<think></think>", Grade(0.0, False, "timeout"), C) is None
    assert not is_correct(None, C, "math") and is_correct(1.0, C, "math") and not is_correct(0.75, C, "code")
