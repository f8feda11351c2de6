"""Evaluation metrics over k samples per problem.

- avg@k  = mean over problems of (c / n): the mean per-sample correctness, an estimate of pass@1
  (the paper reports AIME at avg@64 and LiveCodeBench at avg@8).
- pass@k = mean over problems of 1 − C(n − c, k) / C(n, k), the unbiased estimator of Chen et al. 2021
  ("Evaluating Large Language Models Trained on Code"), n samples of which c are correct, k ≤ n.
Soft scores (code pass fractions) count as correct only when 1.0 for these metrics.
"""
from __future__ import annotations

from math import comb
from typing import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    if k > n:
        raise ValueError(f"pass@k needs k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def avg_at_k(correct: Sequence[Sequence[bool]]) -> float:
    per = [sum(c) / len(c) for c in correct if len(c)]
    return sum(per) / len(per) if per else 0.0


def mean_pass_at_k(correct: Sequence[Sequence[bool]], k: int) -> float:
    vals = [pass_at_k(len(c), sum(c), k) for c in correct if len(c)]
    return sum(vals) / len(vals) if vals else 0.0
