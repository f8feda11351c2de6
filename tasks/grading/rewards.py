"""RL rewards (paper §RL; the Klear release's reward config for the format rules).

Math:  r = +1 if math-verify says the text after `</think>` equals \\boxed{answer}, else −1;
       a response without `</think>` gets −1.0 and one without `<think>` gets −2.0 instead
       (format penalties; set them to None to disable). No format penalty may exceed the wrong-answer
       reward (math `wrong`, and the lowest code reward: 0, or −1 scaled): a penalty above it would pay
       a policy to break the format whenever it expects to be wrong.
Code:  soft r = pass fraction over ≤ 16 sampled tests (paper: soft 61.0 vs hard 59.2 LCB v5); `hard` =
       1 only if all pass; no python block → the lowest reward (0). `scale_code` maps [0, 1] to [−1, 1]
       (2·rate − 1, as the release; the same advantages after group normalisation).
The reward is a pure function of the typed grade (grade.py):
    INFRA   → None (sandbox fault, unparsable reference, ungradable row): the trainer leaves it out and
              counts it in `infra_failures`;
    WRONG   → the wrong-answer reward: math `wrong`; code the soft pass fraction (0 under `hard`), scaled
              if `scale_code`. A program that timed out is WRONG, so it gets exactly this reward, and so
              is a math answer the grader could not finish (verdict "grader_timeout");
    CORRECT → `correct` (math) / 1.0 (code; +1 scaled);
and the format penalties replace any non-None reward.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.config_checks import STRICT_KEYS
from tasks.grading.grade import Grade, Outcome
from tasks.grading.math_grader import THINK_CLOSE, THINK_OPEN


@dataclass
class RewardConfig:
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    correct: float = 1.0                        # a correct answer (math; code gets 1.0, or +1 scaled)
    wrong: float = -1.0                         # a wrong math answer
    missing_think_close: float | None = -1.0    # format penalty: no </think> (e.g. cut off at the length
    # limit); −1, the wrong-answer reward: above it (the release's −0.5) an unclosed wrong answer beat a
    # closed one, so not closing paid whenever the model expected to be wrong
    missing_think_open: float | None = -2.0     # format penalty: no <think>; below wrong, the worse format fault
    code_mode: str = "soft"        # "soft" (pass fraction) or "hard" (all tests pass)
    scale_code: bool = False       # 2·rate − 1

    def __post_init__(self) -> None:
        """Finite rewards, a known code mode, correct above wrong (else RL learns to fail), and no format
        penalty above the lowest wrong-answer reward (else RL learns to break the format)."""
        from tasks.config_checks import ConfigError, check_choice, check_float

        for name in ("correct", "wrong"):
            check_float(self, name)
        if self.correct <= self.wrong:
            raise ConfigError("correct", f"must be above the wrong-answer reward {self.wrong} (got {self.correct})")
        check_choice(self, "code_mode", ("soft", "hard"))
        lowest = min(self.wrong, -1.0 if self.scale_code else 0.0)  # math wrong; code's 0 (−1 scaled)
        for name in ("missing_think_close", "missing_think_open"):
            check_float(self, name, optional=True)
            if getattr(self, name) is not None and getattr(self, name) > lowest:
                raise ConfigError(name, f"must not exceed the wrong-answer reward {lowest} (got {getattr(self, name)})")


def format_penalty(response: str, cfg: RewardConfig) -> float | None:
    if cfg.missing_think_open is not None and THINK_OPEN not in response:
        return cfg.missing_think_open
    if cfg.missing_think_close is not None and THINK_CLOSE not in response:
        return cfg.missing_think_close
    return None


def reward_from_grade(domain: str, response: str, grade: Grade, cfg: RewardConfig) -> float | None:
    """Turn a grade into a scalar reward; None exactly when the outcome is INFRA."""
    if grade.outcome == Outcome.INFRA:
        return None
    penalty = format_penalty(response, cfg)
    if penalty is not None:
        return penalty
    if domain == "math":
        return cfg.correct if grade.correct else cfg.wrong
    rate = grade.score if cfg.code_mode == "soft" else float(grade.correct)
    return 2 * rate - 1 if cfg.scale_code else rate


def is_correct(reward: float | None, cfg: RewardConfig, domain: str) -> bool:
    """"Correct" rollouts for the SFT term: reward exactly the maximum (paper: reward exactly 1)."""
    return reward is not None and reward == (cfg.correct if domain == "math" else 1.0)
