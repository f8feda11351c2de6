"""RL prompts: canonical problems that can be rewarded (math with an answer, code with tests), from a
store (its current dataset version) or a canonical file; optional pass-rate window from difficulty tags
(paper: code pass rate ≥ 0.5 over 16 samples; math: a majority of 16 samples pass).

Problems whose prompt does not fit the model's context minus max_tokens (tasks/generation/base.py) are
left out before sampling (`keep_fitting`): counted, named in a warning, and never the end of the run
unless no problem is left."""
from __future__ import annotations

import logging
import random
from functools import lru_cache

from tasks.training.sft_data import read_problems

log = logging.getLogger(__name__)


def load_rl_rows(data: str, domains: tuple[str, ...] = ("math", "code"), min_pass_rate: float | None = None,
                 max_pass_rate: float | None = None) -> tuple[list[dict], str]:
    rows, dataset = read_problems(data)
    keep = []
    for r in rows:
        if r["domain"] not in domains:
            continue
        if (r["domain"] == "math" and r.get("answer") is None) or (r["domain"] == "code" and not r.get("tests")):
            continue
        pr = r.get("pass_rate")
        if pr is not None and ((min_pass_rate is not None and pr < min_pass_rate) or
                               (max_pass_rate is not None and pr > max_pass_rate)):
            continue
        keep.append(r)
    if not keep:
        raise ValueError(f"{data}: no rewardable problems (math with an answer, code with tests) in {domains}")
    return keep, dataset


def keep_fitting(rows: list[dict], tok, context_length: int | None, max_tokens: int,
                 data: str) -> tuple[list[dict], int]:
    """The rows whose chat prompt fits (module rule) and how many were left out; ValueError if none fit."""
    from tasks.generation.base import chat_prompt, describe_too_long, fit_prompts

    fits, too_long = fit_prompts(tok, context_length, [chat_prompt(tok, r["problem"]) for r in rows], max_tokens)
    if too_long:
        log.warning("%s: %s", data, describe_too_long(too_long, context_length, max_tokens,
                                                      lambda i: f"problem {rows[i].get('id', i)}"))
    if not fits:
        raise ValueError(f"{data}: no problem's prompt fits the model's context {context_length} minus "
                         f"max_tokens {max_tokens}")
    return [rows[i] for i in fits], len(too_long)


class PromptSampler:
    """Prompts in a seeded order, reshuffled each epoch; `batch(step)` is a pure function of
    (seed, step), so a resumed run sees exactly the prompts it would have seen."""

    def __init__(self, rows: list[dict], per_step: int, seed: int):
        self.rows, self.per_step, self.seed = rows, per_step, seed

    def batch(self, step: int) -> list[dict]:
        start = step * self.per_step
        return [self.rows[self._order(i // len(self.rows))[i % len(self.rows)]]
                for i in range(start, start + self.per_step)]

    @lru_cache(maxsize=4)
    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.rows)))
        random.Random(self.seed * 7919 + epoch).shuffle(order)
        return order
