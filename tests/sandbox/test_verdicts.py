"""Raw runner facts -> verdicts, bad rows, submission summary. No Docker (responses are synthetic)."""
import base64
import dataclasses
import json
import signal

import pytest

from sandbox.config import JudgeConfig, Limits
from sandbox.judge import judge, prepare
from sandbox.testcases import parse_test_suite
from sandbox.verdicts import (INVALID_TESTS, SANDBOX_ERROR, SKIPPED, UNSCORED, VERDICTS, judge_test as verdict_of,
                              program_output, result_row, stdout_text, summarize)

STDIO = parse_test_suite({"inputs": ["1\n"], "outputs": ["2\n"]})
CALL = parse_test_suite({"fn_name": "f", "inputs": [[1]], "outputs": [[1, 2]]})

def checker_suite(tests):
    """An assert-style suite whose snippets all go to the checker (plain calls included)."""
    suite = parse_test_suite(tests)
    return dataclasses.replace(suite, programs=tuple(dataclasses.replace(p, calls=None) for p in suite.programs))

ASSERT = checker_suite({"assert_code": "assert f() == 1"})  # one test: unit 0 of snippet 0
TWO = checker_suite({"assert_code": "assert f(1) == 1\nx = 2\nassert f(x) == 2"})  # one run, two scored tests
ASSERTS = "assert f() == 1"  # a valid assert-style row for the bad-row cases
OK = {"ok": True}


def raw(**kw):
    base = {"exit": 0, "signal": None, "timed_out": False, "output_exceeded": False, "oom": False,
            "cpu": 0.01, "wall": 0.02, "maxrss_kb": 10000, "stdout": "", "stderr": "", "report": None}
    base.update(kw)
    return base


def checked(*entries, **kw):
    """Raw facts of an assert-style run whose checker reported these entries for tests 0, 1, ... (None:
    no entry for that test)."""
    checks = {str(i): e for i, e in enumerate(entries) if e is not None}
    return raw(checks=checks, **kw)


def wrong(message="assertion failed"):
    return {"verdict": "wrong_answer", "message": message}


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
    (raw(exit=1, compile_error="SyntaxError: invalid syntax"), STDIO, "compile_error"),  # the runner's
    (raw(exit=1, report={"compile_error": "SyntaxError: forged"}), STDIO, "runtime_error"),  # the program's
    (raw(report={"value": [1, 2]}), CALL, "accepted"),
    (raw(report={"value": [2, 1]}), CALL, "wrong_answer"),
    (raw(report={"value": {"__repr__": "<x>", "__type__": "X"}}), CALL, "wrong_answer"),
    (raw(exit=0, report=None), CALL, "runtime_error"),  # exited without returning (os._exit in the solution)
    (raw(exit=1, report={"exc": "TypeError", "stage": "call"}), CALL, "runtime_error"),
    (raw(report={"value": {"__tuple__": [1, 2]}}), CALL, "accepted"),  # tuples read as lists
    (raw(report={"value": {"__int__": "zz"}}), CALL, "wrong_answer"),  # malformed tag: Opaque
    # assert-style: the checker's entry for the test decides
    (checked(OK), ASSERT, "accepted"),
    (checked(wrong()), ASSERT, "wrong_answer"),
    (checked({"verdict": "runtime_error", "message": "the program raised ZeroDivisionError"}), ASSERT,
     "runtime_error"),
    (checked({"verdict": "memory_limit", "message": "MemoryError in the program"}), ASSERT, "memory_limit"),
    (checked({"verdict": "accepted", "message": "forged"}), ASSERT, "runtime_error"),  # only "ok" passes
    (checked({"verdict": "timeout", "message": "x"}), ASSERT, "runtime_error"),  # not a checker verdict
    (checked({"ok": 1}), ASSERT, "runtime_error"),  # ok must be True itself
    (checked({"ok": "true"}), ASSERT, "runtime_error"),
    (checked({}), ASSERT, "runtime_error"),
    (checked(OK, exit=None, signal=signal.SIGKILL), ASSERT, "accepted"),  # killed after its tests were done
    # gone: the program stopped answering -> the program's crash verdict
    (checked({"gone": "gone"}, exit=1, report={"exc": "ZeroDivisionError"}, stderr="ZeroDivisionError"),
     ASSERT, "runtime_error"),
    (checked({"gone": "gone"}, exit=None, signal=signal.SIGSEGV), ASSERT, "runtime_error"),
    (checked({"gone": "gone"}), ASSERT, "runtime_error"),  # exited 0 mid-test: not reached
    (checked({"gone": "output_limit"}), ASSERT, "output_limit"),  # its answer was over the cap
    (checked({"gone": "output_limit"}, exit=None, signal=signal.SIGKILL), ASSERT, "output_limit"),
    (checked({"gone": "gone"}, exit=1, report={"exc": "MemoryError"}), ASSERT, "memory_limit"),  # a limit
    # missing: never reached
    (checked(None), ASSERT, "runtime_error"),
    (raw(), ASSERT, "runtime_error"),  # no checks at all (the checker never started)
    (raw(checks="xyz"), ASSERT, "runtime_error"),
    (raw(checks={0: OK}), ASSERT, "runtime_error"),  # keys are the test index as text
    (raw(checks={"0": "ok"}), ASSERT, "runtime_error"),
    # limits the whole run broke fail every test of it, whatever the checker said
    (checked(OK, exit=None, timed_out=True, signal=signal.SIGKILL), ASSERT, "timeout"),
    (checked(OK, cpu=4.5), ASSERT, "timeout"),  # CPU of the whole run
    (checked(OK, exit=None, signal=signal.SIGXCPU), ASSERT, "timeout"),
    (checked(OK, output_exceeded=True), ASSERT, "output_limit"),
    (checked(OK, oom=True, exit=None, signal=signal.SIGKILL), ASSERT, "memory_limit"),
    (checked(OK, exit=1, report={"exc": "MemoryError", "stage": "solution"}), ASSERT, "memory_limit"),
    (checked(OK, exit=1, compile_error="SyntaxError: x"), ASSERT, "compile_error"),
    (checked(OK, exit=1, report={"compile_error": "SyntaxError: forged"}), ASSERT, "accepted"),  # the program's
    ({"skipped": True}, STDIO, SKIPPED),
    ({"skipped": True}, ASSERT, SKIPPED),
])
def test_judge_test(r, suite, expected):
    verdict, message = verdict_of(r, suite, 0, cpu_limit=4.0)
    assert verdict == expected
    assert verdict in VERDICTS + (SKIPPED,)
    if verdict != "accepted":
        assert message


def test_assert_each_test_is_judged_on_its_own_entry():
    r = checked(wrong("assertion failed: 3 != 1"), OK)
    verdict, message = verdict_of(r, TWO, 0, cpu_limit=4.0)
    assert verdict == "wrong_answer" and "assert f(1) == 1" in message and "3 != 1" in message
    assert verdict_of(r, TWO, 1, cpu_limit=4.0) == ("accepted", "")
    r = checked(OK, wrong())
    assert [verdict_of(r, TWO, i, cpu_limit=4.0)[0] for i in (0, 1)] == ["accepted", "wrong_answer"]


def test_assert_runtime_error_fails_only_its_own_test():
    r = checked({"verdict": "runtime_error", "message": "the program raised ValueError: bad"}, OK)
    verdict, message = verdict_of(r, TWO, 0, cpu_limit=4.0)
    assert verdict == "runtime_error" and "ValueError: bad" in message
    assert verdict_of(r, TWO, 1, cpu_limit=4.0) == ("accepted", "")


def test_assert_test_passed_before_the_program_crashed_stays_passed():
    r = checked(OK, {"gone": "gone"}, exit=1, report={"exc": "ZeroDivisionError", "stage": "call"},
                stderr="ZeroDivisionError: x")
    assert verdict_of(r, TWO, 0, cpu_limit=4.0) == ("accepted", "")
    verdict, message = verdict_of(r, TWO, 1, cpu_limit=4.0)
    assert verdict == "runtime_error" and "ZeroDivisionError" in message


def test_assert_gone_output_limit_names_the_test():
    verdict, message = verdict_of(checked({"gone": "output_limit"}), ASSERT, 0, cpu_limit=4.0)
    assert verdict == "output_limit" and "assert f() == 1" in message and "over the cap" in message


def test_assert_missing_entry_after_a_clean_exit_is_not_reached():
    verdict, message = verdict_of(checked(OK), TWO, 1, cpu_limit=4.0)
    assert verdict == "runtime_error" and "not reached" in message and "assert f(x) == 2" in message


def test_assert_missing_entry_after_a_crash_takes_the_crash_verdict():
    verdict, message = verdict_of(checked(OK, exit=None, signal=signal.SIGSEGV), TWO, 1, cpu_limit=4.0)
    assert verdict == "runtime_error" and "SIGSEGV" in message


@pytest.mark.parametrize("limit, verdict", [
    (dict(exit=None, signal=signal.SIGXCPU), "timeout"),
    (dict(exit=None, signal=signal.SIGKILL, timed_out=True), "timeout"),
    (dict(cpu=9.0), "timeout"),
    (dict(output_exceeded=True), "output_limit"),
    (dict(oom=True, exit=None, signal=signal.SIGKILL), "memory_limit"),
    (dict(exit=1, compile_error="SyntaxError"), "compile_error"),
])
def test_assert_broken_limit_fails_every_test_of_the_run(limit, verdict):
    r = checked(OK, OK, **limit)
    assert [verdict_of(r, TWO, i, cpu_limit=4.0)[0] for i in (0, 1)] == [verdict, verdict]


def test_assert_checks_of_a_longer_snippet_are_keyed_by_test_index_not_unit_position():
    suite = checker_suite({"assert_code": "a = 1\nassert f(a) == 1\nb = 2\nc = 3\nassert f(b) == 2\n"
                                        "assert f(c) == 3"})
    assert [t.unit for t in suite.inputs] == [0, 1, 2]
    r = checked(OK, wrong(), OK)
    assert [verdict_of(r, suite, i, cpu_limit=4.0)[0] for i in range(3)] == [
        "accepted", "wrong_answer", "accepted"]


@pytest.mark.parametrize("r", [
    raw(report="not an object"),
    raw(report=[1, 2]),
    raw(report={"value": {"__dict__": [[[1, [2]], 3]]}}),
    raw(report={"value": {"__dict__": "x"}}),
    raw(report={"value": {"__set__": [{"__dict__": []}]}}),
    raw(report={"exc": ["not", "a", "name"]}, exit=1),
    raw(report={"compile_error": 5}, exit=1),
    raw(stdout=None),
    raw(stderr=5, exit=1),
    raw(cpu="lots"),
    raw(checks="xyz"),
    raw(checks=[OK]),
    raw(checks={"0": None, "1": 5}),
    raw(checks={"0": {"gone": 5}}, report={"exc": 5}, exit=1),
    raw(checks={"0": {"verdict": ["x"], "message": {"a": 1}}}),
    raw(checks={"0": {"ok": False}}),
])
@pytest.mark.parametrize("suite", [STDIO, CALL, ASSERT], ids=["stdio", "call", "assert"])
def test_judge_test_never_raises_nor_blames_the_sandbox(r, suite):
    verdict, message = verdict_of(r, suite, 0, cpu_limit=4.0)
    assert verdict in VERDICTS and verdict not in ("accepted", "sandbox_error", "invalid_tests")
    assert message


def test_summarize():
    assert summarize(["accepted", "accepted"], 2) == ("accepted", 2, 1.0)
    assert summarize(["accepted", "wrong_answer", "timeout"], 3) == ("wrong_answer", 1, 1 / 3)
    assert summarize(["timeout", "timeout", SKIPPED, SKIPPED], 4) == ("timeout", 0, 0.0)


def test_invalid_tests_is_a_verdict_and_unscored():
    assert INVALID_TESTS == "invalid_tests" and INVALID_TESTS in VERDICTS
    assert set(UNSCORED) == {INVALID_TESTS, SANDBOX_ERROR}
    for verdict in UNSCORED:
        row = result_row("r", verdict, 0, 3, {"reason": "x"})
        assert row["reward"] is None and row["verdict"] == verdict
        assert result_row("r", verdict, 2, 3, {}, reward=0.5)["reward"] is None  # even if given one
    assert result_row("r", "wrong_answer", 1, 4, {})["reward"] == 0.25
    assert result_row("r", "compile_error", 0, 4, {})["reward"] == 0.0
    assert result_row("r", "accepted", 2, 2, {}, reward=0.7)["reward"] == 0.7


def test_prepare_builds_a_job_without_expected_outputs():
    p = prepare({"id": "r", "code": "print(2)", "tests": {"inputs": ["1\n"], "outputs": ["SECRET\n"]},
                 "time_limit": 2})
    assert p.job["mode"] == "stdio" and p.job["tests"] == [{"stdin": "1\n"}]
    assert "SECRET" not in repr(p.job)
    assert p.job["limits"]["cpu_s"] == 2 and p.job["limits"]["wall_s"] == Limits().wall_s(2)


def test_prepare_sets_the_job_deadline_the_host_waits_for():
    tests = {"inputs": ["1\n", "2\n", "3\n"], "outputs": ["1\n", "2\n", "3\n"]}
    p = prepare({"id": "r", "code": "print(2)", "tests": tests, "time_limit": 2})
    assert p.job["deadline_s"] == p.timeout_s == pytest.approx(3 * (Limits().wall_s(2) + 1.0))
    one = prepare({"id": "r", "code": "print(2)", "tests": {"inputs": ["1\n"], "outputs": ["1\n"]},
                   "time_limit": 2})
    assert one.job["deadline_s"] < p.job["deadline_s"]
    a = prepare({"id": "r", "code": "x", "tests": {"assert_code": ["assert f(1) == 1\nassert f(2) == 2",
                                                                   "assert f(3) == 3"]}})
    assert a.job["deadline_s"] == pytest.approx(2 * (Limits().wall_s() + 1.0))  # one run per snippet


# (assert messages keep these snippets off the plain-call path: they go to the checker)
def test_prepare_assert_style_sends_units_and_maps_tests_to_runs():
    tests = {"assert_code": ["assert f(1) == 1, \'m\'", "x = 2\nassert f(x) == 2\nassert f(3) == 3, 'm'"]}
    p = prepare({"id": "r", "code": "def f(x): return x", "tests": tests})
    assert p.job["mode"] == "assert" and p.indices == [0, 1, 2] and p.runs == [0, 1, 1]
    assert p.job["tests"] == [{"units": [["test", "assert f(1) == 1, \'m\'"]], "free": ["f"], "tested": ["f"]},
                              {"units": [["setup", "x = 2"], ["test", "assert f(x) == 2"],
                                         ["test", "assert f(3) == 3, \'m\'"]], "free": ["f"], "tested": ["f"]}]
    assert p.job["code"] == "def f(x): return x" and p.job["fn_name"] is None


def test_prepare_samples_by_problem_id():
    tests = {"inputs": [f"{i}\n" for i in range(40)], "outputs": [f"{i}\n" for i in range(40)]}
    a = prepare({"id": "P-0", "problem_id": "P", "code": "x", "tests": tests})
    b = prepare({"id": "P-1", "problem_id": "P", "code": "x", "tests": tests})
    assert a.indices == b.indices and len(a.indices) == 16
    c = prepare({"id": "P-0", "code": "x", "tests": tests})  # without problem_id: keyed by the row id
    d = prepare({"id": "P-1", "code": "x", "tests": tests})
    assert c.indices != d.indices


def test_prepare_samples_up_to_max_tests():
    tests = {"inputs": [f"{i}\n" for i in range(40)], "outputs": [f"{i}\n" for i in range(40)]}
    p = prepare({"id": "r", "code": "x", "tests": tests}, JudgeConfig(max_tests=16, seed=3))
    assert len(p.indices) == 16 and len(p.job["tests"]) == 16
    assert p.indices == prepare({"id": "r", "code": "x", "tests": tests}, JudgeConfig(seed=3)).indices


@pytest.mark.parametrize("row, verdict, reason", [
    ({"id": 1, "code": "", "tests": {"assert_code": ASSERTS}}, "compile_error", "no code"),
    ({"id": 1, "tests": {"assert_code": ASSERTS}}, "compile_error", "no code"),
    ({"id": 1, "code": 5, "tests": {"assert_code": ASSERTS}}, "sandbox_error", "code must be a string"),
    ({"id": 1, "code": "x", "tests": "{"}, "invalid_tests", "not valid JSON"),
    ({"id": 1, "code": "x"}, "invalid_tests", "must be an object"),
    ({"id": 1, "code": "x", "tests": {"inputs": ["1"], "outputs": []}}, "invalid_tests", "1 inputs but 0"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}}, "invalid_tests",
     "no assert that tests the program"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "x = 2\nassert x == 2"}}, "invalid_tests",
     "never uses a name the program defines"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "x = f(1)"}}, "invalid_tests", "no assert"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert f(1) =="}}, "invalid_tests", "does not compile"),
    ({"id": 1, "code": "", "tests": {"assert_code": "assert (("}}, "invalid_tests", "does not compile"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "language": "java"}, "sandbox_error",
     "unsupported language"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "language": "cpp"}, "invalid_tests",
     "stdin/stdout"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "time_limit": -1}, "sandbox_error",
     "bad time_limit"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "time_limit": "soon"}, "sandbox_error",
     "bad time_limit"),
    ("not a row", "sandbox_error", "bad row"),
])
def test_bad_rows_get_a_verdict_with_a_reason(row, verdict, reason):
    out = prepare(row)
    assert isinstance(out, dict)
    assert out["verdict"] == verdict and reason in out["details"]["reason"]
    assert out["reward"] == (None if verdict in ("sandbox_error", "invalid_tests") else 0.0)


def test_once_refused_assert_shapes_prepare_a_job():
    for code in ("for i in range(3):\n    assert f(i) == i", "assert f(1) == g(1)",
                 "def ref(x):\n    return 2 * x\nassert f(3) == ref(3)"):
        p = prepare({"id": 1, "code": "x", "tests": {"assert_code": code}})
        assert not isinstance(p, dict) and len(p.indices) == 1 and p.job["mode"] == "assert"


def test_judge_soft_reward_and_first_failure():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2", "3"], "outputs": ["1", "2", "3"]}})
    resp = {"ok": True, "results": [raw(stdout="1"), raw(stdout="0"), raw(stdout="3")], "clean": True}
    out = judge(p, resp)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3)
    assert out["reward"] == pytest.approx(2 / 3)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "wrong_answer", "accepted"]
    assert "line 1" in out["details"]["message"]


def test_judge_assert_style_scores_each_test_from_its_run():
    tests = {"assert_code": ["assert f(1) == 1, \'m\'", "assert f(2) == 2, 'm'\nassert f(3) == 3, 'm'"]}
    p = prepare({"id": "r", "code": "x", "tests": tests})
    resp = {"ok": True, "clean": True, "results": [checked(OK), checked(OK, wrong())]}
    out = judge(p, resp)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3)
    assert out["reward"] == pytest.approx(2 / 3)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "accepted", "wrong_answer"]
    assert "assert f(3) == 3, \'m\'" in out["details"]["message"]


def test_judge_assert_style_limit_of_one_run_fails_only_that_runs_tests():
    tests = {"assert_code": ["assert f(1) == 1, \'m\'", "assert f(2) == 2, 'm'\nassert f(3) == 3, 'm'"]}
    p = prepare({"id": "r", "code": "x", "tests": tests})
    resp = {"ok": True, "clean": True, "results": [
        checked(OK), checked(OK, OK, exit=None, signal=signal.SIGKILL, timed_out=True)]}
    out = judge(p, resp)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "timeout", "timeout"]
    assert (out["verdict"], out["passed"]) == ("timeout", 1)


def test_judge_assert_style_all_passed_is_accepted_with_no_output():
    p = prepare({"id": "r", "code": "x", "tests": {"assert_code": "assert f(1) == 1, 'm'\nassert f(2) == 2, 'm'"}})
    out = judge(p, {"ok": True, "clean": True, "results": [checked(OK, OK, report={"value": 5})]},
                JudgeConfig(output_chars=100))
    assert (out["verdict"], out["passed"], out["reward"]) == ("accepted", 2, 1.0)
    assert [t["output"] for t in out["details"]["tests"]] == [None, None]  # assert-style has none
    assert program_output(checked(OK, report={"value": 5}), "assert", 100) is None


def test_judge_python_compile_error_stops_the_runner_early():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2"], "outputs": ["1", "2"]}})
    ce = judge(p, {"results": [raw(exit=1, compile_error="SyntaxError")]})
    assert (ce["verdict"], ce["passed"], ce["total"], ce["reward"]) == ("compile_error", 0, 2, 0.0)


def test_judge_short_response_is_a_sandbox_error():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2"], "outputs": ["1", "2"]}})
    short = judge(p, {"results": [raw(stdout="1")]})
    assert short["verdict"] == "sandbox_error" and short["reward"] is None


def test_judge_cpp_compile_error_and_unsupported():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2"], "outputs": ["1", "2"]}})
    cpp = judge(p, {"compile": {"exit": 1, "stderr": "main.cpp:1: error: x"}, "results": []})
    assert cpp["verdict"] == "compile_error" and "error: x" in cpp["details"]["reason"]
    unsupported = judge(p, {"unsupported": "no g++", "results": []})
    assert unsupported["verdict"] == "sandbox_error"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize("r, text", [
    ({"stdout_b64": b64(b"2\n")}, "2\n"),
    ({"stdout_b64": b64("é\x00\x1b[0m\n".encode())}, "é\x00\x1b[0m\n"),  # control chars kept
    ({"stdout_b64": b64(b"a\xff\xfeb")}, "a\ufffd\ufffdb"),  # invalid UTF-8 replaced
    ({"stdout_b64": ""}, ""),
    ({"stdout_b64": "not base64!"}, ""),  # malformed: empty output
    ({"stdout_b64": "QQ="}, ""),  # bad padding
    ({"stdout_b64": 5}, ""),
    ({"stdout_b64": None}, ""),
    ({"stdout_b64": b64(b"new"), "stdout": "old"}, "new"),  # the bytes win
    ({"stdout": "2\n"}, "2\n"),  # an older runner's text
    ({}, ""),
])
def test_stdout_text(r, text):
    assert stdout_text(r) == text


def test_stdout_b64_is_judged():
    stdout = {k: v for k, v in raw().items() if k != "stdout"}
    assert verdict_of(dict(stdout, stdout_b64=b64(b"2\r\n")), STDIO, 0, cpu_limit=4.0)[0] == "accepted"
    assert verdict_of(dict(stdout, stdout_b64=b64(b"3\n")), STDIO, 0, cpu_limit=4.0)[0] == "wrong_answer"
    assert verdict_of(dict(stdout, stdout_b64="@@"), STDIO, 0, cpu_limit=4.0)[0] == "wrong_answer"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def test_result_row_details_are_always_valid_text():
    details = {"message": "RuntimeError \ud800: m", "\udfff key": ["ok", {"deep": ("\udc80x",)}],
               "tests": [{"index": 0, "cpu": 0.1}], "fine": "é 😀"}
    row = result_row("id\ud800", "runtime_error", 0, 1, details)
    for text in _strings(row):
        text.encode("utf-8")  # never raises
    assert row["details"]["message"] == "RuntimeError \\ud800: m"
    assert row["details"]["\\udfff key"] == ["ok", {"deep": ["\\udc80x"]}]
    assert row["details"]["fine"] == "é 😀" and row["details"]["tests"] == [{"index": 0, "cpu": 0.1}]
    assert row["id"] == "id\\ud800"
    json.dumps(row, ensure_ascii=False).encode()


def test_lone_surrogate_reported_by_the_program_reaches_a_writable_row():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1"], "outputs": ["2"]}})
    report = json.loads('{"exc": "\\ud800", "message": "m"}')  # what the program wrote to its report fd
    out = judge(p, {"results": [raw(exit=1, report=report)]})
    assert out["verdict"] == "runtime_error" and "\\ud800" in out["details"]["message"]
    json.dumps(out, ensure_ascii=False).encode()
