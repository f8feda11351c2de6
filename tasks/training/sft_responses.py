"""Which teacher responses SFT trains on (SFTConfig.responses), the paper's SFT finding made a switch: on
hard problems, keeping incorrect long-CoT responses helps (the model learns from the reasoning, not the
final answer), on easy problems filtering to correct responses helps. Rules (RESPONSE_RULES):

- "all": every row with a response (no grading; the default).
- "correct": only responses graded correct (math: math-verify against `answer`; code: the program in the
  response run against `tests` in the sandbox).
- "by_difficulty": a problem tagged hard or unsolved (`klear tag-difficulty`) keeps its response whatever
  its grade; one tagged easy or medium keeps it only when correct; an untagged problem (or one tagged
  "unknown") keeps it.

A response that cannot be judged correct (no answer or tests to grade against, or an infrastructure
failure) counts as not correct. Every row is counted once in `ResponseCounts` with its outcome.
"""
from __future__ import annotations

from collections import Counter

from tasks.grading.batch import grade_samples

RESPONSE_RULES = ("all", "correct", "by_difficulty")
HARD = ("hard", "unsolved")      # difficulty tags on which every response is kept under "by_difficulty"
EASY = ("easy", "medium")        # difficulty tags on which only correct responses are kept


def response_outcome(rule: str, correct: bool, difficulty: str | None) -> str:
    """"kept_correct", "kept_incorrect_hard", "kept_untagged" or "dropped_incorrect" (module rules)."""
    if correct:
        return "kept_correct"
    if rule == "by_difficulty" and difficulty in HARD:
        return "kept_incorrect_hard"
    if rule == "by_difficulty" and difficulty not in EASY:
        return "kept_untagged"
    return "dropped_incorrect"


def select_responses(rows: list[dict], rule: str, graders: dict | None = None) -> tuple[list[dict], dict[str, int]]:
    """The rows whose response SFT trains on under `rule`, in order, and the count of each outcome."""
    if rule == "all":
        return rows, {"kept": len(rows)}
    own = graders is None
    graders = {} if own else graders
    try:
        grades = grade_samples(rows, [[r["response"]] for r in rows], graders)
    finally:
        if own:
            for g in graders.values():
                g.close()
    kept, counts = [], Counter()
    for row, (grade,) in zip(rows, grades):
        outcome = response_outcome(rule, grade.correct, row.get("difficulty"))
        counts[outcome] += 1
        if outcome.startswith("kept"):
            kept.append(row)
    return kept, dict(sorted(counts.items()))
