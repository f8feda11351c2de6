"""The text rules applied before math-verify (tasks/grading/math_answers.py), one row per rule or trap."""
import pytest

from tasks.grading.math_answers import last_boxed, normalize_answer_text, repeating_decimal


@pytest.mark.parametrize("text, expected", [
    # 1. digits
    ("１０００", "1000"),
    ("٣٤", "34"),                       # Arabic-Indic
    ("३", "3"),                         # Devanagari
    ("x²", "x²"),                       # a superscript is not a decimal digit: kept
    # 2. boxes math-verify does not see
    ("\\boxed {4 = 3}", "\\boxed{4 = 3}"),
    ("\\boxed\n{3}", "\\boxed{3}"),
    ("\\fbox{3}", "\\boxed{3}"),
    # 3. scientific notation
    ("1.2e4", "12000"),
    ("1.2E+04", "12000"),
    ("1.2e-3", "0.0012"),
    ("3e5", "300000"),
    ("-1e-7", "-0.0000001"),
    ("\\boxed{1.2e4}.", "\\boxed{12000}."),
    ("1.2e4.", "12000"),                # then rule 8 drops the sentence's period
    ("1e999", "1 \\times 10^{999}"),     # past 10^400: no 1000-digit string
    ("2e", "2e"),                       # Euler's e: no exponent
    ("e^{2}", "e^{2}"),
    ("2e - 3", "2e - 3"),               # spaces: Euler's e
    ("2\\mathrm{e}-3", "2e-3"),          # written as Euler's e (rule 3 runs before rule 4)
    ("x1e5", "x1e5"),                   # part of a name
    ("2e3x", "2e3x"),
    ("1e5^2", "1e5^2"),
    ("1.5e2.5", "1.5e2.5"),
    # 4. Euler's e
    ("2\\mathrm{e}", "2e"),
    ("\\text{e}^{x}", "e^{x}"),
    ("{\\rm e}", "e"),
    ("\\mathrm e", "e"),
    ("\\mathrm{exp}", "\\mathrm{exp}"),
    # 5. equals signs latex2sympy cannot parse
    ("4 := 3", "4 = 3"),
    ("x =: 3", "x = 3"),
    ("x \\coloneqq 3", "x = 3"),
    ("4 \\doteq 3", "4 = 3"),
    ("4 \\stackrel{?}{=} 3", "4 = 3"),
    ("4 \\overset{def}{=} 3", "4 = 3"),
    ("4\\:=3", "4\\:=3"),                # a spacing command before `=`, not a definition
    # 6. digit groups
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
    # 7. repeating decimals
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
    # 8. a period ending a number
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


def test_last_boxed_balances_braces():
    assert last_boxed(r"x \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed("none") is None and last_boxed(None) is None
    assert last_boxed(r"\boxed{3} and a cut-off \boxed{4") == "3"  # the last one that closes
