"""bench/real_solutions.py: dataset problems -> rows in three test forms + broken variants, judged
against bare runs. Unit tests need nothing; the fixture run needs Docker; the full run needs the data.

The fixture (tests/verification/data/mbpp_sample.jsonl) is 30 MBPP problems, CC-BY-4.0 (see the
README there). The full datasets are not in the repository: set KLEAR_MBPP=/path/mbpp.jsonl and/or
KLEAR_HUMANEVAL=/path/HumanEval.jsonl.gz to run the slow test on them.
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benches import load_bench

from tests.verification.test_verify import _docker_ok

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "data" / "mbpp_sample.jsonl"


rs = load_bench("real_solutions")

ROW = {"task_id": 7, "test_setup_code": "",
       "code": "def half_sum(xs, k):\r\n\tif k < 0:\r\n\t\treturn None\r\n\treturn [x // 2 for x in xs][:k]",
       "test_list": ["assert half_sum([4, 6, 9], 2) == [2, 3]", "assert half_sum([], 1)==([])",
                     "assert half_sum((1,), 1) == [0]"]}


# --------------------------------------------------------------------------------------- parsing
def test_plain_call_asserts_become_call_tests():
    calls = rs.plain_calls(["assert f([1, 2], 'a') == (3, [4])", "assert f(-1, None)==True"], {"f"})
    assert calls == [([[1, 2], "a"], [3, [4]]), ([-1, None], True)]


@pytest.mark.parametrize("src", [
    "assert f(1) != 2",  # not ==
    "assert g(1) == 2",  # another function
    "assert f(x=1) == 2",  # keywords
    "assert f((1, 2)) == 3",  # a tuple argument would come back from JSON as a list
    "assert f({1, 2}) == 3",  # a set does not survive JSON
    "assert f(1) == {1: 2}",  # non-string keys do not either
    "assert f(1) == float('inf')",  # not a literal
    "assert abs(f(1) - 2) < 1e-6",
    "x = f(1)\nassert x == 2",
])
def test_anything_else_is_not_a_plain_call(src):
    assert rs.plain_calls([src], {"f"}) is None


def test_humaneval_check_function_as_calls():
    test = ("METADATA = {}\n\ndef check(candidate):\n    assert True, 'debug marker'\n"
            "    assert candidate([1.5, 2], 3) == [2, 1], 'msg'\n    assert candidate([], 0) == []\n")
    assert rs.humaneval_calls(test, "f") == [([[1.5, 2], 3], [2, 1]), ([[], 0], [])]
    loop = "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == x\n"
    assert rs.humaneval_calls(loop, "f") is None


def test_mbpp_row_in_three_forms():
    (p,) = rs.mbpp_problems([ROW])
    assert p.entry == "half_sum" and p.calls is None  # the tuple argument keeps it assert-only
    (p,) = rs.mbpp_problems([dict(ROW, test_list=ROW["test_list"][:2])])
    cases = rs.cases_for(p, "reference", p.code, index=1)
    assert [c.form for c in cases] == ["assert", "call", "stdio"]
    assert cases[0].row["tests"] == {"assert_code": ROW["test_list"][:2]}
    assert cases[1].row["tests"] == {"fn_name": "half_sum", "inputs": [[[4, 6, 9], 2], [[], 1]], "outputs": [[2, 3], []]}
    assert "class Solution" in cases[1].row["code"]  # odd positions exercise the class Solution path
    assert cases[2].row["tests"] == {"inputs": ["[4, 6, 9]\n2\n", "[]\n1\n"], "outputs": ["2 3\n", "\n"]}
    # setup code goes in front of every assert, and keeps the problem out of the call form
    (p,) = rs.mbpp_problems([dict(ROW, test_setup_code="xs = [4]")])
    assert p.asserts[0].startswith("xs = [4]\n") and p.calls is None


def test_stdio_format_and_program_agree():
    assert rs.stdio_format([[1, 2.5], [3]]) == "1 2.5\n3"
    assert rs.stdio_format({"a": 1}) is None
    program = rs.stdio_program("def f(a, b):\n    return [a, b]", "f")
    out = subprocess.run([rs.BARE_PYTHON, "-c", program], input="[1, 2]\n[3.5]\n", capture_output=True, text=True)
    assert out.stdout == rs.stdio_format([[1, 2], [3.5]]) + "\n" == "1 2\n3.5\n"


# ------------------------------------------------------------------------------------- mutations
CODE = "def f(xs):\n    '''Doc 1.'''\n    best = 0\n    for x in xs:\n        if x > best:\n            best = x\n    return best"


def test_mutations_are_deterministic_and_change_the_entry_function():
    one = rs.off_by_one(CODE, "f")
    assert "best = 1" in one and '"""Doc 1."""' in one  # the constant in the docstring is not touched
    assert "x <= best" in rs.swap_comparison(CODE, "f")
    wrong = rs.wrong_return(CODE, "f")
    assert "return _klear_wrong(best)" in wrong and rs.wrong_return(CODE, "f") == wrong
    assert rs.renamed("def g(n):\n    return g(n - 1) if n else 0", "g", "f") == \
        "def f(n):\n    return f(n - 1) if n else 0"
    for code in (one, wrong):
        ast.parse(code)


def test_wrong_value_differs_for_every_type():
    ns = {}
    exec(rs.WRONG_VALUE, ns)
    for value in (True, 0, 2.5, "s", [1], (), {1}, {"a": 1}, None):
        assert ns["_klear_wrong"](value) != value


def test_each_problem_gets_one_mutant_rotating_kinds():
    problems = rs.mbpp_problems([dict(ROW, task_id=i, test_list=ROW["test_list"][:2]) for i in range(4)] +
                                [{"task_id": 9, "test_setup_code": "", "code": "def other(n):\n    return n",
                                  "test_list": ["assert other(1) == 1"]}])
    rs.add_mutations(problems)
    kinds = [list(p.mutations) for p in problems]
    assert all(len(k) == 1 for k in kinds)
    assert [k[0] for k in kinds[:4]] == list(rs.MUTATIONS)
    assert "def half_sum(n)" in problems[3].mutations["other_solution"]


# ------------------------------------------------------------------------------ real sandboxes
@pytest.mark.docker
@pytest.mark.slow
def test_fixture_references_accepted_and_mutants_rejected():
    """30 MBPP problems x three forms, reference and mutant: the sandbox agrees with bare runs."""
    if not _docker_ok():
        pytest.skip("no Docker engine")
    from concurrent.futures import ThreadPoolExecutor

    from sandbox.config import Limits
    from tasks.verification import VerifyConfig, verify_rows

    problems = rs.mbpp_problems(rs.read_jsonl(FIXTURE))
    rs.add_mutations(problems)
    cases = rs.build_cases(problems)
    assert {c.form for c in cases} == set(rs.FORMS) and len(cases) >= 150
    limits = Limits()
    with ThreadPoolExecutor(2) as ex:
        bare = list(ex.map(lambda c: rs.run_bare(c, limits.time_limit_s, limits.memory), cases))
    results = verify_rows([c.row for c in cases], VerifyConfig(workers=2))
    report = rs.compare(cases, results, bare, flaky={})
    assert report["disagreements"] == []
    # 414 returns 0/1 for False/True: its printed (stdin/stdout) form fails, bare and in the sandbox alike
    assert [(e["id"], e["bare"], e["sandbox"]) for e in report["data_issues"]] == [
        ("mbpp/414/stdio/reference", "wrong_answer", "wrong_answer")]
    assert report["reference"]["accepted"] == report["reference"]["total"] >= 80
    assert report["broken"]["rejected"] == report["broken"]["total"] >= 70
    assert report["verdicts"]["broken"]["sandbox_error"] == 0


@pytest.mark.docker
@pytest.mark.slow
def test_full_datasets_through_the_cli(tmp_path):
    paths = [os.environ.get("KLEAR_MBPP"), os.environ.get("KLEAR_HUMANEVAL")]
    if not any(p and Path(p).exists() for p in paths):
        pytest.skip("set KLEAR_MBPP=/path/mbpp.jsonl and/or KLEAR_HUMANEVAL=/path/HumanEval.jsonl.gz "
                    "(google-research mbpp/mbpp.jsonl, openai/human-eval data/HumanEval.jsonl.gz)")
    if not _docker_ok():
        pytest.skip("no Docker engine")
    args = [sys.executable, str(ROOT / "bench" / "real_solutions.py"), "--out", str(tmp_path / "report.json")]
    for flag, path in zip(("--mbpp", "--humaneval"), paths):
        if path and Path(path).exists():
            args += [flag, path]
    subprocess.run(args, check=True, timeout=3600)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["disagreements"] == []
    assert report["reference"]["accepted"] == report["reference"]["total"]
    assert report["broken"]["rejected"] == report["broken"]["total"]
