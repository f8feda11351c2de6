"""The math-verify side of math grading; runs in a grading worker process (timeouts.py), never in the caller.

    reference(answer) = parse("\\boxed{" + normalize(answer) + "}"), or None when that yields no
                        mathematical object (nothing, or only the raw string): an unparsable reference
    correct(reference, text) = verify(reference, parse(normalize(text)), allow_set_relation_comp=True)
                               and no relation chain in the answer has numeric parts that disagree

`normalize` is math_answers.normalize_answer_text. `allow_set_relation_comp` makes an inequality and the
interval it describes equal both ways (`x < 3` and `(-\\infty, 3)`; by default math-verify compares them
only when the model's answer is the interval). The chain rule: the answer's relation (math_answers.answer_span and
equality_chain: `x = 4 = 3`, `4 = 3`) counts only when all of its numeric parts (no symbol, no function)
agree, each part read by math-verify and compared with verify: math-verify alone reads `4 = 3` and
`x = 4 = 3` as their last part, 3. `x = 3` and `x = 2 + 1 = 3` state 3.

math-verify's own signal timeouts are off (they work on the main thread only); the worker's caller bounds
each step's CPU time from outside. References are parsed once per worker and cached.
"""
from __future__ import annotations

import logging
from typing import Iterable, Iterator

from tasks.grading.math_answers import answer_span, equality_chain, normalize_answer_text

_REFERENCES: dict[str, list | None] = {}
_CACHE_MAX = 50_000  # parsed references kept per worker (a dataset's distinct answers; cleared past this)


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


def _numeric(expr) -> bool:
    return getattr(expr, "is_number", False) is True


def chain_disagrees(text: str) -> bool:
    """True when the answer's relation chain has two numeric parts that differ (`4 = 3`, `x = 4 = 3`)."""
    from math_verify import parse, verify

    numbers = []
    for part in equality_chain(answer_span(text)):
        objs = _math_objects(parse("$" + part + "$", parsing_timeout=None))
        if objs and _numeric(objs[0]):
            numbers.append(objs[0])
    return any(not verify(numbers[0], n, timeout_seconds=None) for n in numbers[1:])


def correct(ref: list, text: str) -> bool:
    from math_verify import parse, verify

    _quiet()
    text = normalize_answer_text(text)
    pred = parse(text, parsing_timeout=None)
    if not pred or not verify(ref, pred, timeout_seconds=None, allow_set_relation_comp=True):
        return False
    return not chain_disagrees(text)


def _reference_or_none(answer: str) -> list | None:
    try:
        return reference(answer)
    except (MemoryError, RecursionError):  # too big or too deep to parse: not a usable reference
        return None


def grade_stream(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, int, bool]]:
    """Per (answer, final text): ("reference", k, parsable), then, when parsable, ("answer", k, correct).
    Two messages per item, so the caller knows which step of which item ran past its deadline. An
    answer too big or too deep for the grader (MemoryError, RecursionError) is not a correct one."""
    for k, (answer, text) in enumerate(pairs):
        ref = _reference_or_none(answer)
        yield "reference", k, ref is not None
        if ref is not None:
            try:
                ok = correct(ref, text)
            except (MemoryError, RecursionError):
                ok = False
            yield "answer", k, ok


def reference_stream(answers: Iterable[str]) -> Iterator[tuple[str, int, bool]]:
    """Per answer: ("reference", k, parsable)."""
    for k, answer in enumerate(answers):
        yield "reference", k, _reference_or_none(answer) is not None


def warm_up() -> None:
    """Run once in a new worker, outside any deadline (timeouts.py): math-verify's lazy imports (sympy,
    the LaTeX grammar) take seconds on a loaded machine and would otherwise land in the first deadline."""
    ref = reference("1")
    correct(ref, "\\boxed{1}")
    chain_disagrees("x = 1 = 1")
