import pytest

from tasks.config_checks import ConfigError
from tasks.grading.grade import Grade, Outcome
from tasks.grading.rewards import RewardConfig, is_correct, reward_from_grade

C = RewardConfig()
OK, BAD = Grade(Outcome.CORRECT, 1.0), Grade(Outcome.WRONG, 0.0)


def test_math_rewards_and_format_penalties():
    assert reward_from_grade("math", "<think>x</think>\\boxed{1}", OK, C) == 1.0
    assert reward_from_grade("math", "<think>x</think>\\boxed{2}", BAD, C) == -1.0
    assert reward_from_grade("math", "<think>x \\boxed{1}", OK, C) == -1.0
    assert reward_from_grade("math", "\\boxed{1}", OK, C) == -2.0
    no_fmt = RewardConfig(missing_think_close=None, missing_think_open=None)
    assert reward_from_grade("math", "\\boxed{1}", OK, no_fmt) == 1.0


def test_a_wrong_answer_without_think_close_is_not_better_than_one_that_closes():
    closed = reward_from_grade("math", "<think>x</think>\\boxed{2}", BAD, C)
    unclosed = reward_from_grade("math", "<think>x \\boxed{2}", BAD, C)
    assert unclosed <= closed


@pytest.mark.parametrize("field", ["missing_think_close", "missing_think_open"])
def test_a_format_penalty_above_the_wrong_answer_reward_is_refused(field):
    with pytest.raises(ConfigError) as e:
        RewardConfig(**{field: -0.5})
    assert e.value.field == field and "-1.0" in str(e.value)


def test_a_format_penalty_above_the_lowest_code_reward_is_refused():
    """The penalty replaces a code reward too: its lowest is 0 (soft/hard) or -1 (scaled)."""
    with pytest.raises(ConfigError) as e:
        RewardConfig(wrong=0.0, missing_think_close=-0.5, scale_code=True)
    assert e.value.field == "missing_think_close"
    assert RewardConfig(wrong=0.0, missing_think_close=-0.5).missing_think_close == -0.5


def test_default_format_penalties_do_not_exceed_the_wrong_answer_reward():
    assert C.missing_think_close <= C.wrong and C.missing_think_open <= C.wrong


def test_code_soft_hard_and_scaled():
    g = Grade(Outcome.WRONG, 0.75, "wrong_answer")
    assert reward_from_grade("code", "<think></think>```python```", g, C) == 0.75
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(code_mode="hard")) == 0.0
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(scale_code=True)) == 0.5
    acc = Grade(Outcome.CORRECT, 1.0, "accepted")
    assert reward_from_grade("code", "<think></think>", acc, RewardConfig(code_mode="hard", scale_code=True)) == 1.0


@pytest.mark.parametrize("verdict", ["timeout", "memory_limit", "compile_error", "no_code"])
def test_a_program_that_times_out_gets_the_wrong_answer_reward(verdict):
    """An infinite loop is the model's fault: the wrong-answer reward, never None."""
    g = Grade(Outcome.WRONG, 0.0, verdict)  # 0 of its tests passed
    assert reward_from_grade("code", "<think></think>", g, C) == 0.0
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(code_mode="hard")) == 0.0
    assert reward_from_grade("code", "<think></think>", g, RewardConfig(scale_code=True)) == -1.0


def test_a_math_answer_the_grader_cannot_finish_gets_the_wrong_answer_reward():
    hang = Grade(Outcome.WRONG, 0.0, "grader_timeout")
    assert reward_from_grade("math", "<think></think>\\boxed{3^{3^{3^{3}}}}", hang, C) == C.wrong
    assert reward_from_grade("math", "\\boxed{3^{3^{3^{3}}}}", hang, C) == C.missing_think_open


def test_a_partial_timeout_keeps_its_pass_fraction():
    g = Grade(Outcome.WRONG, 0.5, "timeout")  # half the tests passed before one looped
    assert reward_from_grade("code", "<think></think>", g, C) == 0.5


def test_infrastructure_failures_are_not_wrong_answers():
    sandbox = Grade(Outcome.INFRA, 0.0, "sandbox_error")
    bad_reference = Grade(Outcome.INFRA, 0.0, "invalid_reference")
    assert reward_from_grade("code", "<think></think>", sandbox, C) is None
    assert reward_from_grade("code", "no think at all", sandbox, C) is None  # no format penalty either
    assert reward_from_grade("math", "<think></think>", bad_reference, C) is None
    assert not is_correct(None, C, "math") and is_correct(1.0, C, "math") and not is_correct(0.75, C, "code")


def test_grade_correct_follows_the_outcome():
    assert OK.correct and not OK.infra and not BAD.correct
    assert Grade(Outcome.INFRA).infra and not Grade(Outcome.INFRA).correct
    assert Outcome("infra") is Outcome.INFRA and Outcome.WRONG == "wrong"
