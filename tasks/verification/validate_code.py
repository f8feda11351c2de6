"""Validate code problems by running their reference solution against their tests (paper §3.2.1:
drop problems with fewer than 16 tests and problems whose reference fails).

For each code row of a dataset version (the same tests rules as `klear verify`: input_rules.py):
- no tests (absent or null), or tests the one parser
  refuses (sandbox/testcases.py)                     → dropped `invalid_tests` (detail: "missing 'tests'",
                                                       or the parser's reason)
- fewer than `min_tests` tests                       → dropped `too_few_tests`
- no reference (no ```python block in `response`),
  or the reference is not accepted on ALL its tests  → dropped `invalid_tests` (detail: the verdict)
- the reference passes, but its tests accept more than `max_survival` of the mutants of the reference
  that are shown to behave differently (tasks/verification/strength.py)
                                                     → dropped `weak_tests` (detail: survived k of n
                                                       mutants, one example mutation), or with
                                                       weak_tests="tag" kept and flagged in verifications
- the tests accept mutants that no probe input could judge, enough to make them weak if those differ
  (strength.py: undetermined)                        → kept, flagged: weak_tests null and
                                                       mutants_undetermined > 0 in verifications
- no mutant of the reference could be made (strength.py: not scored)
                                                     → kept; mutants_generated 0 and the other scoring
                                                       columns null (weak_tests null: no mutant tried
                                                       the tests, so they are never claimed strong)
- a sandbox fault that survives the sandbox's retries fails the step with sandbox.container.SandboxFault
  (never scored as a failing reference, nor as a mutant either way).
Test count: `sandbox.testcases.count_tests`, what will run and be scored as separate tests (stdin/stdout
and call-based: the inputs; assert-style: the asserts that observe the program).
Math rows pass through untouched. Output: the kept problems, the new dropped rows, one verification row
per code problem (with the mutant counts when its reference passed and scoring is on; else they are null).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import pyarrow as pa

from sandbox.container import SandboxFault
from sandbox.submission import Submission
from sandbox.testcases import InvalidTests, count_tests, test_suite_of
from tasks.grading.code_extract import extract_code
from tasks.progress import Progress, Shifted
from tasks.verification.input_rules import MISSING_TESTS, missing_tests
from tasks.verification.strength import Strength, StrengthConfig, Subject, score_test_strength
from tasks.verification.verify import VerifyConfig, verify_rows

__all__ = ["SandboxFault", "ValidationResult", "count_tests", "validate_code_problems"]


@dataclass
class ValidationResult:
    problems: pa.Table
    dropped: list[dict] = field(default_factory=list)
    verifications: list[dict] = field(default_factory=list)
    strength: dict = field(default_factory=dict)  # totals of mutant scoring (empty when it is off)


def _strength_columns(st: Strength | None) -> dict:
    """The verifications columns of mutant scoring, null where a problem was not scored: scoring off, no
    reference run, or no mutant generated (then mutants_generated says 0 and the rest stay null)."""
    if st is None or not st.scored:
        return {"mutants_generated": None if st is None else st.generated, "mutants_changing": None,
                "mutants_survived": None, "weak_tests": None, "mutant_example": None, "mutants_undetermined": None}
    return {"mutants_generated": st.generated, "mutants_changing": st.changing, "mutants_survived": st.survived,
            "weak_tests": st.weak, "mutant_example": st.example, "mutants_undetermined": st.undetermined}


def _slowest_cpu(result: dict) -> float:
    tests = (result.get("details") or {}).get("tests") or []
    return max([t.get("cpu") or 0.0 for t in tests] + [0.0])


def validate_code_problems(problems: pa.Table, min_tests: int, verify_config=None, progress: Progress | None = None,
                           strength: StrengthConfig | None = None) -> ValidationResult:
    """`strength` None: StrengthConfig()'s defaults (scoring on); StrengthConfig(mutants=0): off. Reference
    runs or mutant runs that still hit sandbox faults after the sandbox's retries raise SandboxFault.
    `progress` counts the reference runs, then the mutant runs after them (tasks/progress.py)."""
    strength = strength or StrengthConfig()
    rows = problems.to_pylist()
    drops: dict[int, tuple[str, str]] = {}
    jobs, job_rows = [], []
    for i, r in enumerate(rows):
        if r["domain"] != "code":
            continue
        if missing_tests(r):
            drops[i] = ("invalid_tests", MISSING_TESTS)
            continue
        try:
            n = len(test_suite_of(r["tests"]))
        except InvalidTests as exc:  # not JSON, or no test form: the one parser's reason
            drops[i] = ("invalid_tests", str(exc))
            continue
        tests = json.loads(r["tests"]) if isinstance(r["tests"], str) else r["tests"]
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
    for i, res in zip(job_rows, results):
        if res["verdict"] != "accepted":
            drops[i] = ("invalid_tests", f"reference solution: {res['verdict']} ({res['passed']}/{res['total']} tests passed)")
    subjects = [Subject(rows[i]["id"], job["code"], job["tests"], _slowest_cpu(res))
                for i, job, res in zip(job_rows, jobs, results) if res["verdict"] == "accepted"]
    scores = score_test_strength(subjects, strength, base,
                                 progress=Shifted(progress, len(jobs)) if progress is not None else None)
    unjudged = sum(st.unjudged for st in scores.values())
    if unjudged:
        raise SandboxFault(f"{unjudged} mutant runs hit sandbox faults (test-strength scoring)")
    verifications = []
    for i, res in zip(job_rows, results):
        st = scores.get(rows[i]["id"])
        verifications.append({"problem_id": rows[i]["id"], "verdict": res["verdict"], "passed": res["passed"],
                              "total": res["total"], "reward": res["reward"],
                              "details": json.dumps(res.get("details"), default=str), **_strength_columns(st)})
        if st is not None and st.weak is True and strength.weak_tests == "drop":
            drops[i] = ("weak_tests", f"tests accept {st.survived} of {st.changing} behaviour-changing mutants "
                                      f"of the reference (more than {strength.max_survival:g}); e.g. {st.example}")
    for i, (reason, _) in drops.items():
        if reason == "too_few_tests":
            verifications.append({"problem_id": rows[i]["id"], "verdict": "too_few_tests", "passed": None,
                                  "total": None, "reward": None, "details": drops[i][1], **_strength_columns(None)})
    kept = [r for i, r in enumerate(rows) if i not in drops]
    dropped = [{"source": rows[i]["source"], "row": rows[i].get("row"), "id": rows[i]["id"], "reason": reason, "detail": detail,
                "problem": rows[i]["problem"]} for i, (reason, detail) in sorted(drops.items())]
    summary = {}
    if strength.enabled:
        summary = {"scored": sum(st.scored for st in scores.values()),
                   "no_mutants": sum(not st.scored for st in scores.values()),
                   "weak": sum(st.weak is True for st in scores.values()),
                   "undetermined": sum(st.undetermined_verdict for st in scores.values()),
                   "mutants_undetermined": sum(st.undetermined for st in scores.values()),
                   "mutants": sum(st.generated for st in scores.values()),
                   "changing": sum(st.changing for st in scores.values()),
                   "survived": sum(st.survived for st in scores.values()), "action": strength.weak_tests}
    return ValidationResult(pa.Table.from_pylist(kept, schema=problems.schema), dropped, verifications, summary)
