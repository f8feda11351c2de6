"""What a row must be to be judged: the input rules of `klear verify` and verify_rows, checked before any
container starts. A row that breaks one is a fault of the input, never a verdict.

A submission row is an object with
- `id`: a non-blank string or an integer (not a bool), the key its result is known by;
- `code`: a string, or absent/null (then judged: compile_error "no code"; a submission without a program
  is a wrong one);
- `language` (optional; absent or null: python): one of sandbox.judge.LANGUAGES;
- `time_limit` (optional; absent or null: the judge's): CPU seconds per test, 0 < t <= the judge's
  max_time_limit_s.
In a file, no two rows share an id (`id_key`): results are known by their id, so a second row carrying a
first row's id could stand in for that row's result.

`tests` are checked row by row, not here: missing or malformed tests are a suite that cannot be judged,
the row's `invalid_tests` verdict with the reason (MISSING_TESTS, or the parser's: sandbox/testcases.py).

Why refuse instead of giving a verdict: by the verification output contract `sandbox_error` is for
faults outside the program (engine down, container killed), and its reward is null, left out of an
update; a bad row judged that way would both blame the infrastructure for the user's input and let a row
that can make itself look malformed trade its wrong answer for no score at all. A refused input scores
nothing.
"""
from __future__ import annotations

import math
from typing import Any

from sandbox.config import JudgeConfig
from sandbox.judge import LANGUAGES
from tasks.records.messages import shown

MISSING_TESTS = "missing 'tests'"  # the invalid_tests reason of a row without tests (missing_tests)


class BadSubmission(ValueError):
    """A row that is not a submission to judge (module rules); the message names the row and says why."""


def id_problem(row: dict) -> str | None:
    """Why the row's `id` cannot key its result, or None."""
    value = row.get("id")
    if value is None or (isinstance(value, str) and not value.strip()):
        return "no id" if value is None else "blank id"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"id must be a string or an integer, got {type(value).__name__}"
    return None


def id_key(value: Any) -> str:
    """The id as the results file writes it, so ids that would be written alike collide: in a Parquet
    result with mixed ids every id is text (io.py), where 1 and "1" are one id."""
    return value if isinstance(value, str) else str(value)


def _time_limit_problem(value: Any, judge: JudgeConfig) -> str | None:
    """The judge's own reading of `time_limit` (sandbox/judge.py prepare: float(), then the range)."""
    try:
        seconds = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if 0 < seconds <= judge.max_time_limit_s:
        return None
    return f"time_limit {shown(value)}: must be CPU seconds, 0 < t <= {judge.max_time_limit_s:g}"


def submission_problem(row: Any, judge: JudgeConfig = JudgeConfig()) -> str | None:
    """Why `row` is not a submission to judge (module rules; `tests` excepted), or None."""
    if not isinstance(row, dict):
        return f"expected an object, got {type(row).__name__}"
    if why := id_problem(row):
        return why
    code = row.get("code")
    if code is not None and not isinstance(code, str):
        return f"code must be a string, got {type(code).__name__}"
    language = row.get("language")
    if LANGUAGES.get(str(language or "python").strip().lower()) is None:
        return f"unsupported language {shown(language)} (known: {', '.join(sorted(LANGUAGES))})"
    if row.get("time_limit") is not None:
        return _time_limit_problem(row["time_limit"], judge)
    return None


def check_submissions(rows: list, judge: JudgeConfig = JudgeConfig()) -> None:
    """BadSubmission naming the first row (1-based) that breaks the module rules; duplicate ids excepted
    (verify_rows' results are in input order, one per row: the file reader refuses duplicates)."""
    for n, row in enumerate(rows, start=1):
        if why := submission_problem(row, judge):
            which = f" (id {shown(row['id'])})" if isinstance(row, dict) and row.get("id") is not None else ""
            raise BadSubmission(f"row {n}{which}: {why}")


def missing_tests(row: dict) -> bool:
    """Whether the row has no tests at all (absent, null or a blank string): invalid_tests, MISSING_TESTS."""
    tests = row.get("tests")
    return tests is None or (isinstance(tests, str) and not tests.strip())
