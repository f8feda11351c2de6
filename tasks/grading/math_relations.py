"""When a relation in the model's answer makes it wrong. math-verify reads `4 = 3`, `x = 4 = 3` and
`\\boxed{4 \\doteq 3}` as 3; the grader does not. Rules, on math-verify's own reading of the answer
(math_reading.read: the span and the sympy objects it compares), first that applies:

  1. fragment: the object is a piece of a span math-verify could not parse (the `3` of `\\boxed{4 \\sim 3}`,
     of `\\boxed{4 = 3} \\boxed{}`), or of LaTeX it read by its last `=` part only → wrong;
  2. false relation: anywhere in the compared object, a relation whose two sides are numbers (a symbol
     named as a number, `\\text{4}`, counts as one) and that is false (`4 = 3`, `{4 = 3}`, `4 \\equiv 3`,
     `4 < 3`), or a chain whose `=`-linked numeric parts disagree (`x = 4 = 3`, `4 = x = 3`) → wrong.
     Numbers agree by math_numbers.sides_agree (exactly when both are exact, else to 6 significant
     digits). Text math-verify read as one symbol whose name holds a relation (`\\mbox{4 = 3}`) is read
     as `$name$` and judged the same way;
  3. plain text: when math-verify read the answer from plain text (no `$`, no box), the formula it ends
     (on its line, the run of symbols, numbers, commands and one-letter names after the last word, with
     the closing brackets after the answer, less leading punctuation and closers: `The answer is 4 := 3.`
     → `4 = 3`) is read as `$formula$` and judged by 1-2.

A true relation keeps math-verify's verdict (`x = 3`, `3 = 3`, `x = 2 + 1 = 3`: their answer is 3).
"""
from __future__ import annotations

import re

from tasks.grading.math_reading import Reading, read

_NUMBER_NAME = re.compile(r"-?\d+(?:\.\d+)?")


def as_number(side):
    """A relation's side with each symbol named as a number (`\\text{4}`, `\\mathbf{4}`: latex2sympy's
    symbol "4") read as that number; other sides unchanged."""
    from sympy import Basic, Symbol, sympify

    if not isinstance(side, Basic):
        return side
    named = {s: sympify(s.name) for s in side.atoms(Symbol) if _NUMBER_NAME.fullmatch(s.name)}
    return side.xreplace(named) if named else side


def _numeric(expr) -> bool:
    return getattr(expr, "is_number", False) is True


def _chains(obj):
    """Each relation chain in `obj` (an `And` of relations, as latex2sympy reads `a = b = c`), in order, and
    each relation on its own."""
    from sympy import And, Basic, preorder_traversal
    from sympy.core.relational import Relational

    if not isinstance(obj, Basic):
        return
    for node in preorder_traversal(obj):
        if isinstance(node, And) and node.args and all(isinstance(a, Relational) for a in node.args):
            yield list(getattr(node, "_unsorted_args", node.args))
        elif isinstance(node, Relational):
            yield [node]


def false_relation(rel) -> bool:
    """A relation between two numbers that does not hold (math_numbers.sides_agree for = and ≠)."""
    from sympy import Eq, Ne, S

    from tasks.grading.math_numbers import sides_agree

    lhs, rhs = as_number(rel.lhs), as_number(rel.rhs)
    if not (_numeric(lhs) and _numeric(rhs)):
        return False
    if isinstance(rel, Eq):
        return not sides_agree(lhs, rhs)
    if isinstance(rel, Ne):
        return sides_agree(lhs, rhs)
    return rel.func(lhs.doit(), rhs.doit()) is S.false


def disagreeing_chain(chain: list) -> bool:
    """An `=`-linked group of a chain has two numeric parts that disagree (`x = 4 = 3`, `4 = x = 3`)."""
    from sympy import Eq

    from tasks.grading.math_numbers import sides_agree

    groups: list[list] = []
    for rel in chain:
        if not isinstance(rel, Eq):
            groups.append([])
            continue
        lhs, rhs = as_number(rel.lhs), as_number(rel.rhs)
        if not groups or not groups[-1] or groups[-1][-1] != lhs:
            groups.append([lhs])
        groups[-1].append(rhs)
    for parts in groups:
        numbers = [p for p in parts if _numeric(p)]
        if any(not sides_agree(numbers[0], n) for n in numbers[1:]):
            return True
    return False


def relation_fault_in(obj) -> str | None:
    """Rule 2 on one compared object: why it is wrong, or None."""
    for chain in _chains(obj):
        for rel in chain:
            if false_relation(rel):
                return f"the answer states {rel}, which is false"
        if len(chain) > 1 and disagreeing_chain(chain):
            return f"the answer's chain {' ; '.join(map(str, chain))} has parts that disagree"
    return text_relation_fault(obj)


_RELATION_SIGN = re.compile(r"[=<>]")


def text_relation_fault(obj) -> str | None:
    """Rules 1-2 on text math-verify read as one symbol (`\\mbox{4 = 3}` is the symbol "4 = 3"): a symbol
    whose name holds a relation sign is read as `$name$` and judged."""
    from sympy import Basic, Symbol

    if not isinstance(obj, Basic):
        return None
    for sym in obj.atoms(Symbol):
        if _RELATION_SIGN.search(sym.name):
            why = reading_fault(read("$" + sym.name + "$"))
            if why:
                return f"in the text {sym.name!r}: {why}"
    return None


def reading_fault(reading: Reading) -> str | None:
    """Rules 1-2 on math-verify's reading."""
    why = reading.fragment()
    if why:
        return why
    for obj in reading.parsed:
        why = relation_fault_in(obj)
        if why:
            return why
    return None


_FORMULA = re.compile(r"(?:[^A-Za-z\n]|\\[A-Za-z]+|(?<![A-Za-z])[A-Za-z](?![A-Za-z]))+$")
_LEADING = re.compile(r"^[\s:;,.!?=)}\]]+")
_CLOSING = re.compile(r"[)}\]]*")


def formula_ending_at(text: str, end: int) -> str:
    """The formula a plain-text answer ends (rule 3): on the line up to `end` and the closing brackets
    right after it, the trailing run of non-letters, commands and one-letter names, less leading
    punctuation and closers; "" when there is none."""
    end = _CLOSING.match(text, end).end()
    line = text[text.rfind("\n", 0, end) + 1:end]
    m = _FORMULA.search(line)
    return _LEADING.sub("", m.group()).strip() if m else ""


def plain_formula_fault(reading: Reading) -> str | None:
    """Rule 3: the formula a plain-text answer ends, read as LaTeX and judged by rules 1-2."""
    if reading.match is None or not reading.plain:
        return None
    start, end = reading.span()
    formula = formula_ending_at(reading.text, end)
    if not formula or formula == reading.text[start:end].strip():
        return None
    why = reading_fault(read("$" + formula + "$"))
    return f"in the formula {formula!r}: {why}" if why else None


def relation_fault(reading: Reading) -> str | None:
    """Why the answer's relations make it wrong (the module's rules), or None."""
    return reading_fault(reading) or plain_formula_fault(reading)
