"""Code grading: the last ```python block after `</think>`, judged in the Docker sandbox against the
problem's tests (≤ 16 sampled). Outcome by sandbox verdict (grade.py):

    "accepted"      → CORRECT, score = 1.0
    "sandbox_error" → INFRA,   score = 0.0 (a sandbox fault; never a wrong answer)
    "invalid_tests" → INFRA,   score = 0.0 (the row's tests cannot be judged; curation drops such rows)
    anything else   → WRONG,   score = pass fraction (the soft reward); "timeout", "memory_limit",
                      "compile_error" included: the program's fault. No code block → WRONG "no_code", 0.0.

Every rollout of one problem is judged on the same sampled tests: each job row carries
`problem_id = row["id"]`, and the sandbox seeds its test sample by problem_id (sandbox/judge.py), not by
the job's own id (`<id>-<i>`, unique per rollout), so group advantages compare like with like.
"""
from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

from sandbox.config import JudgeConfig, PoolConfig
from sandbox.judge import prepare, verify_safely
from sandbox.pool import SandboxPool
from sandbox.submission import Submission
from tasks.grading.code_extract import extract_code
from tasks.grading.grade import Grade, Outcome


def grade_from_result(res: dict) -> Grade:
    """The Grade for one sandbox result row ({"verdict", "reward", "details", ...})."""
    verdict = res["verdict"]
    if verdict in ("sandbox_error", "invalid_tests"):
        return Grade(Outcome.INFRA, 0.0, verdict, str((res.get("details") or {}).get("reason", "")))
    if verdict == "accepted":
        return Grade(Outcome.CORRECT, float(res["reward"] if res.get("reward") is not None else 1.0), verdict)
    return Grade(Outcome.WRONG, float(res.get("reward") or 0.0), verdict)


def problem_key(row: dict) -> str:
    """What the sandbox seeds a problem's test sample by: its id, or (a row without one) a hash of its
    problem text and tests, so the rollouts of one problem still share their tests."""
    if row.get("id") is not None:
        return str(row["id"])
    tests = row.get("tests")
    text = json.dumps([row.get("problem"), tests if isinstance(tests, str) else json.dumps(tests, sort_keys=True)])
    return "sha1:" + hashlib.sha1(text.encode()).hexdigest()


def job_rows(items) -> tuple[list[dict], list[int], dict[int, Grade]]:
    """Sandbox job rows for the items that have code, their item indices, and the grades of those without."""
    jobs, where, settled = [], [], {}
    for i, (response, row) in enumerate(items):
        code = extract_code(response)
        if code is None:
            settled[i] = Grade(Outcome.WRONG, 0.0, "no_code")
            continue
        # the tests as the row holds them (JSON text, usually): the judge parses each distinct text once
        jobs.append(Submission(f"{row.get('id', 'row')}-{i}", code, row.get("tests"),
                               problem_id=problem_key(row)).as_row())
        where.append(i)
    return jobs, where, settled


class CodeGrader:
    """Grades code on its own sandbox pool (`workers` containers, judged `workers` at a time), started at
    the first batch that needs it and kept warm until close(): a trainer grading every step pays the
    pool start-up once."""

    def __init__(self, workers: int = 2, max_tests: int = 16, seed: int = 0, **_):
        self.workers = workers
        self.judge = JudgeConfig(max_tests=max_tests, seed=seed)
        self._pool: SandboxPool | None = None

    def grade_batch(self, items) -> list[Grade]:
        jobs, where, grades = job_rows(items)
        for i, res in zip(where, self._verify(jobs)):
            grades[i] = grade_from_result(res)
        return [grades[i] for i in range(len(items))]

    def _verify(self, jobs: list[dict]) -> list[dict]:
        """The sandbox result of each job row, in order. Rows the judge settles unrun (tests that cannot
        be judged) start no containers."""
        results = [prepare(job, self.judge) for job in jobs]
        todo = [k for k, r in enumerate(results) if not isinstance(r, dict)]
        if todo:
            if self._pool is None:
                self._pool = SandboxPool(PoolConfig(size=self.workers))
            pool = self._pool.start()
            with ThreadPoolExecutor(self.workers) as ex:
                done = ex.map(lambda k: verify_safely(jobs[k], pool, self.judge), todo)
                for k, res in zip(todo, done):
                    results[k] = res
        return results

    def close(self) -> None:
        """Stop this grader's warm sandbox containers (kept across grade_batch calls)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
