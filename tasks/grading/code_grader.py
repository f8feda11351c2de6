"""Code grading: the last ```python block after `</think>`, judged in the Docker sandbox against the
problem's tests (≤ 16 sampled, seeded per row). score = passed/total (soft reward), correct = accepted.
No code block → score 0 ("no_code"); a sandbox fault → detail "sandbox_error" (never a wrong answer)."""
from __future__ import annotations

import json

from tasks.grading.code_extract import extract_code
from tasks.grading.grade import Grade


class CodeGrader:
    def __init__(self, workers: int = 2, max_tests: int = 16, seed: int = 0, **_):
        from sandbox.config import JudgeConfig, PoolConfig
        from tasks.verification.verify import VerifyConfig

        self.owner = f"code-grader-{id(self):x}"  # its containers stay warm from one batch to the next
        self.config = VerifyConfig(executor="threads", workers=workers, judge=JudgeConfig(max_tests=max_tests, seed=seed),
                                   pool=PoolConfig(size=workers), pool_owner=self.owner)

    def grade_batch(self, items) -> list[Grade]:
        from tasks.verification.verify import verify_rows

        grades: list[Grade | None] = [None] * len(items)
        jobs, where = [], []
        for i, (response, row) in enumerate(items):
            code = extract_code(response)
            if code is None:
                grades[i] = Grade(0.0, False, "no_code")
                continue
            tests = row.get("tests")
            jobs.append({"id": f"{row.get('id', 'row')}-{i}", "code": code,
                         "tests": json.loads(tests) if isinstance(tests, str) else tests})
            where.append(i)
        for i, res in zip(where, verify_rows(jobs, self.config) if jobs else []):
            if res["verdict"] == "sandbox_error":
                grades[i] = Grade(0.0, False, "sandbox_error")
            else:
                grades[i] = Grade(float(res["reward"] or 0.0), res["verdict"] == "accepted", res["verdict"])
        return grades

    def close(self) -> None:
        """Stop this grader's warm sandbox containers (kept across grade_batch calls)."""
        from tasks.verification.worker import close_pools

        close_pools(self.owner)
