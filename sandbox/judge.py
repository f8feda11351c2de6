"""One submission end to end: validate the row, sample its tests, run them in one round trip, judge.

    verify_submission({"id": ..., "code": ..., "tests": ..., "language"?: ..., "time_limit"?: ...,
                       "problem_id"?: ...}, pool)
    -> {"id", "verdict", "passed", "total", "reward", "details"}

A bad row never raises: no code is a compile_error (the model produced nothing runnable: lowest
reward); tests that cannot be parsed or judged are invalid_tests, an unknown language or a bad time limit
a sandbox_error, with the reason in details (the row cannot be judged, so it is not scored).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from sandbox.config import JudgeConfig
from sandbox.pool import ProgramFault, SandboxUnavailable
from sandbox.submission import Submission
from sandbox.testcases import STDIO, InvalidTests, TestSuite, sample_indices, test_suite_of
from sandbox.verdicts import (COMPILE_ERROR, INVALID_TESTS, SANDBOX_ERROR, SKIPPED, judge_test, result_row, summarize,
                              program_output)

log = logging.getLogger(__name__)

LANGUAGES = {"python": "python", "python3": "python", "py": "python", "py3": "python",
             "cpp": "cpp", "c++": "cpp", "cpp17": "cpp", "cpp14": "cpp", "cpp20": "cpp", "cxx": "cpp"}


@dataclass(frozen=True)
class Prepared:
    row_id: Any
    suite: TestSuite
    indices: list[int]  # which tests of the suite are scored, in order
    runs: list[int]  # for each of them, the position of its run in job["tests"]
    job: dict  # the runner request
    cpu_limit: float
    timeout_s: float  # host-side deadline for the whole round trip (before slack)


def _bad(row_id: Any, verdict: str, reason: str, total: int = 0) -> dict:
    return result_row(row_id, verdict, 0, total, {"reason": reason})


def prepare(row: Submission | dict, config: JudgeConfig = JudgeConfig()) -> Prepared | dict:
    """A runner job for the submission (or its row), or (for a bad one) its final result."""
    if isinstance(row, dict):
        row = Submission.from_row(row)
    if not isinstance(row, Submission):
        return _bad(None, SANDBOX_ERROR, f"bad row: expected an object, got {type(row).__name__}")
    row_id = row.id
    code = row.code
    if code is not None and not isinstance(code, str):
        return _bad(row_id, SANDBOX_ERROR, f"bad row: code must be a string, got {type(code).__name__}")
    try:
        suite = test_suite_of(row.tests)
    except InvalidTests as exc:
        return _bad(row_id, INVALID_TESTS, str(exc))
    # Sampling is keyed by the problem, not the row: every rollout of one problem (rows "P-0", "P-1", ...
    # carrying problem_id P) is scored on the same tests, so group advantages compare like with like.
    indices = sample_indices(len(suite), config.max_tests, config.seed, row.sample_key)
    if not code or not code.strip():
        return _bad(row_id, COMPILE_ERROR, "no code", total=len(indices))
    language = LANGUAGES.get(str(row.language or "python").strip().lower())
    if language is None:
        return _bad(row_id, SANDBOX_ERROR, f"unsupported language {row.language!r}", len(indices))
    if language == "cpp" and suite.mode != STDIO:
        return _bad(row_id, INVALID_TESTS, "C++ rows need stdin/stdout tests", len(indices))
    time_limit = row.time_limit
    if time_limit is not None:
        try:
            time_limit = float(time_limit)
        except (TypeError, ValueError):
            time_limit = math.nan
        if not (0 < time_limit <= config.max_time_limit_s):
            return _bad(row_id, SANDBOX_ERROR,
                        f"bad time_limit {row.time_limit!r} (0 < t <= {config.max_time_limit_s})",
                        len(indices))
    limits = config.limits
    cpu = time_limit or limits.time_limit_s
    tests, runs = suite.plan(indices)
    job = {"op": "run", "language": language, "mode": suite.mode, "code": code,
           "fn_name": suite.fn_name, "tests": tests, "limits": limits.to_runner(cpu)}
    # Worst case: every run goes to its wall deadline (plus the runner's own work after it: waiting for
    # the test process, the checker, the cleanup; about a second at most), then compile. The runner starts
    # no test it could not finish by then (`deadline_s`); the pool adds its slack for the round trip.
    timeout = len(tests) * (limits.wall_s(cpu) + 1.0) + (limits.compile_time_s if language == "cpp" else 0)
    job["deadline_s"] = timeout  # the runner starts no test it could not finish by then
    return Prepared(row_id, suite, indices, runs, job, cpu, timeout)


def judge(prepared: Prepared, response: dict, config: JudgeConfig = JudgeConfig()) -> dict:
    """Turn the runner's response into the output row (with `config.output_chars`, each test's entry also
    holds what the program printed or returned, for comparing two programs; see verdicts.program_output)."""
    total = len(prepared.indices)
    details: dict = {"attempts": response.get("attempts", 1)}
    if response.get("unsupported"):
        return result_row(prepared.row_id, SANDBOX_ERROR, 0, total, {**details, "reason": response["unsupported"]})
    compiled = response.get("compile")
    if compiled and compiled.get("exit") != 0:
        why = "compile timed out" if compiled.get("timed_out") else (compiled.get("stderr") or "").strip()[-1500:]
        return result_row(prepared.row_id, COMPILE_ERROR, 0, total, {**details, "reason": why})
    results = response.get("results", [])
    for raw in results:  # the runner stops at a compile error, so fewer results than runs come back
        if isinstance(raw.get("compile_error"), str):
            return result_row(prepared.row_id, COMPILE_ERROR, 0, total,
                              {**details, "reason": raw["compile_error"][-1500:]})
    if len(results) != len(prepared.job["tests"]):
        return result_row(prepared.row_id, SANDBOX_ERROR, 0, total,
                          {**details, "reason": f"runner returned {len(results)} results for "
                                                f"{len(prepared.job['tests'])} runs"})
    verdicts, tests, message = [], [], ""
    for index, run in zip(prepared.indices, prepared.runs):
        raw = results[run]
        verdict, why = judge_test(raw, prepared.suite, index, prepared.cpu_limit, config.float_tolerance,
                                  config.unwrap_outputs)
        verdicts.append(verdict)
        entry = {"index": index, "verdict": verdict}
        if verdict != SKIPPED:
            entry.update(cpu=raw.get("cpu"), wall=raw.get("wall"), rss_kb=raw.get("maxrss_kb"))
            if config.output_chars > 0:
                entry["output"] = program_output(raw, prepared.suite.mode, config.output_chars)
        tests.append(entry)
        if verdict == COMPILE_ERROR:
            return result_row(prepared.row_id, COMPILE_ERROR, 0, total, {**details, "reason": why})
        if why and not message and verdict != SKIPPED:
            message = why
    verdict, passed, reward = summarize(verdicts, total)
    details["tests"] = tests
    if message:
        details["message"] = message
    return result_row(prepared.row_id, verdict, passed, total, details, reward)


def verify_submission(row: Submission | dict, pool, config: JudgeConfig = JudgeConfig()) -> dict:
    """Judge one row on a SandboxPool. Never raises for the row's content or a sandbox fault."""
    prepared = prepare(row, config)
    if isinstance(prepared, dict):
        return prepared
    try:
        response = pool.run(prepared.job, timeout=prepared.timeout_s + pool.config.job_slack_s)
    except SandboxUnavailable as exc:
        return result_row(prepared.row_id, SANDBOX_ERROR, 0, len(prepared.indices),
                          {"reason": f"sandbox unavailable: {exc}"})
    except ProgramFault as exc:  # it brought down every fresh container it ran in: scored against it
        return result_row(prepared.row_id, exc.verdict, 0, len(prepared.indices),
                          {"reason": str(exc), "attempts": len(exc.faults)})
    return judge(prepared, response, config)


def verify_safely(row: Submission | dict, pool, config: JudgeConfig = JudgeConfig()) -> dict:
    """verify_submission, except that a bug in the judge costs this row (sandbox_error naming the
    exception), not the batch it came in."""
    try:
        return verify_submission(row, pool, config)
    except Exception as exc:
        row_id = row.get("id") if isinstance(row, dict) else getattr(row, "id", None)
        log.exception("verifying row %r", row_id)
        return result_row(row_id, SANDBOX_ERROR, 0, 0, {"reason": f"internal error: {type(exc).__name__}: {exc}"})
