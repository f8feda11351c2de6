"""Test-format parsing, run plans, test counts and sampling. No Docker."""
import json

import pytest

from sandbox.asserts import AssertTest, Snippet
from sandbox.testcases import (ASSERT, CALL, STDIO, InvalidTests, UnjudgeableTests, count_tests, parse_test_suite,
                               sample_indices)


def test_stdio():
    s = parse_test_suite({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]})
    assert s.mode == STDIO and s.inputs == ("1 2\n", "3\n4\n") and s.outputs == ("3\n", "7")
    assert s.plan([1]) == ([{"stdin": "3\n4\n"}], [0])  # never the expected output


def test_json_string_and_lcb_list_forms():
    s = parse_test_suite(json.dumps({"inputs": ["1"], "outputs": ["1"]}))
    assert s.mode == STDIO
    s = parse_test_suite([{"input": "1\n", "output": "2\n", "testtype": "stdin"}])
    assert s.mode == STDIO and s.outputs == ("2\n",)


def test_call_based():
    s = parse_test_suite({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert s.mode == CALL and s.fn_name == "add" and s.plan([0]) == ([{"args": [1, 2]}], [0])


def test_plan_of_stdio_and_call_suites_is_one_run_per_chosen_test():
    s = parse_test_suite({"inputs": ["a", "b", "c"], "outputs": ["SECRET1", "SECRET2", "SECRET3"]})
    assert s.plan([0, 2]) == ([{"stdin": "a"}, {"stdin": "c"}], [0, 1])
    c = parse_test_suite({"fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [10, 20, 30]})
    assert c.plan([1, 2]) == ([{"args": [2]}, {"args": [3]}], [0, 1])


def test_call_based_livecodebench_json_lines():
    s = parse_test_suite({"fn_name": "f", "inputs": ["[1, 2]\n\"x\""], "outputs": ["[3]"]})
    assert s.inputs == ([[1, 2], "x"],) and s.outputs == ([3],)


# ------------------------------------------------------------------------------------ assert-style
def units(code):
    """The checker's (kind, source) units of a one-snippet suite."""
    (snippet,) = parse_test_suite({"assert_code": code}).programs
    return list(snippet.units)


@pytest.mark.parametrize("tests, mode", [
    ({"assert_code": None, "inputs": ["1\n"], "outputs": ["2\n"]}, STDIO),  # a struct column's other form
    ({"assert_code": None, "fn_name": None, "inputs": ["1\n"], "outputs": ["2\n"]}, STDIO),
    ({"assert_code": "assert f(1) == 2", "inputs": None, "outputs": None, "fn_name": None}, ASSERT),
    ({"assert_code": None, "fn_name": "f", "inputs": [[1]], "outputs": [2]}, CALL),
])
def test_a_null_key_is_an_absent_one(tests, mode):
    assert parse_test_suite(tests).mode == mode
    assert parse_test_suite(json.dumps(tests)).mode == mode


def test_assert_style_is_split_into_setup_and_test_units():
    s = parse_test_suite({"assert_code": "x = 2\nassert f(1) == 2, 'message'\nassert f(x) == 4"})
    assert s.mode == ASSERT and len(s) == 2 and s.outputs is None and s.fn_name is None
    assert s.inputs == (AssertTest(0, 0, "assert f(1) == 2, 'message'"), AssertTest(0, 1, "assert f(x) == 4"))
    assert s.programs == (Snippet((("setup", "x = 2"), ("test", "assert f(1) == 2, 'message'"),
                                   ("test", "assert f(x) == 4")), free=("f",), tested=("f",)),)
    assert s.programs[0].tests == 2


def test_assert_style_test_index_restarts_per_snippet():
    s = parse_test_suite({"assert_code": ["assert f(1) == 1", "x = 2\nassert f(x) == 2\nassert f(3) == 3"]})
    assert len(s) == 3 and len(s.programs) == 2
    assert [(t.snippet, t.unit) for t in s.inputs] == [(0, 0), (1, 0), (1, 1)]  # unit: key of raw["checks"]


def test_assert_style_setup_only_snippet_is_dropped():
    s = parse_test_suite({"assert_code": ["import math", "assert f() == 1", "y = 2"]})
    assert len(s) == 1 and len(s.programs) == 1 and s.inputs[0].snippet == 0
    assert s.programs[0].units == (("test", "assert f() == 1"),)


def test_assert_style_humaneval_check_function_is_inlined():
    code = ("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n\n"
            "check(f)")
    assert units(code) == [("setup", "candidate = f"), ("test", "assert candidate(1) == 2"),
                           ("test", "assert candidate(2) == 3")]  # one test per top-level assert of the body
    assert count_tests({"assert_code": code}) == 2


def test_assert_style_humaneval_check_for_loop_is_one_test_and_helpers_stay():
    code = ("METADATA = {'author': 'x'}\n"
            "def helper(x):\n    return x + 1\n"
            "def check(candidate):\n"
            "    assert candidate(0) == helper(0)\n"
            "    for x in range(5):\n        assert candidate(x) == helper(x)\n"
            "    y = 7\n"
            "    assert candidate(y) == 8\n"
            "check(f)")
    got = units(code)
    assert got == [("setup", "METADATA = {'author': 'x'}"), ("setup", "def helper(x):\n    return x + 1"),
                   ("setup", "candidate = f"), ("test", "assert candidate(0) == helper(0)"),
                   ("test", "for x in range(5):\n    assert candidate(x) == helper(x)"),
                   ("setup", "y = 7"), ("test", "assert candidate(y) == 8")]
    s = parse_test_suite({"assert_code": code})
    assert [t.source for t in s.inputs] == ["assert candidate(0) == helper(0)",
                                            "for x in range(5): assert candidate(x) == helper(x)",
                                            "assert candidate(y) == 8"]


@pytest.mark.parametrize("code", [
    "def check(candidate):\n    assert candidate(1) == 2\ncheck(f)\ncheck(g)",  # called twice
    "def check(candidate, n=1):\n    assert candidate(n) == 2\ncheck(f)",  # a default
    "def check(candidate):\n    assert candidate(1) == 2\ncheck(candidate=f)",  # a keyword argument
    "def check(candidate):\n    assert candidate(1) == 2\n    return True\ncheck(f)",  # a return
])
def test_assert_style_check_function_not_inlinable_is_kept_and_its_calls_are_tests(code):
    got = units(code)
    assert got[0][0] == "setup" and got[0][1].startswith("def check(")  # kept as a function
    assert [kind for kind, _ in got[1:]] == ["test"] * (len(got) - 1) and len(got) >= 2
    assert all(src.startswith("check(") for _, src in got[1:])


@pytest.mark.parametrize("code, tests", [
    ("for i in range(3):\n    assert f(i) == i", 1),  # a loop of asserts: one test
    ("def t():\n    assert f() == 1\nt()\nt()", 2),  # a helper holding the assert: each call a test
    ("def inner(x):\n    assert f(x) == x\ndef outer():\n    inner(1)\nouter()", 1),  # ...called indirectly
    ("assert f(1) == g(1)", 1),  # two program values compared
    ("x = f(0)\nassert f(1) == x", 1),  # an expected value computed by the program
    ("def ref(x):\n    return x * 2\nassert abs(f(3) - ref(3)) < 1e-6", 1),  # computed by the test code
    ("assert f(1) - g(1) == 0", 1),
    ("assert f(1 if x else 2) == 1", 1),
    ("assert all(f(x) for x in [1, 2])", 1),
    ("assert f() == 10 ** 9 + 7\nassert g() == 2 ** 100", 2),
    ("import cmath\nassert cmath.isclose(f(1), 2+3j)", 1),
    ("import operator\nassert operator.eq(f(), 42)", 1),
    ("from operator import eq\nassert eq(f(), 42)", 1),
    ("assert f().__eq__(5)", 1),
    ("assert len(f(3))", 1),
    ("def check(a, b):\n    return a == b\nassert check(f(1), 2)", 1),
    ("close = lambda a, b: abs(a - b) < 1e-9\nassert close(f(1), 0.5)", 1),
    ("assert f(1).equals([1, 2])", 1),
    ("assert max(f(), 5) == 5", 1),
    ("s = Solution()\nassert s.isValid('()')", 1),
    ("assert list(gen(3)) == [0, 1, 2]", 1),
    ("assert sorted(f(), key=len) == ['a', 'bb']", 1),
    ("assert is_prime(7)\nassert not is_prime(8)", 2),
    ("try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass", 1),  # expects an exception
])
def test_assert_style_once_refused_shapes_are_judgeable_now(code, tests):
    # The old host-side rewrite refused these (loops, helpers, computed expectations, foreign predicates);
    # the checker runs the test code as written, so each is judged.
    s = parse_test_suite({"assert_code": code})
    assert len(s) == tests == count_tests({"assert_code": code})


@pytest.mark.parametrize("code", [
    "assert [*f(1)] == [1, 2]", "assert roll() in range(1, 7)",
    "assert f(2).count('a') == 2", "assert cache.get(1) == 1", "s = Solution()\nassert s.isValid('()') == True",
    "assert Solution().twoSum([2, 7], 9) == [0, 1]", "assert sorted(f(), reverse=True) == [3, 1]",
    "assert set(f(1)) - {1} == set()", "import math\nassert math.isclose(f(1), 0.5)",
])
def test_common_honest_shapes_stay_judgeable(code):
    assert len(parse_test_suite({"assert_code": code})) == 1


def test_plan_of_a_multi_snippet_assert_suite_runs_each_needed_snippet_once():
    s = parse_test_suite({"assert_code": ["assert f(0) == 'SECRET0', 'm'",
                                     "assert f(1) == 'SECRET1', 'm'\nassert f(2) == 'SECRET2', 'm'",
                                     "assert f(3) == 'SECRET3', 'm'"]})  # messages: not plain calls
    assert len(s) == 4
    run = [{"units": [list(u) for u in p.units], "free": ["f"], "tested": ["f"]} for p in s.programs]
    assert run[1] == {"units": [["test", "assert f(1) == 'SECRET1', 'm'"], ["test", "assert f(2) == 'SECRET2', 'm'"]],
                      "free": ["f"], "tested": ["f"]}
    tests, runs = s.plan([1, 2, 3])
    assert tests == [run[1], run[2]]
    assert runs == [0, 0, 1]  # tests 1 and 2 share snippet 1's run
    tests, runs = s.plan([0, 3])
    assert tests == [run[0], run[2]] and runs == [0, 1]
    tests, runs = s.plan([2])
    assert tests == [run[1]] and runs == [0]
    json.dumps(s.plan(list(range(len(s)))))  # what goes to the runner is plain JSON


def test_assert_style_plan_holds_the_test_code_only_as_units():
    # The expected values do go to the runner (the checker runs the test code), but as units of test
    # code only: nothing else of the row travels in a run.
    s = parse_test_suite({"assert_code": "assert f(1) == 2, 'm'"})
    assert s.plan([0]) == ([{"units": [["test", "assert f(1) == 2, 'm'"]], "free": ["f"], "tested": ["f"]}], [0])


def test_plain_call_asserts_send_only_the_calls():
    # `assert F(literals) == literal`: the program gets the calls; the expected values stay on the host
    s = parse_test_suite({"assert_code": "def check(candidate):\n    assert candidate(1, (2,)) == 'SECRET'\n"
                                    "    assert not candidate(0, ())\ncheck(f)"})
    assert s.plan([0, 1]) == ([{"calls": [["f", [1, {"__tuple__": [2]}]], ["f", [0, {"__tuple__": []}]]]}], [0, 0])
    assert "SECRET" not in json.dumps(s.plan([0, 1])[0])


@pytest.mark.parametrize("tests, n", [
    ({"inputs": ["1", "2"], "outputs": ["1", "2"]}, 2),
    ({"fn_name": "f", "inputs": [[1]] * 17, "outputs": [1] * 17}, 17),
    ({"assert_code": "assert f(1) == 1\nassert f(2) == 2\nx = 3\nassert f(x) == 3"}, 3),
    ({"assert_code": ["assert f(1) == 1", "assert f(2) == 2\nassert f(3) == 3"]}, 3),
    ({"assert_code": "for i in range(3):\n    assert f(i) == i"}, 1),  # a loop is one test
    ({"assert_code": "def check(candidate):\n    assert candidate(1) == 1\n    for i in range(3):\n"
                     "        assert candidate(i) == i\ncheck(f)"}, 2),
    ({"assert_code": ["import math", "assert f(1) == 1"]}, 1),  # a setup-only snippet counts nothing
    (json.dumps({"inputs": ["1"], "outputs": ["1"]}), 1),
    ({"assert_code": "assert True"}, 0),  # unjudgeable: invalid
    ({"assert_code": "x = 1"}, 0),  # no assert: invalid
    ({"assert_code": "assert (("}, 0),
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
    ({"assert_code": ""}, "is empty"),
    ({"assert_code": ["assert f() == 1", "  \n"]}, "assert_code 1 is empty"),
    ({"assert_code": []}, "non-empty"),
    ({"assert_code": [1]}, "non-empty"),
])
def test_invalid(tests, why):
    with pytest.raises(InvalidTests) as exc:
        parse_test_suite(tests)
    assert why in str(exc.value)


@pytest.mark.parametrize("code, why", [
    ("assert ((", "does not compile"),  # a syntax error
    ("assert f(1) ==", "does not compile"),
    ("x = 1\nreturn x", "does not compile"),  # parses, but does not compile
    ("x = 1", "no assert that tests the program"),  # no assert at all
    (["import math", "y = 2"], "no assert that tests the program"),
    ("class T:\n    def test(self):\n        assert f() == 1\nT().test()", "no assert"),  # a method's is no test
    ("assert True", "no assert that tests the program"),
    ("assert False", "no assert that tests the program"),
    ("x = 1\nassert x == 1", "never uses a name the program defines"),
    ("import math\nassert math.gcd(4, 6) == 2", "never uses a name the program defines"),
    ("def f(x):\n    return x\nassert f(1) == 1", "never uses a name the program defines"),  # its own f
    ("for i in range(3):\n    assert i == i", "never uses a name the program defines"),
    ("assert len([1, 2]) == 2", "no assert that tests the program"),  # builtins only
    (["assert f() == 1", "assert 1 + 1 == 2"], "assert_code 1"),  # which snippet, in the message
])
def test_unjudgeable_assert_snippets_are_invalid_tests(code, why):
    with pytest.raises(UnjudgeableTests) as exc:
        parse_test_suite({"assert_code": code})
    assert why in str(exc.value)
    assert isinstance(exc.value, InvalidTests) and count_tests({"assert_code": code}) == 0


def test_sampling_is_seeded_sorted_and_bounded():
    a = sample_indices(100, 16, seed=0, key="row-1")
    assert len(a) == 16 and a == sorted(a) and len(set(a)) == 16
    assert a == sample_indices(100, 16, seed=0, key="row-1")
    assert a != sample_indices(100, 16, seed=1, key="row-1")
    assert a != sample_indices(100, 16, seed=0, key="row-2")
    assert sample_indices(5, 16, 0, "x") == [0, 1, 2, 3, 4]


def test_submission_round_trips_as_a_row_and_keys_the_sample_by_problem():
    from sandbox import Submission

    s = Submission("p1-3", "def f(): ...", {"fn_name": "f", "inputs": [[1]], "outputs": [1]}, problem_id="p1")
    assert Submission.from_row(s.as_row()) == s and s.sample_key == "p1"
    assert "problem_id" not in Submission("p1", "x", {}).as_row() and Submission("p1", "x", {}).sample_key == "p1"
