"""Math reward, round 4: answers a policy could be paid for although wrong, and honest ones refused.

Gold "3" unless a row says otherwise; every response is `<think>…</think> The answer is …`.

1. A false relation in any spelling math-verify reads as one (`4 \\!= 3`, `4 \\equiv 3`, `4 == 3`, `{4 = 3}`,
   `4 := 3`, `4 \\doteq 3`, `4 \\stackrel{?}{=} 3`) is wrong; a true one (`x = 3`, `3 = 3`, `x := 3`) is not.
2. Relations are judged on math-verify's own reading of the answer (its extraction and its sympy
   objects): an answer math-verify can only read as a fragment of a span it could not parse (the `3`
   of `\\boxed{\\underbrace{4}_{a} = 3}`, of a box followed by an empty one) is wrong, and a box math-verify
   does not see as one (`\\boxed {..}`, `\\fbox{..}`) is read as a box.
3. Numbers: an exact gold (integer, fraction, exact symbolic) is compared exactly, a decimal gold within
   5·10⁻⁶ of its size: `0.0` is not `\\frac{1}{2000000}`.
4. An answer whose parsing or comparison raises is wrong (the reason in the detail), never infra.
5. Scientific notation `1.2e4`, `3e5`, `1.2e-3` is a number; `2e` and `e^{2}` keep Euler's e.
"""
import pytest

from tasks.grading.grade import Outcome
from tasks.grading.math_grader import MathGrader
from tasks.grading.rewards import RewardConfig, reward_from_grade


@pytest.fixture(scope="module")
def grader():
    g = MathGrader(timeout=20)
    yield g
    g.close()


def _grade(grader, answer_text, gold="3"):
    return grader.grade(f"<think>t</think> The answer is {answer_text}", gold)


FALSE_EQUATIONS = [r"4\!=3", r"4\:=3", r"4 := 3", r"4 \equiv 3", r"4 == 3", r"4 \stackrel{?}{=} 3", r"4 \doteq 3",
                   r"\underbrace{4}_{a} = 3", r"{4 = 3}"]


@pytest.mark.parametrize("equation", FALSE_EQUATIONS)
@pytest.mark.parametrize("wrap", ["\\boxed{%s}", "$%s$", "%s."], ids=["boxed", "dollars", "plain"])
def test_a_false_equation_in_any_spelling_is_wrong(grader, equation, wrap):
    """Rule 1: a relation between numbers that is false makes the answer wrong, whatever its spelling."""
    g = _grade(grader, wrap % equation)
    assert g.outcome is Outcome.WRONG, g


@pytest.mark.parametrize("text", [r"\boxed{x = 3}", r"\boxed{3 = 3}", r"\boxed{x := 3}", r"\boxed{x \equiv 3}",
                                  r"\boxed{x = 2 + 1 = 3}", r"\boxed{\sqrt{9} = 3}", r"$x := 3$", "x := 3.",
                                  r"\boxed{x \approx 3}"])
def test_a_true_relation_keeps_its_answer(grader, text):
    assert _grade(grader, text).outcome is Outcome.CORRECT


@pytest.mark.parametrize("text", [r"\boxed {4 = 3}", r"\fbox{4 = 3}", r"\boxed{4 = 3} \boxed{}",
                                  r"\boxed{4 = 3} \boxed{?}", r"$4 = 3$. $\;$", r"\boxed{4 \sim 3}",
                                  r"$4 \cong 3$", r"\boxed{\boxed{4 = 3}}", r"\boxed{4 = 3 \text{ (done)}}"])
def test_relations_are_judged_on_what_math_verify_reads(grader, text):
    """Rule 2: the relation check sees the span and objects math-verify compares; a `3` math-verify could
    only read out of a span it failed to parse is a fragment, not an answer."""
    g = _grade(grader, text)
    assert g.outcome is Outcome.WRONG, g


@pytest.mark.parametrize("text", [r"\boxed {3}", r"\fbox{3}", r"\boxed{3} \text{ and that is all}"])
def test_a_box_math_verify_misses_is_read_as_a_box(grader, text):
    assert _grade(grader, text).outcome is Outcome.CORRECT


@pytest.mark.parametrize("gold", [r"\frac{1}{2000000}", "-10^{-7}", r"\frac{1}{2^{22}}", r"\pi \cdot 10^{-20}"])
def test_zero_is_not_a_tiny_gold(grader, gold):
    """Rule 3: the tolerance is relative to the gold's size (exact golds: none), so 0.0 is no small number."""
    assert _grade(grader, r"\boxed{0.0}", gold).outcome is Outcome.WRONG


@pytest.mark.parametrize("answer, gold, ok", [
    (r"\boxed{0.0000005}", r"\frac{1}{2000000}", True),
    (r"\boxed{5 \times 10^{-7}}", r"\frac{1}{2000000}", True),
    (r"\boxed{\frac{1}{3}}", "0.333333", True),      # decimal gold: within 5e-6 of its size
    (r"\boxed{0.333333}", "0.333333", True),
    (r"\boxed{0.333}", "0.333333", False),
    (r"\boxed{0.333333}", r"\frac{1}{3}", False),    # exact gold: exact
    (r"\boxed{12000.0}", "12000", True),
    (r"\boxed{0.5}", r"\frac{1}{2}", True),
    (r"\boxed{\pi \cdot 10^{-21}}", r"\pi \cdot 10^{-20}", False),
    (r"\boxed{(0.0, 1)}", r"(\frac{1}{2^{22}}, 1)", False),   # inside intervals and tuples too
])
def test_numbers_compare_relative_to_the_gold(grader, answer, gold, ok):
    assert _grade(grader, answer, gold).correct is ok


def test_an_answer_whose_parsing_raises_is_wrong_not_infra(grader):
    """Rule 4: 5,000 repeating digits pass Python's 4,300-digit int limit; that is the answer's doing."""
    text = r"\boxed{0.\overline{" + "3" * 5000 + "}}"
    g = _grade(grader, text)
    assert g.outcome is Outcome.WRONG and "ValueError" in g.detail, g
    assert reward_from_grade("math", f"<think>t</think>{text}", g, RewardConfig()) == -1.0


@pytest.mark.parametrize("answer, gold", [(r"\boxed{1.2e4}", "12000"), (r"\boxed{1.2E4}", "12000"),
                                          (r"\boxed{1.2e-3}", "0.0012"), (r"\boxed{3e5}", "300000"),
                                          ("1.2e4.", "12000"), (r"\boxed{-1e-7}", "-10^{-7}")])
def test_scientific_notation_is_a_number(grader, answer, gold):
    """Rule 5: digits, `e` or `E`, an optionally signed integer, nothing between them: scientific notation."""
    assert _grade(grader, answer, gold).outcome is Outcome.CORRECT


@pytest.mark.parametrize("answer, gold, ok", [(r"\boxed{2e}", r"2\mathrm{e}", True), (r"\boxed{e^{2}}", "e^{2}", True),
                                              (r"\boxed{2e}", "2", False), (r"\boxed{2e - 3}", "2e-3", False),
                                              (r"\boxed{2\mathrm{e}-3}", r"2e - 3", True)])
def test_euler_e_stays_euler(grader, answer, gold, ok):
    assert _grade(grader, answer, gold).correct is ok


# The rules' public parts, in this process (no worker): the number rule, the reading, the relation rules

@pytest.mark.parametrize("gold, answer, same", [
    ("1/3", "0.333333", False), ("1/2", "0.5", True), ("12000", "1.2e4", True), ("0", "-0.0", True),
    ("1/2000000", "0.0", False), ("2**-22", "0.0", False), ("sqrt(2)", "1.414214", False),
    ("0.333333", "1/3", True), ("0.333", "1/3", False), ("5e-7", "4.9999999e-7", True), ("5e-7", "0", False),
    ("1234567", "1234570.0", False), ("10*sqrt(21/2)/27", "5*sqrt(42)/27", True),
])
def test_same_number(gold, answer, same):
    """Exact gold: exactly (each decimal of the answer read as the exact value it writes); decimal gold:
    |answer − gold| ≤ 5·10⁻⁶·|gold|."""
    from sympy import Float, sympify

    from tasks.grading.math_numbers import same_number

    def number(s):
        return Float(s) if "e" in s or "." in s else sympify(s)

    assert same_number(number(gold), number(answer)) is same


@pytest.mark.parametrize("text", [
    r"\boxed{4 \sim 3}", r"$4 = 3$. $\;$", r"\boxed{4 = 3} \boxed{}", r"The answer is 4 = 3.", r"\boxed{{4 = 3}}",
    r"Final answer: $\frac{1}{2}$ and $3$", r"no math", r"\boxed{\underbrace{4}_{a} = 4 = 3}", "(x = 3).",
])
def test_the_reading_is_math_verifys(text):
    """math_reading.read sees exactly what math_verify.parse returns, and says where it read it."""
    from math_verify import parse

    from tasks.grading.math_reading import read

    assert read(text).parsed == parse(text, parsing_timeout=None)


@pytest.mark.parametrize("text, fragment", [
    (r"\boxed{4 \sim 3}", True), (r"\boxed{4 = 3} \boxed{?}", True), (r"\boxed{\underbrace{4}_{a} = 4 = 3}", True),
    (r"\boxed{3}", False), (r"$x = 3$", False), ("The answer is (x = 3).", False),
])
def test_a_fragment_is_a_piece_of_latex_math_verify_could_not_parse(text, fragment):
    from tasks.grading.math_reading import read

    assert (read(text).fragment() is not None) is fragment


@pytest.mark.parametrize("text, gold, ok", [
    (r"\boxed{\text{4} = 3}", "3", False),          # a symbol named "4" is the number 4
    (r"\mbox{4 = 3}", "3", False),                  # text holding a relation is judged as one
    (r"\boxed{4 = x = 3}", "3", False),             # `=`-linked parts agree through a symbol
    (r"\boxed{4 \equiv 3 \pmod{1}}", "3", False),
    (r"\boxed{x \equiv 3 \pmod{5}}", "3", True),    # the modulus dropped: it states 3
    (r"\boxed{3 \pmod{5}}", "3", True),
    (r"\text{The answer is } x = 3", "3", True),
    ("so the area = 4 = 3", "3", False),
    ("Total: 3", "3", True),
    (r"\boxed{x + 0.0}", r"x + 10^{-20}", False),   # math-verify chops differences below 1e-15
    (r"\boxed{0.5x}", r"\frac{x}{2}", True),
    (r"\boxed{\frac{10\sqrt{10.5}}{27}}", r"\frac{5\sqrt{42}}{27}", True),  # each decimal exact before evaluation
])
def test_red_team_neighbours(text, gold, ok):
    from tasks.grading.math_check import reference, verdict

    assert verdict(reference(gold), f"<think>t</think> {text}").correct is ok


def test_a_broken_grader_does_not_start(monkeypatch):
    """Answers that raise are wrong; so a grader whose own code raised on every answer would pay −1 for
    everything. Its warm-up grades known answers and raises instead (the worker then never starts)."""
    from tasks.grading import math_check

    monkeypatch.setattr(math_check, "equal_to_reference", lambda ref, parsed: 1 / 0)
    with pytest.raises(RuntimeError, match="warm-up"):
        math_check.warm_up()


class _RaisingPool:
    """A worker whose grading raises after the reference was read (our catch in math_check missed it)."""

    def stream(self, fn, items, timeout):
        from tasks.grading.timeouts import RemoteError

        for n, (answer, text) in enumerate(items):
            if answer == "bad-reference":
                raise RemoteError("Traceback ...\nKeyError: 'reference'")
            yield "reference", n, True
            if "raise" in text:
                raise RemoteError("Traceback ...\nValueError: Exceeds the limit (4300 digits)")
            yield "answer", n, True, ""

    def close(self):
        pass


def test_an_exception_on_the_answer_is_wrong_and_only_ours_is_infra():
    """Rule 4 at the grader: an exception after the reference was read is the answer's (WRONG, detail);
    one before it is the grader's own (INFRA grader_error)."""
    g = MathGrader(timeout=1)
    g._pool = _RaisingPool()
    got = g.grade_batch([("</think>raise", {"answer": "3"}), ("</think>fine", {"answer": "bad-reference"}),
                         ("</think>fine", {"answer": "3"})])
    assert [(x.outcome, x.verdict) for x in got] == [(Outcome.WRONG, ""), (Outcome.INFRA, "grader_error"),
                                                     (Outcome.CORRECT, "")]
    assert "4300" in got[0].detail
