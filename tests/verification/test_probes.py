"""Probe inputs (pure): near the tests' inputs, in a form the sandbox runs, deterministic, never a test."""
import json

import pytest

from sandbox.testcases import parse_test_suite
from tasks.verification.probes import derive_probes

STDIO = {"inputs": ["3\n1 5 -2\n"], "outputs": ["4\n"]}
CALL = {"fn_name": "f", "inputs": [[[1, 2, 3], "ab", 0]], "outputs": [6]}
ASSERTS = {"assert_code": ["assert f(4) == 16", "assert f(-2) > 0", "assert g(1) == 1", "assert f(x) == 0"]}
CODE = "def f(x):\n    return x * x\n"


def test_stdin_probes_move_one_integer_by_one_keeping_its_sign():
    probes = derive_probes(STDIO, "", limit=100)  # the count `3` is never moved (see below)
    assert sorted(probes["inputs"]) == sorted(["3\n2 5 -2\n", "3\n1 6 -2\n", "3\n1 4 -2\n", "3\n1 5 -3\n",
                                               "3\n1 5 -1\n"])
    assert probes["outputs"] == [""] * len(probes["inputs"])  # placeholders: the host compares two programs


def test_stdin_without_integers_shortens_a_word():
    probes = derive_probes({"inputs": ["hello\n"], "outputs": ["x\n"]}, "", limit=10)
    assert probes["inputs"] == ["hell\n"]


def test_call_probes_change_one_argument():
    probes = derive_probes(CALL, "", limit=100)
    assert probes["fn_name"] == "f" and probes["outputs"] == [None] * len(probes["inputs"])
    got = {json.dumps(a) for a in probes["inputs"]}
    for want in ([[1, 2], "ab", 0], [[3, 2, 1], "ab", 0], [[2, 2, 3], "ab", 0], [[1, 2, 4], "ab", 0],
                 [[1, 2, 3], "a", 0], [[1, 2, 3], "ba", 0], [[1, 2, 3], "ab", 1]):
        assert json.dumps(want) in got
    assert all(sum(a != b for a, b in zip(args, CALL["inputs"][0])) == 1 for args in probes["inputs"])


def test_assert_style_probes_are_the_asserts_calls_then_their_changes():
    probes = derive_probes(ASSERTS, CODE, limit=6)
    assert probes["fn_name"] == "f"  # g is not defined by the reference; `f(x)` has no literal argument
    assert probes["inputs"][:2] == [[4], [-2]]
    assert all(a in ([5], [3], [-3], [-1]) for a in probes["inputs"][2:]) and len(probes["inputs"]) == 6


def test_probes_run_as_tests_and_are_never_a_test_input():
    for tests in (STDIO, CALL):
        probes = derive_probes(tests, CODE, limit=100)
        assert len(parse_test_suite(probes)) == len(probes["inputs"])
        assert not set(map(json.dumps, probes["inputs"])) & set(map(json.dumps, tests["inputs"]))


def test_deterministic_and_capped():
    many = {"inputs": [f"{i} {i + 1}\n" for i in range(1, 30)], "outputs": ["0\n"] * 29}
    a, b = derive_probes(many, "", limit=8, seed=0, key="p"), derive_probes(many, "", limit=8, seed=0, key="p")
    assert a == b and len(a["inputs"]) == 8
    assert derive_probes(many, "", limit=8, seed=1, key="p") != a


def test_nothing_to_derive():
    assert derive_probes({"inputs": ["\n"], "outputs": ["\n"]}, "", limit=8) is None
    assert derive_probes({"assert_code": "assert h(1) == 2"}, CODE, limit=8) is None
    assert derive_probes("not json", CODE, limit=8) is None
    assert derive_probes(STDIO, CODE, limit=0) is None


def test_assert_style_calls_through_an_alias_and_tuples_as_lists():
    check = ("def check(candidate):\n    assert candidate((1, 2)) == 3\n    assert abs(candidate([5]) - 5) < 1e-6\n\n"
             "check(f)\n")
    probes = derive_probes({"assert_code": check}, "def f(xs):\n    return sum(xs)\n", limit=4)
    assert probes["fn_name"] == "f" and probes["inputs"][:2] == [[[1, 2]], [[5]]]


def _lines(text):
    return [line.split() for line in text.split("\n")]


@pytest.mark.parametrize("text, counts", [
    ("4\n7 1 9 3\n", [(0, 0)]),  # n, then n numbers (the reviewer's `a[:n]` program)
    ("2\n3\n5 1 4\n2\n8 6\n", [(0, 0), (1, 0), (3, 0)]),  # T test cases, each with its own n
    ("3 2\n5 1\n4 4\n8 6\n", [(0, 0), (0, 1)]),  # n rows of m numbers
    ("1\n3 8 2 9\n", [(0, 0), (1, 0)]),  # `k a1..ak` on one line
])
def test_stdin_probes_never_move_a_count_of_what_follows(text, counts):
    # a moved count makes a malformed input, on which `a[:n + 1]` and `a[:n]` differ though they agree on
    # every valid one
    probes = derive_probes({"inputs": [text], "outputs": ["0\n"]}, "", limit=100)["inputs"]
    assert probes
    for probe in probes:
        assert [len(w) for w in _lines(probe)] == [len(w) for w in _lines(text)]
        assert all(_lines(probe)[r][c] == _lines(text)[r][c] for r, c in counts), probe


def test_call_probes_keep_a_length_argument_in_step_with_its_list():
    probes = derive_probes({"fn_name": "f", "inputs": [[[5, 1, 4], 3]], "outputs": [0]}, "", limit=100)["inputs"]
    assert probes and all(len(xs) == n == 3 for xs, n in probes)
