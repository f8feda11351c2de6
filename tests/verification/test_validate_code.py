"""Code validation against the real sandbox: too few tests, failing reference, missing reference."""
import json

import pyarrow as pa
import pytest

from tasks.curation.schema import PROBLEM_SCHEMA
from tasks.verification.validate_code import count_tests, validate_code_problems


def test_count_tests_forms():
    assert count_tests({"inputs": ["1"] * 3, "outputs": ["1"] * 3}) == 3
    assert count_tests({"fn_name": "f", "inputs": [[1]] * 17, "outputs": [1] * 17}) == 17
    assert count_tests({"assert_code": "assert f(1) == 1\nassert f(2) == 2\nx = 3\nassert f(x) == 3"}) == 3
    assert count_tests({"assert_code": ["assert f(1)", "assert f(2)"]}) == 2


def _row(i, code, tests, domain="code"):
    resp = f"<think>t</think>\n```python\n{code}\n```" if code else "<think>no code</think>"
    return {"id": f"p{i}", "source": "s", "domain": domain, "problem": f"problem {i}", "response": resp,
            "answer": None, "tests": json.dumps(tests)}


@pytest.mark.docker
def test_validation_drops_with_reasons():
    add = {"fn_name": "add", "inputs": [[i, i] for i in range(4)], "outputs": [2 * i for i in range(4)]}
    rows = [
        _row(0, "def add(a, b):\n    return a + b", add),                 # kept
        _row(1, "def add(a, b):\n    return a - b", add),                 # invalid_tests (wrong reference)
        _row(2, "def add(a, b):\n    return a + b", {**add, "inputs": add["inputs"][:2], "outputs": add["outputs"][:2]}),
        _row(3, None, add),                                                  # invalid_tests (no reference)
        {"id": "m", "source": "s", "domain": "math", "problem": "1+1", "response": None, "answer": "2", "tests": None},
    ]
    from tasks.verification.verify import VerifyConfig

    from tasks.verification.worker import close_pools

    try:
        res = validate_code_problems(pa.Table.from_pylist(rows, schema=PROBLEM_SCHEMA), min_tests=3,
                                     verify_config=VerifyConfig(executor="threads", workers=1))
    finally:
        close_pools()  # no warm container may outlive the test
    assert res.problems.column("id").to_pylist() == ["p0", "m"]
    reasons = {d["id"]: d["reason"] for d in res.dropped}
    assert reasons == {"p1": "invalid_tests", "p2": "too_few_tests", "p3": "invalid_tests"}
    assert {v["problem_id"]: v["verdict"] for v in res.verifications} == {"p0": "accepted", "p1": "wrong_answer",
                                                                          "p2": "too_few_tests"}


def test_a_sandbox_fault_fails_the_step_with_the_sandbox_fault(monkeypatch):
    """A reference run that still hits a sandbox fault raises sandbox.container.SandboxFault (the one class
    the CLI catches), never a dropped row."""
    import tasks.verification.validate_code as vc
    from sandbox.container import SandboxFault

    add = {"fn_name": "add", "inputs": [[i, i] for i in range(4)], "outputs": [2 * i for i in range(4)]}
    monkeypatch.setattr(vc, "verify_rows", lambda jobs, cfg, progress=None: [
        {"id": j["id"], "verdict": "sandbox_error", "passed": 0, "total": 0, "reward": None, "details": {}} for j in jobs])
    with pytest.raises(SandboxFault, match="1 of 1 reference runs hit sandbox faults"):
        validate_code_problems(pa.Table.from_pylist([_row(0, "def add(a, b):\n    return a + b", add)],
                                                    schema=PROBLEM_SCHEMA), min_tests=3)


def test_missing_or_malformed_tests_are_dropped_invalid_tests_saying_why():
    """The rules `klear verify` applies to a row's tests (input_rules.py), here for a store's code rows: no
    tests is `missing 'tests'` (not "0 tests < --min-tests"), tests that are not JSON or not a test form
    are dropped with the parser's reason (not an exception that fails the stage). No sandbox run."""
    rows = [dict(_row(0, "print(1)", None), tests=None), dict(_row(1, "print(1)", None), tests="{not json"),
            dict(_row(2, "print(1)", None), tests='{"inputs": 3}')]
    res = validate_code_problems(pa.Table.from_pylist(rows, schema=PROBLEM_SCHEMA), min_tests=1)
    drops = {d["id"]: (d["reason"], d["detail"]) for d in res.dropped}
    assert drops["p0"] == ("invalid_tests", "missing 'tests'")
    assert drops["p1"][0] == "invalid_tests" and drops["p1"][1].startswith("tests is not valid JSON")
    assert drops["p2"] == ("invalid_tests", "tests need `inputs` and `outputs` lists (or `assert_code`)")
    assert res.problems.num_rows == 0
