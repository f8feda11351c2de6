"""Raw runner facts -> verdicts, bad rows, submission summary. No Docker (responses are synthetic)."""
import base64
import json
import signal

import pytest

from sandbox.config import JudgeConfig, Limits
from sandbox.judge import judge, prepare
from sandbox.testcases import parse_tests
from sandbox.verdicts import (SKIPPED, VERDICTS, judge_test as verdict_of, result_row, stdout_text,
                              summarize)

STDIO = parse_tests({"inputs": ["1\n"], "outputs": ["2\n"]})
CALL = parse_tests({"fn_name": "f", "inputs": [[1]], "outputs": [[1, 2]]})
ASSERT = parse_tests({"assert_code": "assert f() == 1"})  # one check: __klear_o0 == 1
TWO = parse_tests({"assert_code": "assert f(1) == 1\nassert f(2) == 2"})  # one run, two scored tests
ASSERTS = "assert f() == 1"  # a valid assert-style row for the bad-row cases


def raw(**kw):
    base = {"exit": 0, "signal": None, "timed_out": False, "output_exceeded": False, "oom": False,
            "cpu": 0.01, "wall": 0.02, "maxrss_kb": 10000, "stdout": "", "stderr": "", "report": None,
            "reports": []}
    base.update(kw)
    if "report" in kw and "reports" not in kw and kw["report"] is not None:
        base["reports"] = [kw["report"]]  # the runner's `report` is the last of its `reports`
    return base


def observed(*lines, **kw):
    """Raw facts of an assert-style run that reported these observation lines (and nothing after)."""
    lines = list(lines)
    return raw(reports=lines, report=lines[-1] if lines else None, **kw)


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
    (observed({"obs": 0, "value": 1}), ASSERT, "accepted"),
    (observed({"obs": 0, "value": 2}), ASSERT, "wrong_answer"),
    (observed({"obs": 0, "value": {"__repr__": "<A>", "__type__": "A"}}), ASSERT, "wrong_answer"),  # Opaque
    (observed({"obs": 0, "value": {"__float__": "nan"}}), ASSERT, "wrong_answer"),
    (observed({"obs": 0, "exc": "NameError", "message": "f"}), ASSERT, "runtime_error"),
    (observed({"obs": 0, "exc": "MemoryError", "message": ""}), ASSERT, "memory_limit"),
    (observed({"obs": 0, "value": 1}, exit=None, timed_out=True, signal=signal.SIGKILL), ASSERT, "timeout"),
    (observed({"obs": 0, "value": 1}, cpu=4.5), ASSERT, "timeout"),  # CPU of the whole run
    (observed({"obs": 0, "value": 1}, output_exceeded=True), ASSERT, "output_limit"),
    (observed({"obs": 0, "value": 1}, oom=True, exit=None, signal=signal.SIGKILL), ASSERT, "memory_limit"),
    (observed({"obs": 0, "value": 1}, {"exc": "MemoryError", "stage": "tests"}, exit=1), ASSERT,
     "memory_limit"),
    (observed(exit=0), ASSERT, "runtime_error"),  # os._exit(0) before the asserts ran
    (observed(exit=1, stderr="SystemExit"), ASSERT, "runtime_error"),
    (observed({"exc": "SystemExit", "stage": "tests"}, exit=1), ASSERT, "runtime_error"),
    (observed({"done": True}), ASSERT, "runtime_error"),  # the old completion report means nothing now
    (observed({"obs": "0", "value": 1}), ASSERT, "runtime_error"),  # an id must be an int
    (observed({"obs": 0}), ASSERT, "runtime_error"),  # neither a value nor an exception
    (observed({"garbled": True}), ASSERT, "runtime_error"),
    (raw(exit=1, compile_error="SyntaxError: x"), ASSERT, "compile_error"),
    (observed({"compile_error": "SyntaxError: forged"}, exit=1), ASSERT, "runtime_error"),
    ({"skipped": True}, STDIO, SKIPPED),
    ({"skipped": True}, ASSERT, SKIPPED),
])
def test_judge_test(r, suite, expected):
    verdict, message = verdict_of(r, suite, 0, cpu_limit=4.0)
    assert verdict == expected
    assert verdict in VERDICTS + (SKIPPED,)
    if verdict != "accepted":
        assert message


def test_assert_first_observation_of_an_id_is_the_one_judged():
    r = observed({"obs": 0, "value": 2}, {"obs": 0, "value": 1})  # a later line cannot overwrite it
    assert verdict_of(r, ASSERT, 0, cpu_limit=4.0)[0] == "wrong_answer"


def test_assert_observation_before_a_crash_is_judged_on_its_value():
    r = observed({"obs": 0, "value": 1}, {"exc": "ZeroDivisionError", "stage": "tests", "message": "x"},
                 exit=1, stderr="ZeroDivisionError: x")
    assert verdict_of(r, TWO, 0, cpu_limit=4.0) == ("accepted", "")
    verdict, message = verdict_of(r, TWO, 1, cpu_limit=4.0)
    assert verdict == "runtime_error" and "ZeroDivisionError" in message


def test_assert_observation_that_raised_fails_only_its_own_test():
    r = observed({"obs": 0, "exc": "ValueError", "message": "bad"}, {"obs": 1, "value": 2})
    verdict, message = verdict_of(r, TWO, 0, cpu_limit=4.0)
    assert verdict == "runtime_error" and "ValueError: bad" in message
    assert verdict_of(r, TWO, 1, cpu_limit=4.0) == ("accepted", "")


def test_assert_missing_observation_after_a_clean_exit_is_not_reached():
    verdict, message = verdict_of(observed({"obs": 0, "value": 1}), TWO, 1, cpu_limit=4.0)
    assert verdict == "runtime_error" and "not reached" in message


def test_assert_broken_limit_fails_every_test_of_the_run():
    r = observed({"obs": 0, "value": 1}, {"obs": 1, "value": 2}, exit=None, signal=signal.SIGXCPU)
    assert [verdict_of(r, TWO, i, cpu_limit=4.0)[0] for i in (0, 1)] == ["timeout", "timeout"]


def test_assert_checks_use_host_semantics_on_decoded_values():
    tuple_check = parse_tests({"assert_code": "assert f() == (1, 2)"})
    assert verdict_of(observed({"obs": 0, "value": {"__tuple__": [1, 2]}}), tuple_check, 0, 4.0)[0] == "accepted"
    assert verdict_of(observed({"obs": 0, "value": [1, 2]}), tuple_check, 0, 4.0)[0] == "wrong_answer"
    big = parse_tests({"assert_code": f"assert f() == {2**100}"})
    assert verdict_of(observed({"obs": 0, "value": {"__int__": hex(2**100)}}), big, 0, 4.0)[0] == "accepted"
    close = parse_tests({"assert_code": "assert math.isclose(f(), 0.3333, rel_tol=1e-3)"})
    assert verdict_of(observed({"obs": 0, "value": 1 / 3}), close, 0, 4.0)[0] == "accepted"
    assert verdict_of(observed({"obs": 0, "value": "1/3"}), close, 0, 4.0)[0] == "wrong_answer"  # TypeError


@pytest.mark.parametrize("r", [
    raw(report="not an object"),
    raw(report=[1, 2], reports=[[1, 2]]),
    raw(report={"value": {"__dict__": [[[1, [2]], 3]]}}),
    raw(report={"value": {"__dict__": "x"}}),
    raw(report={"value": {"__set__": [{"__dict__": []}]}}),
    raw(report={"exc": ["not", "a", "name"]}, exit=1),
    raw(report={"compile_error": 5}, exit=1),
    raw(stdout=None),
    raw(stderr=5, exit=1),
    raw(cpu="lots"),
    raw(reports="xyz"),
    raw(reports=[None, 5, "x", {"obs": None}, {"obs": 0, "value": {"__tuple__": 7}}]),
])
@pytest.mark.parametrize("suite", [STDIO, CALL, ASSERT], ids=["stdio", "call", "assert"])
def test_judge_test_never_raises_nor_blames_the_sandbox(r, suite):
    verdict, message = verdict_of(r, suite, 0, cpu_limit=4.0)
    assert verdict in VERDICTS and verdict not in ("accepted", "sandbox_error")
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


def test_prepare_assert_style_sends_rewritten_programs_and_maps_tests_to_runs():
    tests = {"assert_code": ["assert f(1) == 'SECRET1'", "assert f(2) == 'SECRET2'\nassert f(3) == 'SECRET3'"]}
    p = prepare({"id": "r", "code": "def f(x): return x", "tests": tests})
    assert p.job["mode"] == "assert" and p.indices == [0, 1, 2] and p.runs == [0, 1, 1]
    assert p.job["tests"] == [{"assert_code": "__observe__(0, lambda: f(1))"},
                              {"assert_code": "__observe__(0, lambda: f(2))\n__observe__(1, lambda: f(3))"}]
    assert "SECRET" not in repr(p.job)


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
    ({"id": 1, "code": "x", "tests": "{"}, "sandbox_error", "invalid_tests"),
    ({"id": 1, "code": "x"}, "sandbox_error", "invalid_tests"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert 1"}}, "sandbox_error", "invalid_tests"),
    ({"id": 1, "code": "x", "tests": {"assert_code": "assert f(1) == g(1)"}}, "sandbox_error",
     "invalid_tests"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "language": "java"}, "sandbox_error",
     "unsupported language"),
    ({"id": 1, "code": "x", "tests": {"assert_code": ASSERTS}, "language": "cpp"}, "sandbox_error",
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
    assert out["reward"] == (None if verdict == "sandbox_error" else 0.0)


def test_judge_soft_reward_and_first_failure():
    p = prepare({"id": "r", "code": "x", "tests": {"inputs": ["1", "2", "3"], "outputs": ["1", "2", "3"]}})
    resp = {"ok": True, "results": [raw(stdout="1"), raw(stdout="0"), raw(stdout="3")], "clean": True}
    out = judge(p, resp)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3)
    assert out["reward"] == pytest.approx(2 / 3)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "wrong_answer", "accepted"]
    assert "line 1" in out["details"]["message"]


def test_judge_assert_style_scores_each_check_from_its_run():
    tests = {"assert_code": ["assert f(1) == 1", "assert f(2) == 2\nassert f(3) == 3"]}
    p = prepare({"id": "r", "code": "x", "tests": tests})
    resp = {"ok": True, "clean": True, "results": [
        observed({"obs": 0, "value": 1}),
        observed({"obs": 0, "value": 2}, {"obs": 1, "value": 4})]}
    out = judge(p, resp)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3)
    assert [t["verdict"] for t in out["details"]["tests"]] == ["accepted", "accepted", "wrong_answer"]
    assert "assert f(3) == 3" in out["details"]["message"]


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
