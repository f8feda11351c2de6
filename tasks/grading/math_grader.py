"""Math grading with math-verify (paper: the text after `</think>` against `\\boxed{answer}`).

    correct(response, answer) = math_verify.verify(parse("\\boxed{answer}"), parse(final_text))
    final_text = the part of the response after the last `</think>` (the whole response if none)

Parsing and verification run with math-verify's own signal timeouts disabled (they only work on the
main thread) inside a `ProcessTimeoutPool`, so grading never hangs, in threads or Dask workers alike.
A timeout grades as incorrect and is reported as such (`timed_out=True`).
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.grading.grade import Grade
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


@dataclass
class MathGrade:
    correct: bool
    timed_out: bool = False


class MathGrader:
    """`grade(response, answer) -> MathGrade`; `timeout` seconds per call (default 5, as math-verify)."""

    def __init__(self, timeout: float = 5.0, workers: int = 1, **_):
        self.timeout = timeout
        self._pool = ProcessTimeoutPool(workers)

    def grade(self, response: str, answer: str) -> MathGrade:
        try:
            return MathGrade(self._pool.call(_verify, answer, final_text(response), timeout=self.timeout))
        except TimedOut:
            return MathGrade(False, timed_out=True)

    def grade_batch(self, items) -> list[Grade]:
        out = []
        for response, row in items:
            if row.get("answer") is None:
                out.append(Grade(0.0, False, "no reference answer"))
                continue
            r = self.grade(response, str(row["answer"]))
            out.append(Grade(float(r.correct), r.correct, "timeout" if r.timed_out else ""))
        return out

    def close(self) -> None:
        self._pool.close()
