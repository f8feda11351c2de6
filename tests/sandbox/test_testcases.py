"""Test-format parsing and sampling. No Docker."""
import json

import pytest

from sandbox.testcases import ASSERT, CALL, STDIO, InvalidTests, parse_tests, sample_indices


def test_stdio():
    s = parse_tests({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]})
    assert s.mode == STDIO and s.inputs == ("1 2\n", "3\n4\n") and s.outputs == ("3\n", "7")
    assert s.runner_test(1) == {"stdin": "3\n4\n"}  # never the expected output


def test_json_string_and_lcb_list_forms():
    s = parse_tests(json.dumps({"inputs": ["1"], "outputs": ["1"]}))
    assert s.mode == STDIO
    s = parse_tests([{"input": "1\n", "output": "2\n", "testtype": "stdin"}])
    assert s.mode == STDIO and s.outputs == ("2\n",)


def test_call_based():
    s = parse_tests({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert s.mode == CALL and s.fn_name == "add" and s.runner_test(0) == {"args": [1, 2]}


def test_call_based_livecodebench_json_lines():
    s = parse_tests({"fn_name": "f", "inputs": ["[1, 2]\n\"x\""], "outputs": ["[3]"]})
    assert s.inputs == ([[1, 2], "x"],) and s.outputs == ([3],)


def test_assert_style():
    s = parse_tests({"assert_code": "assert f(1) == 2"})
    assert s.mode == ASSERT and len(s) == 1 and s.outputs is None
    assert len(parse_tests({"assert_code": ["assert 1", "assert 2"]})) == 2


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
])
def test_invalid(tests, why):
    with pytest.raises(InvalidTests, match=None) as exc:
        parse_tests(tests)
    assert why in str(exc.value)


def test_sampling_is_seeded_sorted_and_bounded():
    a = sample_indices(100, 16, seed=0, key="row-1")
    assert len(a) == 16 and a == sorted(a) and len(set(a)) == 16
    assert a == sample_indices(100, 16, seed=0, key="row-1")
    assert a != sample_indices(100, 16, seed=1, key="row-1")
    assert a != sample_indices(100, 16, seed=0, key="row-2")
    assert sample_indices(5, 16, 0, "x") == [0, 1, 2, 3, 4]
