"""The result of grading one response: a typed outcome, the grader's verdict, a score.

    Grade(outcome, score, verdict="", detail="")

- `Outcome.CORRECT`: exactly right (math) / every sampled test passed (code, verdict "accepted").
- `Outcome.WRONG`: the model's answer is wrong. For code `verdict` is the program's sandbox verdict —
  "wrong_answer", "runtime_error", "timeout", "memory_limit", "compile_error", or "no_code" (no python
  block). A program that times out is WRONG: an infinite loop is the model's fault. So is a math answer
  on which math-verify runs past its CPU deadline ("grader_timeout": `3^{3^{3^{3}}}`) or that kills the
  grader twice ("grader_crash"); math's verdict is "" otherwise (an answer whose reading raises, or that a
  relation rule refuses, is WRONG with the reason in `detail`).
- `Outcome.INFRA`: the grade says nothing about the model: a sandbox fault (verdict "sandbox_error"), a
  reference answer math-verify cannot parse, or whose parse runs past the deadline ("invalid_reference";
  curation drops such rows as `invalid_answer`), a grading worker that stalls or cannot start
  ("grader_stalled", "grader_unavailable", "grader_error"), or a row that cannot be graded
  ("no_reference": a math row without an answer; the sandbox likewise reports a code row with unusable
  tests as "sandbox_error"). Rewards are None (left out of the update, counted as infra failures);
  avg@k, pass@k and pass rates leave these samples out and report how many there were.

`score` is in [0, 1]: 1.0/0.0 for math, the pass fraction for code (the soft reward), 0.0 for INFRA.
`detail` is free text for people (e.g. the sandbox's reason); no code compares it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    CORRECT = "correct"
    WRONG = "wrong"
    INFRA = "infra"


@dataclass(frozen=True)
class Grade:
    outcome: Outcome
    score: float = 0.0
    verdict: str = ""
    detail: str = ""

    @property
    def correct(self) -> bool:
        return self.outcome == Outcome.CORRECT

    @property
    def infra(self) -> bool:
        return self.outcome == Outcome.INFRA
