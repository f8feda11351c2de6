"""From the runner's raw facts to verdicts, per test and per submission.

Verdicts (the product's verification contract): accepted, wrong_answer, runtime_error, timeout, memory_limit,
output_limit, compile_error, invalid_tests, sandbox_error. invalid_tests is a row whose tests cannot be
judged (the reason in details); sandbox_error is an infrastructure fault. Neither is scored as a wrong
answer (their reward is None), and nothing the program prints, returns or reports can produce either
(judge_test never raises). A test that was not run because the submission had
already timed out `max_timeouts` times is `skipped` (counted as not passed).

Per test, first match wins:
  harness compile error                             -> compile_error
  stdout/stderr/report over the cap                 -> output_limit
  cgroup OOM kill or MemoryError                    -> memory_limit
  killed at the wall deadline, SIGXCPU, CPU > limit -> timeout (CPU of every process the test started)
  non-zero exit / signal / exception                -> runtime_error
  stdout, return value or assert check differs      -> wrong_answer
  otherwise                                         -> accepted
Assert-style (one test per test unit, several per run; the checker process decides each): the limits
above fail every test of the run; a test the checker reports is judged by its report (ok, wrong_answer,
runtime_error, memory_limit); one it could not finish because the program stopped answering takes the
program's crash verdict (output_limit if the program's answer was over the cap).
Submission: accepted when every run test is accepted, else the first failing test's verdict.
Soft reward = passed / total.
"""
from __future__ import annotations

import base64
import binascii
import json
import signal
from typing import Any

from sandbox.asserts import AssertTest
from sandbox.compare import compare_stdout, decode_value, values_equal
from sandbox.testcases import ASSERT, STDIO, TestSuite

ACCEPTED = "accepted"
WRONG_ANSWER = "wrong_answer"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
COMPILE_ERROR = "compile_error"
INVALID_TESTS = "invalid_tests"
SANDBOX_ERROR = "sandbox_error"
VERDICTS = (ACCEPTED, WRONG_ANSWER, RUNTIME_ERROR, TIMEOUT, MEMORY_LIMIT, OUTPUT_LIMIT, COMPILE_ERROR,
            INVALID_TESTS, SANDBOX_ERROR)
UNSCORED = (INVALID_TESTS, SANDBOX_ERROR)  # reward None: the row, or the sandbox, failed, not the program
SKIPPED = "skipped"  # per-test only


def _tail(text: str, n: int = 600) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "…" + text[-n:]


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def judge_test(raw: dict, suite: TestSuite, index: int, cpu_limit: float,
               float_tolerance: float | None = None, unwrap: bool = False) -> tuple[str, str]:
    """(verdict, message) for test `index` of the suite from the raw facts of the run that holds it.

    Never raises: whatever the program printed, returned or reported that the judge cannot make sense of
    is the program's fault (runtime_error), never the sandbox's."""
    try:
        return _judge_test(raw, suite, index, cpu_limit, float_tolerance, unwrap)
    except Exception as exc:
        return RUNTIME_ERROR, f"output could not be judged ({type(exc).__name__})"


def _report(raw: dict) -> dict:
    """The run's final report (compile error, exception, call value); an observation line is not one."""
    report = raw.get("report")
    if not isinstance(report, dict):
        return {"garbled": True} if report is not None else {}
    return {} if "obs" in report else report


def _limit_verdict(raw: dict, report: dict, cpu_limit: float) -> tuple[str, str] | None:
    """A limit the whole run broke (compile, output, memory kill, time), or None."""
    if isinstance(raw.get("compile_error"), str):  # set by the runner, never by the program
        return COMPILE_ERROR, _tail(raw["compile_error"])
    if raw.get("output_exceeded"):
        return OUTPUT_LIMIT, "output over the cap"
    if raw.get("oom") or report.get("exc") == "MemoryError":  # the cause, even if a deadline followed
        return MEMORY_LIMIT, ("killed by the container's OOM killer" if raw.get("oom") else "MemoryError") + (
            f", peak rss {raw.get('maxrss_kb')} KiB")
    cpu = raw.get("cpu")
    if raw.get("timed_out") or raw.get("signal") == signal.SIGXCPU or (
            isinstance(cpu, (int, float)) and cpu > cpu_limit):
        return TIMEOUT, f"cpu {cpu}s, wall {raw.get('wall')}s (limit {cpu_limit}s cpu, all processes)"
    return None


def _crash_verdict(raw: dict, report: dict) -> tuple[str, str] | None:
    """The run crashed (signal, exception, non-zero exit), or None."""
    stderr = _tail(raw.get("stderr", ""))
    if raw.get("signal"):
        return RUNTIME_ERROR, f"killed by {_signal_name(raw['signal'])}" + (f": {stderr}" if stderr else "")
    if report.get("exc"):
        return RUNTIME_ERROR, stderr or f"{str(report['exc'])[:80]}: {str(report.get('message', ''))[:300]}"
    if raw.get("exit") != 0:
        return RUNTIME_ERROR, f"exit status {raw.get('exit')}" + (f": {stderr}" if stderr else "")
    return None


def stdout_text(raw: dict) -> str:
    """A test's stdout as text: the runner sends the raw bytes base64-encoded (`stdout_b64`; control
    characters would bloat the JSON escaping), read as UTF-8 with undecodable bytes replaced. Malformed
    base64 is empty output. An older runner's `stdout` text is read as is."""
    if "stdout_b64" in raw:
        try:
            return base64.b64decode(raw["stdout_b64"], validate=True).decode("utf-8", "replace")
        except (binascii.Error, TypeError, ValueError):
            return ""
    return str(raw.get("stdout", ""))


def program_output(raw: dict, mode: str, max_chars: int) -> Any:
    """What a test's program produced, for comparing two programs on the same input: stdin/stdout its
    stdout text, call-based the returned value as the runner encoded it (decode with
    compare.decode_value); None when there is none (a crash, assert-style) or it is over `max_chars`
    (its JSON text, for a value)."""
    if mode == STDIO:
        text = stdout_text(raw)
        return text if len(text) <= max_chars else None
    report = _report(raw)
    if mode == ASSERT or "value" not in report:
        return None
    try:
        size = len(json.dumps(report["value"]))
    except (TypeError, ValueError, RecursionError):
        return None
    return report["value"] if size <= max_chars else None


def _judge_test(raw, suite, index, cpu_limit, float_tolerance, unwrap):
    if raw.get("skipped"):
        return SKIPPED, "not run: too many timeouts"
    report = _report(raw)
    broken = _limit_verdict(raw, report, cpu_limit)
    if broken:
        return broken
    if suite.mode == ASSERT:
        test = suite.inputs[index]
        calls = suite.programs[test.snippet].calls
        if calls is not None:
            return _judge_call(raw, report, test, calls[test.unit])
        return _judge_check(raw, report, test)
    crashed = _crash_verdict(raw, report)
    if crashed:
        return crashed
    if suite.mode == STDIO:
        ok, why = compare_stdout(stdout_text(raw), suite.outputs[index], float_tolerance)
        return (ACCEPTED, "") if ok else (WRONG_ANSWER, why)
    if "value" not in report:
        return RUNTIME_ERROR, "exited without returning a value"
    got = decode_value(report["value"])
    if values_equal(got, suite.outputs[index], float_tolerance, unwrap):
        return ACCEPTED, ""
    return WRONG_ANSWER, f"expected {suite.outputs[index]!r:.100}, got {got!r:.100}"


def _judge_call(raw: dict, report: dict, test: AssertTest, call) -> tuple[str, str]:
    """An assert-style test that is a plain call: the value the program reported, compared here."""
    calls = report.get("calls")
    entry = calls[test.unit] if isinstance(calls, list) and test.unit < len(calls) else None
    if not isinstance(entry, dict):
        crashed = _crash_verdict(raw, report)
        return crashed or (RUNTIME_ERROR, f"`{test.source}`: not reached (the program exited first)")
    if "exc" in entry:
        exc = str(entry["exc"])[:80]
        if exc == "MemoryError":
            return MEMORY_LIMIT, f"`{test.source}`: MemoryError"
        return RUNTIME_ERROR, f"`{test.source}`: {exc}: {str(entry.get('message', ''))[:300]}"
    got = decode_value(entry.get("value"))
    if call.holds(got):
        return ACCEPTED, ""
    return WRONG_ANSWER, f"`{test.source}` failed: got {got!r:.100}"


def _judge_check(raw: dict, report: dict, test: AssertTest) -> tuple[str, str]:
    """An assert-style test, from the checker's report on it (the limits were checked before)."""
    checks = raw.get("checks")
    entry = checks.get(str(test.unit)) if isinstance(checks, dict) else None
    if not isinstance(entry, dict) or "gone" in entry:
        if isinstance(entry, dict) and entry.get("gone") == "output_limit":
            return OUTPUT_LIMIT, f"`{test.source}`: the program's answer was over the cap"
        crashed = _crash_verdict(raw, report)
        return crashed or (RUNTIME_ERROR, f"`{test.source}`: not reached (the program stopped answering)")
    if entry.get("ok") is True:
        return ACCEPTED, ""
    verdict = entry.get("verdict")
    if verdict not in (WRONG_ANSWER, RUNTIME_ERROR, MEMORY_LIMIT):
        verdict = RUNTIME_ERROR
    return verdict, f"`{test.source}`: {str(entry.get('message', ''))[:300]}"


def summarize(verdicts: list[str], total: int) -> tuple[str, int, float]:
    """(submission verdict, passed, soft reward) from per-test verdicts in test order."""
    passed = sum(v == ACCEPTED for v in verdicts)
    first_failure = next((v for v in verdicts if v not in (ACCEPTED, SKIPPED)), None)
    if first_failure is None:
        first_failure = ACCEPTED if passed == total and total > 0 else TIMEOUT
    return first_failure, passed, (passed / total if total else 0.0)


def clean_text(value: Any) -> Any:
    """`value` with every string in it (dict keys too, recursively) valid UTF-8 text: a lone surrogate (a
    program can put one in what it reports) becomes its escape, the text `\\ud800`, so that the row can
    always be written (tuples become lists, as in JSON)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_text(v) for v in value]
    return value


def result_row(row_id: Any, verdict: str, passed: int, total: int, details: dict,
               reward: float | None = None) -> dict:
    """One output row; invalid_tests and sandbox_error are unscored (reward None), anything else scores
    passed/total.
    Every string in `details` is valid UTF-8 text (see clean_text)."""
    if verdict in UNSCORED:
        reward = None
    elif reward is None:
        reward = passed / total if total else 0.0
    return {"id": clean_text(row_id), "verdict": verdict, "passed": passed, "total": total,
            "reward": reward, "details": clean_text(details)}
