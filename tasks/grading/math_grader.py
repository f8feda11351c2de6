"""Math grading with math-verify (paper: the text after `</think>` against `\\boxed{answer}`).

    correct(response, answer) = math_verify.verify(parse("\\boxed{answer}"), parse(final_text))
    final_text = the part of the response after the last `</think>` (the whole response if none)

Parsing and verification run with math-verify's own signal timeouts disabled (they only work on the
main thread) inside a `ProcessTimeoutPool`, so grading never hangs, in threads or Dask workers alike.

Outcomes (grade.py): verified → CORRECT (score 1.0); not verified → WRONG (0.0), verdict "";
math-verify past its deadline → INFRA "grader_timeout" (the grader hung, not the model: no reward, left
out of pass rates); a row without a reference answer → INFRA "no_reference" (the row cannot be graded;
counting it wrong would mark the problem unsolved and punish every rollout).
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.grading.grade import Grade, Outcome
from tasks.grading.timeouts import ProcessTimeoutPool, TimedOut

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def final_text(response: str) -> str:
    i = response.rfind(THINK_CLOSE)
    return response[i + len(THINK_CLOSE):] if i >= 0 else response


def _verify(answer: str, text: str) -> bool:
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # we time out from outside; no warning per call

    gold = parse(f"\\boxed{{{answer}}}", parsing_timeout=None)
    pred = parse(text, parsing_timeout=None)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


def warm_up() -> None:
    """Run in each new grading process before its first timed call (timeouts.py): math-verify's lazy
    imports (sympy, the LaTeX grammar) take seconds on a loaded machine; inside the first call's deadline
    they timed out, killed the pool and respawned it, over and over (640 answers at load ~9: 89 s with 5
    spurious timeouts; with the warm-up 2-37 s depending on load, no timeouts)."""
    _verify("1", "\\boxed{1}")


def _verify_many(pairs: list[tuple[str, str]]) -> list[bool]:
    return [_verify(answer, text) for answer, text in pairs]


@dataclass
class MathGrade:
    correct: bool
    timed_out: bool = False


def _grade(g: MathGrade) -> Grade:
    if g.timed_out:
        return Grade(Outcome.INFRA, 0.0, "grader_timeout")
    return Grade(Outcome.CORRECT, 1.0) if g.correct else Grade(Outcome.WRONG, 0.0)


class MathGrader:
    """`grade(response, answer) -> MathGrade`; `timeout` seconds per call (default 5, as math-verify).

    `grade_batch` sends `chunk` items per round trip to the grading process, so a batch costs a few
    round trips rather than one per answer (each needs both processes scheduled: slow on a loaded host). A chunk's deadline is `timeout + chunk_item_s` per item; a
    chunk that misses it (some item hangs) is regraded item by item, each under `timeout`, so only the
    hanging item is scored as a timeout."""

    def __init__(self, timeout: float = 5.0, workers: int = 1, chunk: int = 32, chunk_item_s: float = 0.25, **_):
        self.timeout = timeout
        self.chunk = max(1, chunk)
        self.chunk_item_s = chunk_item_s
        self._pool = ProcessTimeoutPool(workers)

    def grade(self, response: str, answer: str) -> MathGrade:
        try:
            return MathGrade(self._pool.call(_verify, answer, final_text(response), timeout=self.timeout))
        except TimedOut:
            return MathGrade(False, timed_out=True)

    def grade_batch(self, items) -> list[Grade]:
        out: list[Grade | None] = [None] * len(items)
        todo = []
        for i, (response, row) in enumerate(items):
            if row.get("answer") is None:
                out[i] = Grade(Outcome.INFRA, 0.0, "no_reference", "no reference answer")
            else:
                todo.append((i, str(row["answer"]), response))
        for k in range(0, len(todo), self.chunk):
            part = todo[k:k + self.chunk]
            try:
                verdicts = [MathGrade(ok) for ok in self._pool.call(
                    _verify_many, [(a, final_text(r)) for _, a, r in part],
                    timeout=self.timeout + self.chunk_item_s * len(part))]
            except TimedOut:
                verdicts = [self.grade(r, a) for _, a, r in part]
            for (i, _, _), g in zip(part, verdicts):
                out[i] = _grade(g)
        return out

    def close(self) -> None:
        self._pool.close()
