"""When two numbers are the same answer: the grader's rule, in place of math-verify's "both rounded to 6
decimals" (which made `0.0` equal every gold below 5·10⁻⁷: `\\frac{1}{2000000}`, `2^{-22}`).

    exact gold (no decimal in it: integers, fractions, `\\sqrt{2}`, `\\pi/10^{20}`):
        same(gold, answer) ⇔ gold = exact(answer)          exact(answer): each decimal in the answer read
                                                             as the exact value it writes (0.5 = 1/2, 12000.0 = 12000)
    decimal gold (a decimal in it: `0.333333`, `2.5`, `1.5\\%`):
        same(gold, answer) ⇔ |answer − gold| ≤ 5·10⁻⁶·|gold|

Why: an exact gold states the value itself, so only that value is it (`0.333333` is not 1/3, `0.0` is not
1/2000000, `1234570.0` is not 1234567); a decimal gold is often a rounding (of 1/3, of √2), and 5·10⁻⁶ is
the largest relative error of a 6-significant-digit rounding, so an answer that agrees with it to 6
significant digits is it, however small or large the gold. Neither rule has an absolute floor, so a
tiny gold is never swallowed by a tolerance. "Exact" equality of two exact numbers is decided
numerically at 50 digits: equal when they differ by at most 10⁻⁴⁰ of their size (a gold no decimal can
write exactly, like √2, is then never equal to a decimal).

`numeric_eq` is a drop-in for math-verify's `sympy_numeric_eq` (gold first, as math-verify calls it),
which math-verify reaches for numbers, for the elements of sets, tuples, intervals and matrices, and for
the sides of relations; `number_rule()` puts it in place for one comparison. Expressions with free
symbols keep math-verify's own comparison, except that an exact gold and an answer differing by a
nonzero number (`x + 10^{-20}` and `x`) are not equal (math-verify chops differences below 10⁻¹⁵).
`sides_agree` is the same rule without a gold, for the two sides of a relation the answer states
(math_relations.py).
"""
from __future__ import annotations

from contextlib import contextmanager

DECIMAL_REL_TOL = 5e-6  # decimal gold: agreement to 6 significant digits
EXACT_DIGITS = 50  # exact comparison: evaluated to this many digits …
EXACT_REL_TOL = 1e-40  # … and equal within this fraction of the size


def is_decimal(expr) -> bool:
    """True when a decimal (sympy Float) occurs in `expr`."""
    from sympy import Float

    return hasattr(expr, "has") and bool(expr.has(Float))


def exact(expr):
    """`expr` with each decimal replaced by the exact value it writes (0.5 → 1/2, 1.2e4 → 12000)."""
    from sympy import Float, Rational

    if not is_decimal(expr):
        return expr
    if isinstance(expr, Float):
        return Rational(str(expr)) if expr.is_finite else expr
    return expr.xreplace({f: Rational(str(f)) for f in expr.atoms(Float) if f.is_finite})


def _value(expr):
    """The number an expression stands for (a percentage unwrapped, unevaluated parts evaluated)."""
    try:
        return expr.doit()
    except Exception:
        return expr


def _magnitude(expr, digits: int):
    from sympy import Abs

    return Abs(expr).evalf(digits)


def _infinite_or_nan(*exprs) -> bool:
    from sympy import nan, zoo

    return any(e.has(nan, zoo) or getattr(e, "is_infinite", False) for e in exprs)


def exactly_equal(a, b) -> bool:
    """Two exact numbers are equal: structurally, or within 10⁻⁴⁰ of their size at 50 digits."""
    if a == b:
        return True
    if _infinite_or_nan(a, b):
        return False
    diff = _magnitude(a - b, EXACT_DIGITS)
    size = max(_magnitude(a, EXACT_DIGITS), _magnitude(b, EXACT_DIGITS))
    return bool(diff <= EXACT_REL_TOL * size)


def within(a, b, rel: float, size) -> bool:
    """|a − b| ≤ rel·size, evaluated to 30 digits."""
    if _infinite_or_nan(a, b):
        return a == b
    return bool(_magnitude(a - b, 30) <= rel * _magnitude(size, 30))


def same_number(gold, answer) -> bool:
    """The module's rule: exact gold → exact; decimal gold → within 5·10⁻⁶ of the gold's size."""
    if is_decimal(gold):
        gold = _value(gold)
        return within(gold, _value(answer), DECIMAL_REL_TOL, gold)
    return exactly_equal(_value(gold), _value(exact(answer)))  # exact first: `\sqrt{10.5}` is √(21/2)


def sides_agree(a, b) -> bool:
    """Two numeric sides of a relation are equal: exactly when both are exact, else within 5·10⁻⁶ of the
    larger one's size."""
    a, b = _value(a), _value(b)
    if is_decimal(a) or is_decimal(b):
        from sympy import Abs, Max

        return within(a, b, DECIMAL_REL_TOL, Max(Abs(a), Abs(b)))
    return exactly_equal(a, b)


def _numbers(*exprs) -> bool:
    from sympy import Basic

    return all(isinstance(e, Basic) and e.is_number for e in exprs)


def _pct_integers(gold, answer) -> bool:
    """math-verify's `9% == 9`: both an integer, one of them as a percentage; kept as math-verify has it."""
    from math_verify.grader import is_atomic_or_pct_atomic
    from sympy import Integer

    return is_atomic_or_pct_atomic(gold, Integer) and is_atomic_or_pct_atomic(answer, Integer)


def numeric_eq(gold, answer, float_rounding: int, numeric_precision: int) -> bool:
    """math-verify's `sympy_numeric_eq` with the module's rule for numbers (see the module docstring)."""
    from math_verify import grader
    from sympy import MatrixBase
    from sympy.matrices.expressions import MatrixExpr

    if isinstance(gold, (MatrixBase, MatrixExpr)) and isinstance(answer, (MatrixBase, MatrixExpr)):
        gold, answer = grader.safe_sympy_doit(gold), grader.safe_sympy_doit(answer)
        if isinstance(gold, MatrixBase) and isinstance(answer, MatrixBase) and gold.shape == answer.shape:
            return all(numeric_eq(g, a, float_rounding, numeric_precision) for g, a in zip(gold.flat(), answer.flat()))
        return False
    if _numbers(gold, answer):
        if _pct_integers(gold, answer):
            return _MATH_VERIFY_NUMERIC_EQ(gold, answer, float_rounding, numeric_precision)
        return same_number(gold, answer)
    if _exact_expressions_differ_by_a_number(gold, answer):
        return False
    return _MATH_VERIFY_NUMERIC_EQ(gold, answer, float_rounding, numeric_precision)


def _exact_expressions_differ_by_a_number(gold, answer) -> bool:
    """An exact gold with symbols and an answer whose difference from it is a nonzero number
    (`x + 10^{-20}` and `x`): math-verify's evaluation would chop it to 0 (an absolute 10⁻¹⁵ floor)."""
    from sympy import Basic

    if not (isinstance(gold, Basic) and isinstance(answer, Basic)) or is_decimal(gold):
        return False
    from sympy import S

    diff = gold - exact(answer)
    return _numbers(diff) and not exactly_equal(_value(diff), S.Zero)


_MATH_VERIFY_NUMERIC_EQ = None


@contextmanager
def number_rule():
    """math-verify compares numbers with `numeric_eq` inside the block (this process, this thread: the
    grading worker runs one comparison at a time)."""
    global _MATH_VERIFY_NUMERIC_EQ
    from math_verify import grader

    if _MATH_VERIFY_NUMERIC_EQ is None:
        _MATH_VERIFY_NUMERIC_EQ = grader.sympy_numeric_eq
    grader.sympy_numeric_eq = numeric_eq
    try:
        yield
    finally:
        grader.sympy_numeric_eq = _MATH_VERIFY_NUMERIC_EQ
