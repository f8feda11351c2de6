"""Raw runner facts -> verdicts, bad rows, submission summary. No Docker (responses are synthetic)."""
import signal

import pytest

from sandbox.config import JudgeConfig, Limits
from sandbox.judge import judge, prepare
from sandbox.testcases import parse_tests
from sandbox.verdicts import SKIPPED, VERDICTS, judge_test as verdict_of, summarize

STDIO = parse_tests({"inputs": ["1\n"], "outputs": ["2\n"]})
CALL = parse_tests({"fn_name": "f", "inputs": [[1]], "outputs": [[1, 2]]})
ASSERT = parse_tests({"assert_code": "assert f() == 1"})


def raw(**kw):
    base = {"exit": 0, "signal": None, "timed_out": False, "output_exceeded": False, "oom": False,
            "cpu": 0.01, "wall": 0.02, "maxrss_kb": 10000, "stdout": "", "stderr": "", "report": None}
    base.update(kw)
    return base


@pytest.mark.parametrize("r, suite, expected", [
    (raw(stdout="2\n"), STDIO, "accepted"),
    (raw(stdout="3\n"), STDIO, "wrong_answer"),
    (raw(exit=1, stderr="Traceback...ValueError", report={"exc": "ValueError"}), STDIO, "runtime_error"),
    (raw(exit=3), STDIO, "runtime_error"),
    (raw(exit=None, signal=signal.SIGSEGV), STDIO, "runtime_error"),
    (raw(exit=None, signal=signal.SIGKILL, timed_out=True), STDIO, "timeout"),
    (raw(exit=None, signal=signal.SIGXCPU, cpu=4.0), STDIO, "timeout"),
    (raw(stdout="2\n", cpu=4.5), STDIO, "timeout"),  # finished, but over the CPU limit
    (raw(exit=1, report={"exc": "MemoryError"}), STDIO, "memory_limit"),
    (raw(exit=None, signal=signal.SIGKILL, oom=True), STDIO, "memory_limit"),
    (raw(exit=None, signal=signal.SIGKILL), STDIO, "runtime_error"),  # killed itself, not OOM
    (raw(exit=None, signal=signal.SIGKILL, output_exceeded=True, stdout="x" * 100), STDIO, "output_limit"),
    (raw(exit=1, report={"compile_error": "SyntaxError: invalid syntax"}), STDIO, "compile_error"),
    (raw(report={"value": [1, 2]}), CALL, "accepted"),
    (raw(report={"value": [2, 1]}), CALL, "wrong_answer"),
    (raw(report={"value": {"__repr__": "<x>", "__type__": "X"}}), CALL, "wrong_answer"),
    (raw(exit=0, report=None), CALL, "runtime_error"),  # exited without returning (os._exit in the solution)
    (raw(exit=1, report={"exc": "TypeError", "stage": "call"}), CALL, "runtime_error"),
    (raw(report={"done": True}), ASSERT, "accepted"),
    (raw(exit=1, report={"exc": "AssertionError", "stage": "tests"}), ASSERT, "wrong_answer"),
    (raw(exit=1, report={"exc": "NameError", "stage": "tests"}), ASSERT, "runtime_error"),
    (raw(exit=0, report=None), ASSERT, "runtime_error"),  # os._exit(0) before the asserts ran
    ({"skipped": True}, STDIO, SKIPPED),
])
def test_judge_test(r, suite, expected):
    verdict, message = verdict_of(r, suite, 0, cpu_limit=4.0)
    assert verdict == expected
    assert verdict in VERDICTS + (SKIPPED,)
    if verdict != "accepted":
        assert message


def test_summarize():
    assert summarize(["accepted", "accepted"], 2) == ("accepted", 2, 1.0)
    assert summarize(["accepted", "wrong_answer", "timeout"], 3) == ("wrong_answer", 1, 1 / 3)
    assert summarize(["timeout", "timeout", SKIPPED, SKIPPED], 4) == ("timeout", 0, 0.0)


def test_prepare_builds_a_job_without_expected_outputs():
    p = prepare({"id": "r", "code": "print(2)", "tests": {"inputs": ["1\n"], "outputs": ["SECRET\n"]},
                 "time_limit": 2})
    assert p.job["mode"] == "stdio" and p.job["tests"] == [{"stdin": "1\n"}]
    assert "SECRET" not in repr(p.job)
    assert p.job["limits"]["cpu_s"] == 2 and p.job["limits"]["wall_s"] == Limits().wall_s(2)


def test_prepare_samples_up_to_max_tests():
    tests = {"inputs": [f"{i}\n" for i in range(40)], "outputs": [f"{i}\n" for i in range(40)]}
    p = prepare({"id": "r", "code": "x", "tests": tests}, JudgeConfig(max_tests=16, seed=3))
    assert len(p.indices) == 16 and len(p.job["tests"]) == 16
    assert p.indices == prepare({"id": "r", "code": "x", "tests": tests}, JudgeConfig(seed=3)).indices


@pytest.mark.parametrize("row, verdict, reason", [
    ({"id": 1, "code": "", "tests": {"assert_code": "assert 1"}}, "compile_error", "no code"),
    ({"id": 1, "tests": {"assert_code": "assert 1"}}, "compile_error", "no code"),
    ({"id": 1, "code": 5, "tests": {"assert_code": "assert 1"}}, "sandbox_error", "code must be a string"),
    ({"id": 1, "code": "x", "tests": "{"}, "sandbox_error", "invalid_tests"),
    ({"id": 1, "code": "x"}, "sandbox_error", "invalid_tests"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}, "language": "java"}, "sandbox_error",
     "unsupported language"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}, "language": "cpp"}, "sandbox_error",
     "stdin/stdout"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}, "time_limit": -1}, "sandbox_error",
     "bad time_limit"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}, "time_limit": "soon"}, "sandbox_error",
     "bad time_limit"),
    ("not a row", "sandbox_error", "bad row"),
])
def test_bad_rows_get_a_verdict_with_a_reason(row, verdict, reason):
    out = prepare(row)
    assert isinstance(out, dict)
    assert out["verdict"] == verdict and reason in out["details"]["reason"]
    assert out["reward"] == (None if verdict == "sandbox_error" else 0.0)


def test_judge_soft_reward_and_first_failure():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2", "3"], "outputs": ["1", "2", "3"]}})
    resp = {"ok": True, "results": [raw(stdout="1"), raw(stdout="0"), raw(stdout="3")], "clean": True}
    out = judge(p, resp)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3)
    assert out["reward"] == pytest.approx(2 / 3)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "wrong_answer", "accepted"]
    assert "line 1" in out["details"]["message"]


def test_judge_compile_error_and_short_response():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2"], "outputs": ["1", "2"]}})
    ce = judge(p, {"results": [raw(exit=1, report={"compile_error": "SyntaxError"})]})
    assert (ce["verdict"], ce["passed"], ce["total"], ce["reward"]) == ("compile_error", 0, 2, 0.0)
    short = judge(p, {"results": [raw(stdout="1")]})
    assert short["verdict"] == "sandbox_error" and short["reward"] is None
    cpp = judge(p, {"compile": {"exit": 1, "stderr": "main.cpp:1: error: x"}, "results": []})
    assert cpp["verdict"] == "compile_error" and "error: x" in cpp["details"]["reason"]
    unsupported = judge(p, {"unsupported": "no g++", "results": []})
    assert unsupported["verdict"] == "sandbox_error"
