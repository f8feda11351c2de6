"""Round 5 of the code reward's classes: the function under test named like a name of LiveCodeBench's import
header (`factorial`, `add`, `permutations`) and reached other than by `assert NAME(args) == …`. The checker
took such a name for a helper and judged the header's function in place of the program's: a program with a
wrong `factorial`, or none, passed its tests (sandbox/asserts.py tested_names). Run on the in-container
runner as a plain subprocess (no Docker); one behaviour per test, each hostile program with its honest twin."""
import pytest

from tests.sandbox.test_runner_local import checks, runner  # noqa: F401 (runner: the fixture)

ADD_ZERO = "def add(a, b):\n    return 0\ndef mult3(x):\n    return 3 * x\n"
ADD_HONEST = "def add(a, b):\n    return a + b\ndef mult3(x):\n    return 3 * x\n"
FACTORIAL_TESTS = "result = factorial(5)\nassert result == 120\nassert trailing_zeros(100) == 24"


def test_a_header_named_function_whose_value_is_bound_first_is_the_programs(runner):
    wrong = "def factorial(n):\n    return -1\ndef trailing_zeros(n):\n    return 24\n"
    assert checks(runner, wrong, FACTORIAL_TESTS)[1] == ["wrong_answer", "accepted"]
    honest = "def factorial(n):\n    return 1 if n < 2 else n * factorial(n - 1)\ndef trailing_zeros(n):\n    return 24\n"
    assert checks(runner, honest, FACTORIAL_TESTS)[1] == ["accepted", "accepted"]


def test_a_program_without_the_header_named_function_under_test_fails_its_tests(runner):
    # `result = factorial(5)` is setup: its NameError fails every test after it
    assert checks(runner, "def trailing_zeros(n):\n    return 24\n", FACTORIAL_TESTS)[1] == ["runtime_error", "runtime_error"]


@pytest.mark.parametrize("shape", [
    "x = add(2, 3)\nassert x == 5",
    "assert add(2, 3) == 5 and add(1, 1) == 2",
    "assert abs(add(2, 3) - 5) < 1e-9",
    "assert str(add(2, 3)) == '5'",
    "assert [add(2, 3)] == [5]",
    "assert (add(2, 3), add(1, 1)) == (5, 2)",
    "assert add(2, 3) + 0 == 5",
    "f = add\nassert f(2, 3) == 2 + 3",
    "assert add(2, 3) == add(1, 0) + 4",
], ids=["bound", "and", "abs", "str", "list", "tuple", "arithmetic", "alias", "both-sides"])
def test_a_header_named_function_under_test_in_any_shape_is_the_programs(runner, shape):
    tests = f"{shape}\nassert mult3(1) == 3"
    assert checks(runner, ADD_ZERO, tests)[1] == ["wrong_answer", "accepted"]
    assert checks(runner, ADD_HONEST, tests)[1] == ["accepted", "accepted"]


def test_a_humaneval_check_called_twice_tests_the_programs_function(runner):
    """`check(add)` twice is not inlined; the function the snippet passes to its own check is under test."""
    tests = "def check(candidate):\n    assert candidate(2, 3) == 5\ncheck(add)\ncheck(add)\nassert mult3(1) == 3"
    assert checks(runner, "def mult3(x):\n    return 3 * x\n", tests)[1][0] == "runtime_error"
    assert checks(runner, ADD_ZERO, tests)[1] == ["wrong_answer", "wrong_answer", "accepted"]
    assert checks(runner, ADD_HONEST, tests)[1] == ["accepted", "accepted", "accepted"]


def test_an_honest_function_named_like_a_header_iterator_is_judged_by_its_own_value(runner):
    """itertools.permutations returns an iterator of tuples; the program's returns the list the test wants."""
    honest = ("def permutations(s):\n    if len(s) <= 1:\n        return [s]\n"
              "    return [c + p for i, c in enumerate(s) for p in permutations(s[:i] + s[i + 1:])]\n"
              "def count(s):\n    return len(permutations(s))\n")
    tests = "r = permutations('ab')\nassert r == ['ab', 'ba']\nassert count('abc') == 6"
    assert checks(runner, honest, tests)[1] == ["accepted", "accepted"]


# ------------------------------------------------ helpers the test code computes with stay the header's
@pytest.mark.parametrize("tests", [
    "expected = sqrt(16)\nassert f(16) == expected",
    "assert f(16) == sqrt(16)",
    "assert all(isclose(a, b) for a, b in zip([f(16)], [4.0]))",
    "assert abs(f(16) - sqrt(16)) < 1e-9",
    "r = f(16)\nassert isclose(r, 4.0)",
    "for x, want in [(16, 4.0)]:\n    got = f(x)\n    assert isclose(got, want)",
    "def check(cmp, got, want):\n    assert cmp(got, want)\ncheck(isclose, f(16), 4.0)\ncheck(isclose, f(16), 4.0)",
], ids=["bound-expected", "facing", "comprehension", "difference", "bound-value", "loop-value", "passed-helper"])
def test_a_program_that_redefines_a_helper_of_the_expected_value_cannot_judge_itself(runner, tests):
    hostile = "def sqrt(x):\n    return 0\ndef isclose(*a, **k):\n    return True\ndef f(x):\n    return 0\n"
    assert set(checks(runner, hostile, tests)[1]) == {"wrong_answer"}
    assert set(checks(runner, "def f(x):\n    return 4.0\n", tests)[1]) == {"accepted"}


@pytest.mark.parametrize("tests", ["assert f(deque([1, 2])) == 3", "assert f(Counter('aab')) == 2"],
                         ids=["deque", "Counter"])
def test_a_header_constructor_of_the_arguments_stays_the_headers(runner, tests):
    """An honest program binds no `deque` of its own: taken for the function under test, it was a NameError."""
    honest = "def f(q):\n    return max(q.values()) if isinstance(q, dict) else sum(q)\n"
    assert checks(runner, honest, tests)[1] == ["accepted"]


# ------------------------------------------------ a function under test named `solution`
SOLUTION_TESTS = "assert solution([5, 8, 7, 1]) == 12, 'odd positions'\nassert solution([3, 3]) == 3, 'two'"


def test_a_function_named_solution_is_called_in_the_program(runner):
    """`solution` is also how test code names the program's module (`import solution`); called, it is the
    program's function of that name."""
    honest = "def solution(xs):\n    return sum(x for x in xs[::2] if x % 2)\n"
    assert checks(runner, honest, SOLUTION_TESTS)[1] == ["accepted", "accepted"]
    assert checks(runner, "def solution(xs):\n    return 12\n", SOLUTION_TESTS)[1] == ["accepted", "wrong_answer"]
    assert checks(runner, "def other(xs):\n    return 12\n", SOLUTION_TESTS)[1] == ["runtime_error", "runtime_error"]


# ------------------------------------------------ the program's objects in a condition: Python's default truth
LINKED = ("class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"
          "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = ListNode(x, head)\n    return head\n")
WALK = "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n    return out\n"


def test_test_code_may_walk_the_programs_linked_list_with_while_node(runner):
    reverse = ("def reverse(head):\n    prev = None\n    while head:\n        head.next, prev, head = prev, head, head.next\n"
               "    return prev\n")
    tests = WALK + "assert to_list(reverse(build([1, 2, 3]))) == [3, 2, 1]"
    assert checks(runner, LINKED + reverse, tests)[1] == ["accepted"]
    assert checks(runner, LINKED + "def reverse(head):\n    return head\n", tests)[1] == ["wrong_answer"]


def test_an_object_whose_type_decides_its_own_truth_still_has_none_in_the_test_code(runner):
    """`__bool__` or `__len__` of the program's own would let it decide the test's conditions."""
    liar = ("class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"
            "    def __bool__(self):\n        return True\n"
            "def build(xs):\n    return ListNode(xs[0]) if xs else None\n")
    assert checks(runner, liar, WALK + "assert to_list(build([1])) == [1]")[1] == ["runtime_error"]
