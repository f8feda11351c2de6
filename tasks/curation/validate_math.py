"""Math rows whose reference answer the grader cannot read → dropped `invalid_answer` at ingest.

Rule: a math row with an `answer` is kept only when math-verify parses `\\boxed{answer}`, after the
grader's normalisation (tasks/grading/math_answers.py), into a mathematical object within the grader's
CPU deadline: the grader's own first step (MathGrader.check_references). Kept, such a row would grade
every rollout INFRA "invalid_reference", and RL would never learn from it. The detail names the answer
as written (no repr escaping: `answer '\\frac{1}{': math-verify finds no mathematical expression in it`
for the text \\frac{1}{) and why. Rows without an answer, code rows, and plain-number answers (no worker
needed) pass. Rows go through `batch` at a time, one worker round trip per batch, and come out in their order.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from tasks.curation.malformed import shown_text

BATCH = 256  # rows held back per check: one round trip to the grading worker, little memory

Item = tuple  # (source row, Problem or None, dropped record or None), as ingest.ingest_rows yields


def drop_invalid_answers(items: Iterable[Item], drop: Callable[[int, object, str], dict],
                         batch: int = BATCH) -> Iterator[Item]:
    """`items` in order, each math row with an unreadable answer replaced by (row, None, drop(row,
    problem, detail))."""
    grader, buf = None, []

    def flush() -> Iterator[Item]:
        nonlocal grader
        idx = [k for k, (_, p, _) in enumerate(buf) if p is not None and p.domain == "math" and p.answer is not None]
        why = [None] * len(buf)
        if idx:
            if grader is None:
                from tasks.grading.math_grader import MathGrader

                grader = MathGrader()
            for k, w in zip(idx, grader.check_references([buf[k][1].answer for k in idx])):
                why[k] = w
        for (row, p, d), w in zip(buf, why):
            yield (row, p, d) if w is None else (row, None, drop(row, p, f"answer {shown_text(p.answer)}: {w}"))
        buf.clear()

    try:
        for item in items:
            buf.append(item)
            if len(buf) >= batch:
                yield from flush()
        yield from flush()
    finally:
        if grader is not None:
            grader.close()
