"""From the runner's raw facts to verdicts, per test and per submission.

Verdicts (../shared/DESIGN.md): accepted, wrong_answer, runtime_error, timeout, memory_limit,
output_limit, compile_error, sandbox_error. sandbox_error is an infrastructure fault or a row that cannot
be judged: never scored as a wrong answer (its reward is None). A test that was not run because the
submission had already timed out `max_timeouts` times is `skipped` (counted as not passed).

Per test, first match wins:
  harness compile error                            -> compile_error
  stdout/stderr over the cap                       -> output_limit
  cgroup OOM kill or MemoryError                   -> memory_limit
  killed at the wall deadline, SIGXCPU, CPU > limit -> timeout
  non-zero exit / signal / exception               -> runtime_error (AssertionError in assert tests: wrong_answer)
  stdout or return value differs                   -> wrong_answer
  otherwise                                        -> accepted
Submission: accepted when every run test is accepted, else the first failing test's verdict.
Soft reward = passed / total.
"""
from __future__ import annotations

import signal
from typing import Any

from sandbox.compare import compare_stdout, decode_value, values_equal
from sandbox.testcases import ASSERT, CALL, STDIO, TestSuite

ACCEPTED = "accepted"
WRONG_ANSWER = "wrong_answer"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
COMPILE_ERROR = "compile_error"
SANDBOX_ERROR = "sandbox_error"
VERDICTS = (ACCEPTED, WRONG_ANSWER, RUNTIME_ERROR, TIMEOUT, MEMORY_LIMIT, OUTPUT_LIMIT, COMPILE_ERROR,
            SANDBOX_ERROR)
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
    """(verdict, message) for one test's raw result; `index` is the test's position in the suite."""
    if raw.get("skipped"):
        return SKIPPED, "not run: too many timeouts"
    report = raw.get("report") or {}
    if report.get("compile_error"):
        return COMPILE_ERROR, _tail(report["compile_error"])
    if raw.get("output_exceeded"):
        return OUTPUT_LIMIT, "output over the cap"
    if raw.get("oom") or report.get("exc") == "MemoryError":  # the cause, even if a deadline followed
        return MEMORY_LIMIT, ("killed by the container's OOM killer" if raw.get("oom") else "MemoryError") + (
            f", peak rss {raw.get('maxrss_kb')} KiB")
    cpu = raw.get("cpu")
    if raw.get("timed_out") or raw.get("signal") == signal.SIGXCPU or (cpu is not None and cpu > cpu_limit):
        return TIMEOUT, f"cpu {cpu}s, wall {raw.get('wall')}s (limit {cpu_limit}s cpu)"
    stderr = _tail(raw.get("stderr", ""))
    if raw.get("signal"):
        return RUNTIME_ERROR, f"killed by {_signal_name(raw['signal'])}" + (f": {stderr}" if stderr else "")
    if report.get("exc"):
        verdict = WRONG_ANSWER if suite.mode == ASSERT and report["exc"] == "AssertionError" else RUNTIME_ERROR
        return verdict, stderr or f"{report['exc']}: {report.get('message', '')}"
    if raw.get("exit") != 0:
        return RUNTIME_ERROR, f"exit status {raw.get('exit')}" + (f": {stderr}" if stderr else "")
    if suite.mode == STDIO:
        ok, why = compare_stdout(raw.get("stdout", ""), suite.outputs[index], float_tolerance)
        return (ACCEPTED, "") if ok else (WRONG_ANSWER, why)
    if suite.mode == CALL:
        if "value" not in report:
            return RUNTIME_ERROR, "exited without returning a value"
        got = decode_value(report["value"])
        if values_equal(got, suite.outputs[index], float_tolerance, unwrap):
            return ACCEPTED, ""
        return WRONG_ANSWER, f"expected {suite.outputs[index]!r:.100}, got {got!r:.100}"
    if report.get("done"):
        return ACCEPTED, ""
    return RUNTIME_ERROR, "exited before the tests finished"


def summarize(verdicts: list[str], total: int) -> tuple[str, int, float]:
    """(submission verdict, passed, soft reward) from per-test verdicts in test order."""
    passed = sum(v == ACCEPTED for v in verdicts)
    first_failure = next((v for v in verdicts if v not in (ACCEPTED, SKIPPED)), None)
    if first_failure is None:
        first_failure = ACCEPTED if passed == total and total > 0 else TIMEOUT
    return first_failure, passed, (passed / total if total else 0.0)


def result_row(row_id: Any, verdict: str, passed: int, total: int, details: dict,
               reward: float | None = None) -> dict:
    """One output row; a sandbox_error is unscored (reward None), anything else scores passed/total."""
    if verdict == SANDBOX_ERROR:
        reward = None
    elif reward is None:
        reward = passed / total if total else 0.0
    return {"id": row_id, "verdict": verdict, "passed": passed, "total": total, "reward": reward,
            "details": details}
