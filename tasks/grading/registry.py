"""Graders, one registry keyed by domain. A grader scores a batch of (response, problem row) pairs:

    grader.grade_batch([(response, row), ...]) -> [Grade(outcome, score, verdict, detail), ...]

Each grade's outcome is CORRECT, WRONG or INFRA (grade.py states the rule per grader).

- `math` (math_grader.py): math-verify on the text after `</think>` vs `\\boxed{row["answer"]}`, both
  normalised first (math_answers.py); score 1.0 or 0.0; a deadline of the grader's CPU time.
- `code` (code_grader.py): the last ```python block after `</think>`, run in the Docker sandbox against
  `row["tests"]`; score = passed/total (soft), CORRECT = all passed, a timeout is WRONG.
Batching lets the code grader send a whole batch to the sandbox pool at once.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from tasks.grading.grade import Grade


class Grader(Protocol):
    def grade_batch(self, items: Sequence[tuple[str, dict]]) -> list[Grade]: ...
    def close(self) -> None: ...


GRADERS: dict[str, Callable[..., Grader]] = {}


def register_grader(domain: str):
    def deco(factory):
        GRADERS[domain] = factory
        return factory
    return deco


def make_grader(domain: str, **kw) -> Grader:
    if domain not in GRADERS:
        raise ValueError(f"no grader for domain {domain!r} (known: {', '.join(sorted(GRADERS))})")
    return GRADERS[domain](**kw)


@register_grader("math")
def _math(**kw) -> Grader:
    from tasks.grading.math_grader import MathGrader

    return MathGrader(**kw)


@register_grader("code")
def _code(**kw) -> Grader:
    from tasks.grading.code_grader import CodeGrader

    return CodeGrader(**kw)
