"""One program to judge: the record `klear verify` reads per row, and the one graders and validation build.

    Submission(id="p1-0", code="def f(x): ...", tests={...}, problem_id="p1").as_row()

`tests` is any form sandbox/testcases.py parses (the one tests parser). `problem_id` keys the test sample,
so every rollout of one problem is scored on the same tests; without it the row's own id is the key.
Rows cross process boundaries (Dask, files) as plain dicts: `as_row()` / `from_row()`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Submission:
    id: Any
    code: str | None
    tests: Any
    language: str = "python"  # python | cpp (and their aliases, see judge.LANGUAGES)
    time_limit: float | None = None  # CPU seconds per test; None: the judge's default
    problem_id: Any = None  # the test sample's key (the problem, not the rollout)

    def as_row(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None or k in ("id", "code", "tests")}

    @classmethod
    def from_row(cls, row: dict) -> "Submission":
        """The row's fields, as given (the judge validates them and reports a bad one as the row's verdict)."""
        return cls(row.get("id"), row.get("code"), row.get("tests"), row.get("language") or "python",
                   row.get("time_limit"), row.get("problem_id"))

    @property
    def sample_key(self) -> Any:
        return self.id if self.problem_id is None else self.problem_id
