"""Grade k samples per problem: one grade_batch call per domain, each domain's grader made on first use."""
from __future__ import annotations

from tasks.grading.registry import make_grader


def grade_samples(rows: list[dict], samples: list[list[str]], graders: dict) -> list[list]:
    """Grades per problem per sample, batched per domain. `graders` (domain → grader) is filled with the
    graders made here; the caller closes them."""
    grades: list[list] = [[None] * len(s) for s in samples]
    by_domain: dict[str, list[tuple[int, int]]] = {}
    for i, (row, outs) in enumerate(zip(rows, samples)):
        by_domain.setdefault(row["domain"], []).extend((i, j) for j in range(len(outs)))
    for domain, idx in by_domain.items():
        if domain not in graders:
            graders[domain] = make_grader(domain)
        results = graders[domain].grade_batch([(samples[i][j], rows[i]) for i, j in idx])
        for (i, j), g in zip(idx, results):
            grades[i][j] = g
    return grades
