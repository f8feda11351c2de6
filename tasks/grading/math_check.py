"""The math-verify side of math grading; runs in a grading worker process (timeouts.py), never in the caller.

    reference(answer) = parse("\\boxed{" + normalize(answer) + "}"), or None when that yields no
                        mathematical object (nothing, or only the raw string), or raises: an unusable reference
    verdict(reference, text) = Verdict(correct, why):
        reading = math_reading.read(normalize(text))           math-verify's own extraction, with its spans
        correct = verify(reference, reading.parsed, allow_set_relation_comp=True)   under math_numbers' rule
                  and no relation fault in the reading            (math_relations.py)
        an exception while reading or comparing the answer → Verdict(False, "<exception>: ...")

`normalize` is math_answers.normalize_answer_text. `allow_set_relation_comp` makes an inequality and the
interval it describes equal both ways (`x < 3` and `(-\\infty, 3)`; by default math-verify compares them
only when the model's answer is the interval). Numbers compare by math_numbers (exact golds exactly,
decimal golds to 6 significant digits, relative to the gold: never an absolute tolerance), in numbers,
sets, tuples, intervals and matrices alike. Relations count on what math-verify read and compares: a
false one (`4 = 3`, `4 \\equiv 3`, `{4 = 3}`), a disagreeing chain (`x = 4 = 3`), or a fragment of a span
math-verify could not parse (`\\boxed{4 \\sim 3}` read as 3) makes the answer wrong.

An answer whose reading or comparison raises (a number past Python's 4,300-digit int limit, a sympy
error) is wrong, the exception named in the reason: no answer can turn its own wrong reward into an
ungraded one. Our own code failing for every answer does not hide there: `warm_up` grades one answer
in each new worker, so a broken grader fails to start (INFRA "grader_unavailable") instead.

math-verify's own signal timeouts are off (they work on the main thread only); the worker's caller bounds
each step's CPU time from outside. References are parsed once per worker and cached.
"""
from __future__ import annotations

import logging
from typing import Iterable, Iterator, NamedTuple

from tasks.grading.math_answers import normalize_answer_text

_REFERENCES: dict[str, list | None] = {}
_CACHE_MAX = 50_000  # parsed references kept per worker (a dataset's distinct answers; cleared past this)


class Verdict(NamedTuple):
    correct: bool
    why: str = ""  # for people: why a wrong answer is wrong, when the grader knows more than "not equal"


def _quiet() -> None:
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # timeouts are ours; no warning per call


def _math_objects(parsed: list) -> list:
    from sympy import Basic
    from sympy.matrices import MatrixBase

    return [p for p in parsed if isinstance(p, (Basic, MatrixBase))]


def reference(answer: str) -> list | None:
    """The parsed reference answer (math-verify's list: objects, then the matched string), or None."""
    if answer in _REFERENCES:
        return _REFERENCES[answer]
    from math_verify import parse

    _quiet()
    parsed = parse("\\boxed{" + normalize_answer_text(answer) + "}", parsing_timeout=None)
    out = parsed if _math_objects(parsed) else None
    if len(_REFERENCES) >= _CACHE_MAX:
        _REFERENCES.clear()
    _REFERENCES[answer] = out
    return out


def equal_to_reference(ref: list, parsed: list) -> bool:
    """math-verify's verify, with the grader's number rule (math_numbers.py) and set/relation comparison."""
    from math_verify import verify

    from tasks.grading.math_numbers import number_rule

    with number_rule():
        return bool(verify(ref, parsed, timeout_seconds=None, allow_set_relation_comp=True))


def verdict(ref: list, text: str) -> Verdict:
    """The module's rule for one answer (see the module docstring); never raises for the answer's sake."""
    from tasks.grading.math_reading import read
    from tasks.grading.math_relations import relation_fault

    _quiet()
    try:
        reading = read(normalize_answer_text(text))
        if not reading.parsed or not equal_to_reference(ref, reading.parsed):
            return Verdict(False)
        why = relation_fault(reading)
        return Verdict(why is None, why or "")
    except Exception as e:  # the answer's doing: it is wrong, and says why
        return Verdict(False, f"{type(e).__name__} while reading or comparing the answer: {str(e)[:200]}")


def correct(ref: list, text: str) -> bool:
    return verdict(ref, text).correct


def _reference_or_none(answer: str) -> list | None:
    try:
        return reference(answer)
    except (MemoryError, RecursionError):  # too big or too deep to parse: not a usable reference
        return None
    except Exception:  # the row's answer breaks parsing (our normalisation included): not usable either
        return None


def grade_stream(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple]:
    """Per (answer, final text): ("reference", k, parsable), then, when parsable, ("answer", k, correct,
    why). Two messages per item, so the caller knows which step of which item ran past its deadline. An
    answer too big or too deep for the grader (MemoryError, RecursionError) is not a correct one."""
    for k, (answer, text) in enumerate(pairs):
        ref = _reference_or_none(answer)
        yield "reference", k, ref is not None
        if ref is not None:
            try:
                v = verdict(ref, text)
            except (MemoryError, RecursionError) as e:
                v = Verdict(False, f"{type(e).__name__}: the answer is too big or too deep to grade")
            yield "answer", k, v.correct, v.why


def reference_stream(answers: Iterable[str]) -> Iterator[tuple[str, int, bool]]:
    """Per answer: ("reference", k, parsable)."""
    for k, answer in enumerate(answers):
        yield "reference", k, _reference_or_none(answer) is not None


def warm_up() -> None:
    """Run once in a new worker, outside any deadline (timeouts.py): math-verify's lazy imports (sympy,
    the LaTeX grammar) take seconds on a loaded machine and would otherwise land in the first deadline.
    It also grades a correct and a wrong answer, and raises unless they come out so: a grader whose own
    code fails on every answer (each answer then wrong, for our bug) never starts."""
    ref = reference("1")
    checks = [(verdict(ref, "\\boxed{1}"), True), (verdict(ref, "\\boxed{x = 2 = 1}"), False),
              (verdict(reference("0.333333"), "\\boxed{\\frac{1}{3}}"), True),
              (verdict(reference("\\frac{1}{2000000}"), "\\boxed{0.0}"), False)]
    for v, expected in checks:
        if v.correct is not expected or (not v.correct and "while reading" in v.why):
            raise RuntimeError(f"the math grader fails its own warm-up check: {v}")
