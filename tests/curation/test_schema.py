import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.curation.layouts import apply_layout
from tasks.curation.schema import InvalidTestsRow, Malformed, decode_tests, to_problem
from tasks.curation.textnorm import normalize_text, problem_id


def test_id_is_stable_under_case_space_and_nfkc():
    assert problem_id("math", "Compute  ２+2.") == problem_id("math", " compute 2+2. ")
    assert problem_id("math", "x") != problem_id("code", "x")


def test_normalize_text_casefolds_fully():
    assert normalize_text("Straße\u00a0\tX") == "strasse x"


@pytest.mark.parametrize("row, why", [
    ([1, 2], "not a JSON object"),
    ("text", "not a JSON object"),
    ({"answer": "3"}, "missing 'problem'"),
    ({"problem": "   "}, "empty 'problem'"),
    ({"problem": 7}, "problem must be a string"),
    ({"problem": "p", "domain": "physics"}, "unknown domain"),
    ({"problem": "p", "tests": "{not json"}, "tests is not valid JSON"),
    ({"problem": "p", "tests": {"inputs": ["1"], "outputs": []}}, "1 inputs but 0 outputs"),
    ({"problem": "p", "tests": {"fn_name": "f x", "inputs": [[1]], "outputs": [1]}}, "fn_name"),
    ({"problem": "p", "tests": [1]}, "tests must be an object"),
    ({"problem": "p", "tests": {"assert_code": ["ok", ""]}}, "assert_code 1 is empty"),
    ({"problem": "p", "response": ["a"]}, "response must be a string"),
    ({"problem": "p", "answer": [20]}, "answer must be a string or a number, got list"),  # numbers are taken
    ({"problem": "p", "answer": float("nan")}, "answer must be a finite number, got nan"),
    ({"problem": "p", "answer": float("-inf")}, "answer must be a finite number, got -inf"),
    ({"problem": "p", "answer": Decimal("NaN")}, "answer must be a finite number, got NaN"),
    ({"problem": "p", "tests": "[" * 100_000}, "tests is not valid JSON"),
    ({"problem": "p", "tests": '{"inputs": [' + "[" * 200 + "]" * 200 + '], "outputs": ["1"]}'}, "nested deeper"),
    ({"problem": "p", "tests": '{"inputs": ["\\udc00"], "outputs": ["1"]}'}, "lone surrogate"),
    ({"problem": "p", "tests": '{"inputs": [' + "9" * 5000 + '], "outputs": ["1"]}'}, "tests is not valid JSON"),
    ({"problem": "p", "solutions": "print(1)"}, "solutions is not a JSON list"),
    ({"problem": "p", "solutions": {"a": "x"}}, "solutions must be a list of strings, got dict"),
    ({"problem": "p", "solutions": ["ok", 7]}, r"solutions\[1\] must be a string, got int"),
    ({"problem": "p", "solutions": ["x \ud800"]}, "lone surrogate"),
    ({"problem": "p", "date": "21/08/2023"}, r"date must be an ISO date \(YYYY-MM-DD\), got '21/08/2023'"),
    ({"problem": "p", "date": "2023-02-30"}, "date must be an ISO date"),
    ({"problem": "p", "date": 2023}, "date must be an ISO date"),
    ({"problem": "p", "date": "2023-08-21 and more\nlines" * 9}, r"got '2023-08-21 and more\\nlines.*\.\.\.$"),
    ({"problem": "p", "meta": [1]}, "meta must be an object, got list"),
    ({"problem": "p", "meta": "{oops"}, "meta is not valid JSON"),
    ({"problem": "p", "meta": {"x": float("nan")}}, "meta: Out of range float"),
])
def test_malformed_rows_give_a_reason(row, why):
    with pytest.raises(Malformed, match=why):
        to_problem(row, "s")


@pytest.mark.parametrize("assert_code, why", [
    ("expected = 3\nassert 1 + 2 == expected", "never uses a name the program defines"),
    ("assert all(i == i for i in range(3))", "never uses a name the program defines"),
    ("x = add(1, 2)", "no assert that tests the program"),
])
def test_unjudgeable_asserts_are_invalid_tests_not_malformed(assert_code, why):
    """(Asserts in loops, helper functions and computed expected values are judgeable: the checker runs
    the test code itself; tests/sandbox/test_testcases.py.)"""
    with pytest.raises(InvalidTestsRow, match=why) as exc:
        to_problem({"problem": "p", "tests": {"assert_code": assert_code}}, "s")
    assert exc.value.reason == "invalid_tests"


def test_domain_defaults_and_inference():
    assert to_problem({"problem": "p"}, "s").domain == "math"
    assert to_problem({"problem": "p", "tests": {"assert_code": "assert f()"}}, "s").domain == "code"
    assert to_problem({"problem": "p"}, "s", default_domain="code").domain == "code"
    assert to_problem({"problem": "p", "domain": " Math "}, "s").domain == "math"


def test_tests_three_forms_and_canonical_json():
    forms = [
        {"inputs": ["1 2\n"], "outputs": ["3\n"]},
        {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]},
        {"assert_code": "assert add(1, 2) == 3"},
        {"assert_code": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]},
    ]
    for f in forms:
        p = to_problem({"problem": "p", "tests": json.dumps(f)}, "s")
        assert json.loads(p.tests) == f
    assert decode_tests("") is None


def test_optional_solutions_date_and_meta():
    import datetime

    p = to_problem({"problem": "p", "solutions": ["<think>a</think> 1", "  ", "<think>b</think> 1"],
                    "date": datetime.datetime(2024, 5, 6, 7, 8), "meta": '{"z": 1, "a": "é"}'}, "s")
    assert p.solutions == ["<think>a</think> 1", "<think>b</think> 1"] and p.response == p.solutions[0]
    assert (p.date, p.meta) == ("2024-05-06", '{"a": "é", "z": 1}')
    assert to_problem({"problem": "p", "date": datetime.date(2020, 1, 2)}, "s").date == "2020-01-02"
    assert to_problem({"problem": "p", "date": " 2020-01-02T00:00:00Z "}, "s").date == "2020-01-02"
    bare = to_problem({"problem": "p", "solutions": [], "date": "", "meta": {}}, "s")
    assert (bare.solutions, bare.date, bare.meta, bare.response) == (None, None, None, None)
    assert list(bare.as_row()) == ["id", "source", "domain", "problem", "response", "answer", "tests",
                                   "solutions", "date", "meta"]


def test_numeric_answer_kept_as_text():
    assert to_problem({"problem": "p", "answer": 42}, "s").answer == "42"
    assert to_problem({"problem": "p", "answer": 10 ** 30}, "s").answer == "1" + "0" * 30


@pytest.mark.parametrize("value, text", [(Decimal("1.50"), "1.50"), (Decimal("-0.00"), "-0.00"),
                                         (Decimal("1E+2"), "100"), (Decimal("1E-7"), "0.0000001")])
def test_a_decimal_answer_keeps_its_digits(value, text):
    assert to_problem({"problem": "p", "answer": value}, "s").answer == text


def test_numeric_parquet_answers_keep_the_text_they_were_written_as(tmp_path):
    """A DECIMAL(3,2) column (as DuckDB writes `select 1.50`) and a float32 column, through the reader."""
    from tasks.records.sources import read_source

    answers = []
    for name, column in (("decimal", pa.array([Decimal("1.50")], pa.decimal128(3, 2))),
                         ("float32", pa.array([0.1], pa.float32())), ("double", pa.array([0.1], pa.float64()))):
        pq.write_table(pa.table({"problem": ["p"], "answer": column}), tmp_path / f"{name}.parquet")
        (raw,) = read_source(str(tmp_path / f"{name}.parquet"))
        answers.append(to_problem(raw.value, "s").answer)
    assert answers == ["1.50", "0.1", "0.1"]


def test_tests_from_a_parquet_struct_column_holding_two_forms(tmp_path):
    """Arrow gives each row of a struct column every field, the other form's null: each row is its own form,
    stored without the null keys."""
    from tasks.records.sources import read_source

    tests = pa.array([{"assert_code": "assert f(1) == 2", "inputs": None, "outputs": None},
                      {"assert_code": None, "inputs": ["1\n"], "outputs": ["2\n"]}],
                     pa.struct([("assert_code", pa.string()), ("inputs", pa.list_(pa.string())),
                                ("outputs", pa.list_(pa.string()))]))
    pq.write_table(pa.table({"problem": ["assert row", "stdin row"], "tests": tests}), tmp_path / "t.parquet")
    kept = [to_problem(r.value, "s").tests for r in read_source(str(tmp_path / "t.parquet"))]
    assert [json.loads(t) for t in kept] == [{"assert_code": "assert f(1) == 2"},
                                             {"inputs": ["1\n"], "outputs": ["2\n"]}]


def test_layouts_map_common_field_names():
    row = apply_layout({"question": "Q?", "solution": "S"}, "canonical")
    assert (row["problem"], row["response"]) == ("Q?", "S")
    apps = apply_layout({"question": "Q", "solutions": json.dumps(["print(1)"]),
                         "input_output": json.dumps({"inputs": [""], "outputs": ["1\n"]})}, "apps")
    p = to_problem(apps, "apps")
    assert p.domain == "code" and "```python\nprint(1)\n```" in p.response
    deep = apply_layout({"question": "Q", "solutions": "[" * 100_000}, "apps")  # unusable: no response
    assert to_problem(deep, "apps").response is None
    mapped = apply_layout({"q": "Q", "a": 5}, "canonical", {"q": "problem", "a": "answer"})
    assert to_problem(mapped, "s").answer == "5"
