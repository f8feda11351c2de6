"""Validate code problems by running their reference solution against their tests (paper §3.2.1:
drop problems with fewer than 16 tests and problems whose reference fails).

For each code row of a dataset version:
- fewer than `min_tests` tests                       → dropped `too_few_tests`
- no reference (no ```python block in `response`),
  or the reference is not accepted on ALL its tests  → dropped `invalid_tests` (detail: the verdict)
- a sandbox fault that survives the sandbox's retries fails the step (never scored as a failing reference).
Test count: `sandbox.testcases.count_tests`, what will run and be scored as separate tests (stdin/stdout
and call-based: the inputs; assert-style: the asserts that observe the program).
Math rows pass through untouched. Output: the kept problems, the new dropped rows, one verification row
per code problem.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import pyarrow as pa

from sandbox.submission import Submission
from sandbox.testcases import count_tests
from tasks.grading.code_extract import extract_code

__all__ = ["SandboxFault", "ValidationResult", "count_tests", "validate_code_problems"]


class SandboxFault(RuntimeError):
    """Verification could not run (Docker unavailable or persistent infrastructure faults)."""


@dataclass
class ValidationResult:
    problems: pa.Table
    dropped: list[dict] = field(default_factory=list)
    verifications: list[dict] = field(default_factory=list)


def validate_code_problems(problems: pa.Table, min_tests: int, verify_config=None, progress=None) -> ValidationResult:
    from tasks.verification.verify import VerifyConfig, verify_rows

    rows = problems.to_pylist()
    drops: dict[int, tuple[str, str]] = {}
    jobs, job_rows = [], []
    for i, r in enumerate(rows):
        if r["domain"] != "code":
            continue
        tests = json.loads(r["tests"]) if r.get("tests") else None
        n = count_tests(tests) if tests else 0
        if n < min_tests:
            drops[i] = ("too_few_tests", f"{n} tests < --min-tests {min_tests}")
            continue
        code = extract_code(r.get("response") or "", after_think=False)
        if code is None:
            drops[i] = ("invalid_tests", "no reference solution (```python block) in the response")
            continue
        jobs.append(Submission(r["id"], code, tests).as_row())
        job_rows.append(i)
    base = verify_config or VerifyConfig()
    all_tests = max([count_tests(j["tests"]) for j in jobs] + [1])  # validate on ALL tests, not a sample
    cfg = dataclasses.replace(base, judge=dataclasses.replace(base.judge, max_tests=all_tests))
    results = verify_rows(jobs, cfg, progress=progress) if jobs else []
    faults = [res for res in results if res["verdict"] == "sandbox_error"]
    if faults:
        raise SandboxFault(f"{len(faults)} of {len(jobs)} reference runs hit sandbox faults "
                           f"(first: {faults[0]['id']}: {faults[0].get('details')})")
    verifications = []
    for i, res in zip(job_rows, results):
        verifications.append({"problem_id": rows[i]["id"], "verdict": res["verdict"], "passed": res["passed"],
                              "total": res["total"], "reward": res["reward"],
                              "details": json.dumps(res.get("details"), default=str)})
        if res["verdict"] != "accepted":
            drops[i] = ("invalid_tests", f"reference solution: {res['verdict']} ({res['passed']}/{res['total']} tests passed)")
    for i, (reason, _) in drops.items():
        if reason == "too_few_tests":
            verifications.append({"problem_id": rows[i]["id"], "verdict": "too_few_tests", "passed": None,
                                  "total": None, "reward": None, "details": drops[i][1]})
    kept = [r for i, r in enumerate(rows) if i not in drops]
    dropped = [{"source": rows[i]["source"], "row": None, "id": rows[i]["id"], "reason": reason, "detail": detail,
                "problem": rows[i]["problem"]} for i, (reason, detail) in sorted(drops.items())]
    return ValidationResult(pa.Table.from_pylist(kept, schema=problems.schema), dropped, verifications)
