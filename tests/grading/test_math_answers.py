"""The text rules applied before math-verify (tasks/grading/math_answers.py), one row per rule or trap."""
import pytest

from tasks.grading.math_answers import answer_span, equality_chain, last_boxed, normalize_answer_text, repeating_decimal


@pytest.mark.parametrize("text, expected", [
    # 1. digits
    ("１０００", "1000"),
    ("٣٤", "34"),                       # Arabic-Indic
    ("३", "3"),                         # Devanagari
    ("x²", "x²"),                       # a superscript is not a decimal digit: kept
    # 2. Euler's e
    ("2\\mathrm{e}", "2e"),
    ("\\text{e}^{x}", "e^{x}"),
    ("{\\rm e}", "e"),
    ("\\mathrm e", "e"),
    ("\\mathrm{exp}", "\\mathrm{exp}"),
    # 3. digit groups
    ("1\\,000", "1000"),
    ("1{,}000", "1000"),
    ("1\\ 000", "1000"),
    ("1~000", "1000"),
    ("1\\thinspace 000", "1000"),
    ("1\u00a0000", "1000"),
    ("1\u2009000\u2009000", "1000000"),
    ("1 000", "1000"),
    ("1 000 000", "1000000"),
    ("-12 345.5", "-12345.5"),
    ("1 2", "1 2"),                     # not 3-digit groups
    ("12 34", "12 34"),
    ("1234 567", "1234 567"),           # a first group of 4 digits
    ("1 2 345", "1 2 345"),             # a list of numbers
    ("1 000 12", "1 000 12"),           # the run goes on with a short group
    ("0.123 456", "0.123 456"),         # after a decimal point
    ("1\\,000 000", "1000 000"),        # one separator per number
    ("3{,}5", "3{,}5"),                 # a decimal comma, not a group
    ("1,000", "1,000"),                 # commas: math-verify's own reading
    # 4. repeating decimals
    ("0.\\overline{3}", "\\frac{1}{3}"),
    ("0.1\\overline{6}", "\\frac{1}{6}"),
    ("1.\\overline{27}", "\\frac{14}{11}"),
    ("0.\\bar{3}", "\\frac{1}{3}"),
    ("0.\\overline 3", "\\frac{1}{3}"),
    ("0.\\dot{3}", "\\frac{1}{3}"),
    ("0.\\dot{1}4\\dot{2}", "\\frac{142}{999}"),
    ("0.\\overline{9}", "1"),
    ("\\boxed{0.\\overline{3}}", "\\boxed{\\frac{1}{3}}"),   # the box's brace stays
    ("-0.\\overline{3}", "-\\frac{1}{3}"),
    # 5. a period ending a number
    ("\\boxed{3.}", "\\boxed{3}"),
    ("The answer is 3.", "The answer is 3"),
    ("$3.$", "$3$"),
    ("3.5", "3.5"),
    ("x.", "x."),
    # untouched
    ("x = 4 = 3", "x = 4 = 3"),
    ("\\frac{1}{2}", "\\frac{1}{2}"),
])
def test_normalize_answer_text(text, expected):
    assert normalize_answer_text(text) == expected


def test_repeating_decimal_formula():
    from fractions import Fraction

    assert repeating_decimal("0", "", "3") == Fraction(1, 3)
    assert repeating_decimal("2", "1", "6") == Fraction(13, 6)
    assert repeating_decimal("", "", "142857") == Fraction(1, 7)


@pytest.mark.parametrize("text, span", [
    ("so \\boxed{x = \\frac{1}{2}} and \\boxed{4 = 3}", "4 = 3"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ("we have $a = 1$ and $x = 4 = 3$.", "x = 4 = 3"),
    ("\\[ y = 2 \\]", " y = 2 "),
    ("The answer is x = 4 = 3.", "x = 4 = 3"),
    ("Hence 2x + 1 = 7", "2x + 1 = 7"),
    ("The answer is seven", "The answer is seven"),
    ("", ""),
])
def test_answer_span(text, span):
    assert answer_span(text) == span


@pytest.mark.parametrize("span, parts", [
    ("x = 4 = 3", ["x", "4", "3"]),
    ("4 = 3", ["4", "3"]),
    ("f(x=1) = 2", ["f(x=1)", "2"]),
    ("\\{a = 1\\}", []),
    ("x \\le 3", []),
    ("a <= b", []),
    ("a >= b", []),
    ("a != b", []),
    ("a == b", []),
    ("a := 3", []),
    ("= 3", []),
    ("3", []),
])
def test_equality_chain(span, parts):
    assert equality_chain(span) == parts


def test_last_boxed_balances_braces():
    assert last_boxed(r"x \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed("none") is None and last_boxed(None) is None
    assert last_boxed(r"\boxed{3} and a cut-off \boxed{4") == "3"  # the last one that closes
