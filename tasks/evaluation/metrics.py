"""Evaluation metrics over k samples per problem; each sample is True (correct), False (wrong) or None
(an infra outcome: sandbox fault, stalled grader, unusable reference or tests — it says nothing about
the model; an answer the grader runs out of time on is wrong, and counts).

- avg@k  = mean over problems of (c / n): the mean per-sample correctness, an estimate of pass@1
  (the paper reports AIME at avg@64 and LiveCodeBench at avg@8).
- pass@k = mean over problems of 1 − C(n − c, k) / C(n, k), the unbiased estimator of Chen et al. 2021
  ("Evaluating Large Language Models Trained on Code"), n samples of which c are correct, k ≤ n.
Infra samples are left out: n and c count only the graded (non-None) samples. A problem with fewer than
k graded samples is scored pass@n (k lowered to n: any correct among them; a slight underestimate); a
problem with none is left out of both averages (`infra_counts` reports how many samples and problems).
Soft scores (code pass fractions) count as correct only when 1.0 for these metrics.
"""
from __future__ import annotations

from math import comb
from typing import Sequence

Samples = Sequence[Sequence["bool | None"]]


def pass_at_k(n: int, c: int, k: int) -> float:
    if k > n:
        raise ValueError(f"pass@k needs k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _graded(correct: Samples) -> list[list[bool]]:
    """Per problem the graded samples; problems with none are dropped."""
    out = [[bool(x) for x in c if x is not None] for c in correct]
    return [c for c in out if c]


def avg_at_k(correct: Samples) -> float:
    per = [sum(c) / len(c) for c in _graded(correct)]
    return sum(per) / len(per) if per else 0.0


def mean_pass_at_k(correct: Samples, k: int) -> float:
    vals = [pass_at_k(len(c), sum(c), min(k, len(c))) for c in _graded(correct)]
    return sum(vals) / len(vals) if vals else 0.0


def infra_counts(correct: Samples) -> tuple[int, int]:
    """(infra samples, problems with no graded sample) — both left out of the metrics above."""
    return (sum(x is None for c in correct for x in c),
            sum(1 for c in correct if c and all(x is None for x in c)))
