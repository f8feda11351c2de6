"""RL prompts: canonical problems that can be rewarded (math with an answer, code with tests), from a
store (its current dataset version) or a canonical file, selected by their difficulty tags: per domain a
pass-rate window (config.SelectionConfig; paper: code pass rate ≥ 0.5 over 16 samples, math a majority of
16 samples pass), and an explicit rule for problems without a tag. Every problem of the data is counted
once, as kept or with the reason it was left out (`Selection`).

Problems whose prompt does not fit the model's context minus max_tokens (tasks/generation/base.py) are
left out before sampling (`keep_fitting`): counted, named in a warning, and never the end of the run
unless no problem is left."""
from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from tasks.curation.problems import read_problems
from tasks.generation.base import chat_prompt, describe_too_long, fit_prompts
from tasks.training.config import SelectionConfig

log = logging.getLogger(__name__)

# why a problem of the data is not trained on (or "kept", "kept_untagged"), in the order they are tested
REASONS = ("other_domain", "not_rewardable", "below_window", "above_window", "untagged_excluded")


@dataclass
class Selection:
    """Per domain, how many problems were kept and why the others were left out (REASONS); and the fate of
    each problem by its id (`fates`), which train_rl writes as `selection.jsonl` beside the checkpoint."""
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    fates: list[dict] = field(default_factory=list)  # {"id", "domain", "outcome"}, in the data's order

    def add(self, domain: str, outcome: str, problem_id: str | None = None) -> None:
        self.counts.setdefault(domain, Counter())[outcome] += 1
        self.fates.append({"id": problem_id, "domain": domain, "outcome": outcome})

    def prompt_too_long(self, rows: list[dict]) -> None:
        """Kept problems left out after all because their prompt does not fit (keep_fitting)."""
        left = {r.get("id") for r in rows}
        for fate in self.fates:
            if fate["outcome"].startswith("kept") and fate["id"] in left:
                fate["outcome"] = "prompt_too_long"

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {d: dict(sorted(c.items())) for d, c in sorted(self.counts.items())}

    def line(self) -> str:
        """One line for logs and reports: `math: 120 kept (4 untagged), 30 below window; code: ...`."""
        parts = []
        for d, c in self.as_dict().items():
            kept = c.get("kept", 0) + c.get("kept_untagged", 0)
            items = [f"{kept} kept" + (f" ({c['kept_untagged']} untagged)" if c.get("kept_untagged") else "")]
            items += [f"{c[r]} {r.replace('_', ' ')}" for r in REASONS if c.get(r)]
            parts.append(f"{d}: " + ", ".join(items))
        return "; ".join(parts)


    def knobs(self) -> str:
        """The settings that would keep what was left out, for the reasons that left problems out: each as
        its RLConfig name (the same under `rl:` in a pipeline config, or in a deployment's parameters) with
        `klear rl`'s flag beside it, so the advice holds wherever RL was started."""
        ways = []
        for d, c in self.as_dict().items():
            if c.get("below_window"):
                ways.append(f"a lower selection.{d}_min (--selection-{d}-min)")
            if c.get("above_window"):
                ways.append(f"a higher selection.{d}_max (--selection-{d}-max)")
        if any(c.get("untagged_excluded") for c in self.counts.values()):
            ways.append("selection.untagged keep (--selection-untagged keep)")
        if any(c.get("other_domain") for c in self.counts.values()):
            ways.append("domains naming the data's domains (--domains)")
        if any(c.get("not_rewardable") for c in self.counts.values()):
            ways.append("data with answers (math) or tests (code)")
        return ", ".join(ways)


def select_problem(row: dict, domains: tuple[str, ...], selection: SelectionConfig) -> str:
    """"kept", "kept_untagged" or the REASONS entry that leaves `row` out (the module rule)."""
    domain = row["domain"]
    if domain not in domains:
        return "other_domain"
    if (domain == "math" and row.get("answer") is None) or (domain == "code" and not row.get("tests")):
        return "not_rewardable"
    pr = row.get("pass_rate")
    if pr is None:
        return "kept_untagged" if selection.untagged == "keep" else "untagged_excluded"
    low, high = selection.window(domain)
    if low is not None and pr < low:
        return "below_window"
    if high is not None and pr > high:
        return "above_window"
    return "kept"


def load_rl_rows(data: str, domains: tuple[str, ...] = ("math", "code"),
                 selection: SelectionConfig | None = None) -> tuple[list[dict], str, Selection]:
    """The problems RL trains on, the dataset id, and the per-domain counts; ValueError when none is left."""
    rows, dataset = read_problems(data)
    keep, counts = select_rows(rows, domains, selection or SelectionConfig(), data)
    return keep, dataset, counts


def select_rows(rows: list[dict], domains: tuple[str, ...], selection: SelectionConfig,
                data: str = "data") -> tuple[list[dict], Selection]:
    """The rows `select_problem` keeps, in order, and the counts; ValueError naming `data` if none is left."""
    keep, counts = [], Selection()
    for r in rows:
        outcome = select_problem(r, domains, selection)
        counts.add(r["domain"], outcome, r.get("id"))
        if outcome.startswith("kept"):
            keep.append(r)
    if not keep:
        ways = counts.knobs()
        raise ValueError(f"{data}: no rewardable problems (math with an answer, code with tests) in "
                         f"{', '.join(domains)} within the pass-rate windows ({counts.line()})"
                         + (f"; try {ways}" if ways else ""))
    return keep, counts


def keep_fitting(rows: list[dict], tok, context_length: int | None, max_tokens: int,
                 data: str, selection: Selection | None = None) -> tuple[list[dict], int]:
    """The rows whose chat prompt fits (module rule) and how many were left out (their fate in `selection`
    becomes prompt_too_long); ValueError if none fit."""
    fits, too_long = fit_prompts(tok, context_length, [chat_prompt(tok, r["problem"]) for r in rows], max_tokens)
    if too_long:
        log.warning("%s: %s", data, describe_too_long(too_long, context_length, max_tokens,
                                                      lambda i: f"problem {rows[i].get('id', i)}"))
    if not fits:
        raise ValueError(f"{data}: no problem's prompt fits the model's context {context_length} minus "
                         f"max_tokens {max_tokens}")
    if selection is not None and too_long:
        selection.prompt_too_long([rows[t.index] for t in too_long])
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
