"""Test-format parsing, run plans, test counts and sampling. No Docker."""
import json

import pytest

from sandbox.asserts import AssertCheck
from sandbox.testcases import (ASSERT, CALL, STDIO, InvalidTests, count_tests, parse_tests,
                               sample_indices)


def test_stdio():
    s = parse_tests({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]})
    assert s.mode == STDIO and s.inputs == ("1 2\n", "3\n4\n") and s.outputs == ("3\n", "7")
    assert s.plan([1]) == ([{"stdin": "3\n4\n"}], [0])  # never the expected output


def test_json_string_and_lcb_list_forms():
    s = parse_tests(json.dumps({"inputs": ["1"], "outputs": ["1"]}))
    assert s.mode == STDIO
    s = parse_tests([{"input": "1\n", "output": "2\n", "testtype": "stdin"}])
    assert s.mode == STDIO and s.outputs == ("2\n",)


def test_call_based():
    s = parse_tests({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert s.mode == CALL and s.fn_name == "add" and s.plan([0]) == ([{"args": [1, 2]}], [0])


def test_plan_of_stdio_and_call_suites_is_one_run_per_chosen_test():
    s = parse_tests({"inputs": ["a", "b", "c"], "outputs": ["SECRET1", "SECRET2", "SECRET3"]})
    assert s.plan([0, 2]) == ([{"stdin": "a"}, {"stdin": "c"}], [0, 1])
    c = parse_tests({"fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [10, 20, 30]})
    assert c.plan([1, 2]) == ([{"args": [2]}, {"args": [3]}], [0, 1])


def test_call_based_livecodebench_json_lines():
    s = parse_tests({"fn_name": "f", "inputs": ["[1, 2]\n\"x\""], "outputs": ["[3]"]})
    assert s.inputs == ([[1, 2], "x"],) and s.outputs == ([3],)


def test_assert_style_is_rewritten_into_observations_and_host_checks():
    s = parse_tests({"assert_code": "assert f(1) == 2, 'message'"})
    assert s.mode == ASSERT and len(s) == 1 and s.outputs is None
    (check,) = s.inputs
    assert isinstance(check, AssertCheck)
    assert (check.snippet, check.expr, check.observations) == (0, "__klear_o0 == 2", (0,))
    assert s.programs == ("__observe__(0, lambda: f(1))",)  # no expected value, message or comparison


def test_assert_style_counts_one_test_per_observed_assert():
    s = parse_tests({"assert_code": ["assert f(1) == 1", "x = 2\nassert f(x) == 2\nassert f(3) == 3"]})
    assert len(s) == 3 and len(s.programs) == 2
    assert [c.snippet for c in s.inputs] == [0, 1, 1]
    assert [c.observations for c in s.inputs] == [(0,), (0,), (1,)]  # ids restart per snippet


def test_assert_style_setup_only_snippet_is_dropped():
    s = parse_tests({"assert_code": ["import math", "assert f() == 1"]})
    assert len(s) == 1 and len(s.programs) == 1 and s.inputs[0].snippet == 0


def test_assert_style_humaneval_check_function_is_inlined():
    code = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n\ncheck(f)"
    s = parse_tests({"assert_code": code})
    assert len(s) == 2 and [c.expr for c in s.inputs] == ["__klear_o0 == 2", "__klear_o1 == 3"]
    assert "def check" not in s.programs[0] and "candidate = f" in s.programs[0]


def test_plan_of_a_multi_snippet_assert_suite_runs_each_needed_snippet_once():
    s = parse_tests({"assert_code": ["assert f(0) == 'SECRET0'",
                                     "assert f(1) == 'SECRET1'\nassert f(2) == 'SECRET2'",
                                     "assert f(3) == 'SECRET3'"]})
    assert len(s) == 4
    tests, runs = s.plan([1, 2, 3])
    assert tests == [{"assert_code": s.programs[1]}, {"assert_code": s.programs[2]}]
    assert runs == [0, 0, 1]  # tests 1 and 2 share snippet 1's run
    tests, runs = s.plan([0, 3])
    assert tests == [{"assert_code": s.programs[0]}, {"assert_code": s.programs[2]}] and runs == [0, 1]
    tests, runs = s.plan([2])
    assert tests == [{"assert_code": s.programs[1]}] and runs == [0]
    assert "SECRET" not in repr(s.plan(list(range(len(s)))))  # no expected value ever reaches a run


@pytest.mark.parametrize("tests, n", [
    ({"inputs": ["1", "2"], "outputs": ["1", "2"]}, 2),
    ({"fn_name": "f", "inputs": [[1]] * 17, "outputs": [1] * 17}, 17),
    ({"assert_code": "assert f(1) == 1\nassert f(2) == 2\nx = 3\nassert f(x) == 3"}, 3),
    ({"assert_code": ["assert f(1) == 1", "assert f(2) == 2\nassert f(3) == 3"]}, 3),
    ({"assert_code": "assert True\nassert f(1) == 1"}, 1),  # an assert without an observation is no test
    (json.dumps({"inputs": ["1"], "outputs": ["1"]}), 1),
    ({"assert_code": "for i in range(3):\n    assert f(i) == i"}, 0),  # unjudgeable: invalid
    ({"inputs": ["1"], "outputs": []}, 0),
    (None, 0),
    ("{nope", 0),
])
def test_count_tests(tests, n):
    assert count_tests(tests) == n


@pytest.mark.parametrize("tests, why", [
    ("{nope", "not valid JSON"),
    (None, "must be an object"),
    (42, "must be an object"),
    ({}, "need `inputs` and `outputs`"),
    ({"inputs": ["1"], "outputs": []}, "1 inputs but 0 outputs"),
    ({"inputs": [], "outputs": []}, "no tests"),
    ({"inputs": [1], "outputs": ["1"]}, "input 0 must be a string"),
    ({"fn_name": "f", "inputs": [1], "outputs": [1]}, "must be the argument list"),
    ({"fn_name": "not valid", "inputs": [[1]], "outputs": [1]}, "not a Python identifier"),
    ({"fn_name": "f", "inputs": ["{bad"], "outputs": ["1"]}, "not JSON values"),
    ({"assert_code": "assert (("}, "does not compile"),
    ({"assert_code": ""}, "is empty"),
    ({"assert_code": []}, "non-empty"),
    ({"assert_code": "assert True"}, "no assert that tests the program"),
    ({"assert_code": "assert False"}, "false without the program"),
    ({"assert_code": "for i in range(3):\n    assert f(i) == i"}, "must be top-level"),
    ({"assert_code": "def t():\n    assert f() == 1\nt()\nt()"}, "must be top-level"),
    ({"assert_code": "assert f(1) == g(1)"}, "both come from the program"),
    ({"assert_code": "x = f(0)\nassert f(1) == x"}, "both come from the program"),
    ({"assert_code": "assert f(1 if x else 2) == 1"}, "decides inside the program"),
    ({"assert_code": "assert all(f(x) for x in [1, 2])"}, "decides inside the program"),
    ({"assert_code": "__observe__(0, lambda: 1)\nassert f() == 1"}, "reserved"),
    ({"assert_code": ["assert f() == 1", "x = __klear_o0\nassert f() == 1"]}, "assert_code 1"),
])
def test_invalid(tests, why):
    with pytest.raises(InvalidTests, match=None) as exc:
        parse_tests(tests)
    assert why in str(exc.value)


@pytest.mark.parametrize("code", [
    "def ref(x):\n    return x * 2\nassert abs(f(3) - ref(3)) < 1e-6",
    "assert f(1) - g(1) == 0",
])
def test_two_program_values_combined_by_arithmetic_are_refused(code):
    with pytest.raises(InvalidTests):
        parse_tests({"assert_code": code})


def test_sampling_is_seeded_sorted_and_bounded():
    a = sample_indices(100, 16, seed=0, key="row-1")
    assert len(a) == 16 and a == sorted(a) and len(set(a)) == 16
    assert a == sample_indices(100, 16, seed=0, key="row-1")
    assert a != sample_indices(100, 16, seed=1, key="row-1")
    assert a != sample_indices(100, 16, seed=0, key="row-2")
    assert sample_indices(5, 16, 0, "x") == [0, 1, 2, 3, 4]


def test_powers_are_host_constants_with_a_bound():
    from sandbox.asserts import CheckFailed, evaluate_check

    suite = parse_tests({"assert_code": "assert f() == 10 ** 9 + 7\nassert g() == 2 ** 100"})
    assert len(suite) == 2 and "10 ** 9 + 7" in suite.inputs[0].expr
    assert evaluate_check(suite.inputs[0].expr, {0: 1_000_000_007})
    with pytest.raises(CheckFailed, match="power too large"):
        evaluate_check("__klear_o0 == 10 ** 100000", {0: 1})


@pytest.mark.parametrize("code, why", [
    ("import cmath\nassert cmath.isclose(f(1), 2+3j)", "calls `cmath.isclose`"),
    ("assert cmath.isclose(f(1), 2+3j)", "calls `cmath.isclose`"),  # imported by the program, still foreign
    ("import operator\nassert operator.eq(f(), 42)", "calls `operator.eq`"),
    ("from operator import eq\nassert eq(f(), 42)", "calls `eq`"),
    ("import operator\neq = operator.eq\nassert eq(f(), 42) == True", "calls `eq`"),
    ("assert f().__eq__(5)", "a method of a built-in type"),
    ("assert len(f(3))", "calls `len`"),
    ("def check(a, b):\n    return a == b\nassert check(f(1), 2)", "calls `check`"),
])
def test_a_predicate_from_outside_the_program_is_refused(code, why):
    with pytest.raises(InvalidTests, match="truth is decided in the program's process|decides inside") as exc:
        parse_tests({"assert_code": code})
    assert why in str(exc.value)


@pytest.mark.parametrize("code, values, holds", [
    ("assert is_prime(7)", {0: True}, True),
    ("assert not is_prime(8)", {0: 1}, False),
    ("s = Solution()\nassert s.isValid('()')", {0: True}, True),
    ("assert f('abc').startswith('ab')", {0: "abz"}, True),
    ("assert f('abc').startswith('ab')", {0: "zzz"}, False),
    ("assert f('12').isdigit()", {0: ["1"]}, None),  # not a str: the check fails, never True
    ("assert list(gen(3)) == [0, 1, 2]", {0: [0, 1, 2]}, True),
    ("assert sorted(f(), key=len) == ['a', 'bb']", {0: ["a", "bb"]}, True),
])
def test_the_program_own_answers_and_host_predicates(code, values, holds):
    from sandbox.asserts import CheckFailed, evaluate_check

    (check,) = parse_tests({"assert_code": code}).inputs
    if holds is None:
        with pytest.raises(CheckFailed):
            evaluate_check(check.expr, values)
    else:
        assert evaluate_check(check.expr, values) is holds


def test_submission_round_trips_as_a_row_and_keys_the_sample_by_problem():
    from sandbox import Submission

    s = Submission("p1-3", "def f(): ...", {"fn_name": "f", "inputs": [[1]], "outputs": [1]}, problem_id="p1")
    assert Submission.from_row(s.as_row()) == s and s.sample_key == "p1"
    assert "problem_id" not in Submission("p1", "x", {}).as_row() and Submission("p1", "x", {}).sample_key == "p1"


@pytest.mark.parametrize("code", [
    "import operator\nassert operator.eq(f(), 42) in [True]",
    "import operator\nassert operator.eq(f(), 42) == 1",
    "import operator\nassert (operator.eq(f(), 42),) == (True,)",
    "close = lambda a, b: abs(a - b) < 1e-9\nassert close(f(1), 0.5)",
    "import operator\neq = getattr(operator, 'eq')\nassert eq(f(), 1) == 1",
    "assert f(1).equals([1, 2])",
    "r = f(1)\nassert r.equals([1, 2])",
    "assert f(1).equals([1, 2]) == 1",
    "assert max(f(), 5) == 5",
])
def test_test_values_never_reach_foreign_code_in_the_program_process(code):
    with pytest.raises(InvalidTests):
        parse_tests({"assert_code": code})


@pytest.mark.parametrize("code", [
    "assert [*f(1)] == [1, 2]", "assert roll() in range(1, 7)", "from solution import f\nassert f(1)",
    "assert f(2).count('a') == 2", "assert cache.get(1) == 1", "s = Solution()\nassert s.isValid('()') == True",
    "assert Solution().twoSum([2, 7], 9) == [0, 1]", "assert sorted(f(), reverse=True) == [3, 1]",
    "assert set(f(1)) - {1} == set()", "import math\nassert math.isclose(f(1), 0.5)",
])
def test_common_honest_shapes_stay_judgeable(code):
    assert len(parse_tests({"assert_code": code})) == 1
