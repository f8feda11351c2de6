"""Source scoring for `--top-sources K` (paper §3.1: a few high-quality sources beat many).

The paper judges a source by the SFT accuracy it yields, which needs a training run per source. This is a
cheap proxy computed from the rows alone, documented so users can reason about it:

    score(source) = valid_fraction × mean(row_quality)

valid_fraction: well-formed rows / all rows of the source.
row_quality (0..1) is the mean of the checks that apply to the row:
    - it has a response whose reasoning is closed (`</think>` present, or no `<think>` at all);
    - math: it has a reference answer; the response's last \\boxed{} equals it (whitespace ignored);
    - code: it has tests; the response contains a ```python block.
Ties keep the order in which the sources were given.
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

from tasks.curation.schema import Problem
from tasks.grading.math_answers import last_boxed

_PY_BLOCK = re.compile(r"```(?:python|py)\s*\n", re.IGNORECASE)


def row_quality(p: Problem) -> float:
    resp = p.response or ""
    checks = [bool(resp) and ("</think>" in resp or "<think>" not in resp)]
    if p.domain == "math":
        checks.append(p.answer is not None)
        boxed = last_boxed(resp)
        checks.append(boxed is not None and p.answer is not None and
                      "".join(boxed.split()) == "".join(p.answer.split()))
    else:
        checks.append(p.tests is not None)
        checks.append(bool(_PY_BLOCK.search(resp)))
    return sum(checks) / len(checks)


def score_sources(valid: Mapping[str, Iterable[Problem]], rows_in: Mapping[str, int]) -> dict[str, float]:
    scores = {}
    for name, total in rows_in.items():
        rows = list(valid.get(name, ()))
        scores[name] = source_score(len(rows), sum(map(row_quality, rows)), total)
    return scores


def source_score(valid: int, quality_sum: float, rows_in: int) -> float:
    """valid_fraction × mean(row_quality), from counts (a source read in batches sums as it goes)."""
    return (valid / rows_in if rows_in else 0.0) * (quality_sum / valid if valid else 0.0)


def top_sources(scores: Mapping[str, float], k: int) -> list[str]:
    order = list(scores)  # insertion order = the order given
    return sorted(order, key=lambda n: (-scores[n], order.index(n)))[:k]
