"""Evaluate a model on a benchmark: k samples per problem (paper: temperature 0.6, top_p 0.95), graded
by domain (graders registry), summarised as avg@k and pass@k (metrics.py). Seeded: the same model,
benchmark and seed give the same numbers.

Infra outcomes (sandbox fault, grader hang, ungradable row; tasks/grading/grade.py) are left out of avg@k
and pass@k (metrics.py) and reported: `infra` samples, and `infra_problems` whose samples were all infra
(left out of both averages)."""
from __future__ import annotations

from dataclasses import dataclass, field

from tasks.evaluation.config import EvalConfig
from tasks.evaluation.metrics import avg_at_k, infra_counts, mean_pass_at_k
from tasks.generation.base import SamplingParams, chat_prompt


@dataclass
class EvalResult:
    benchmark: str
    benchmark_path: str
    k: int
    seed: int
    avg_at_k: float
    pass_at_k: float
    n_problems: int
    per_problem: list[dict] = field(default_factory=list)
    infra: int = 0            # samples with an infra outcome, left out of avg@k / pass@k
    infra_problems: int = 0   # problems all of whose samples were infra, left out entirely

    def summary(self) -> dict:
        return {k: getattr(self, k) for k in ("benchmark", "benchmark_path", "k", "seed", "avg_at_k",
                                              "pass_at_k", "n_problems", "infra", "infra_problems")}


def load_benchmark(path: str) -> list[dict]:
    """Canonical rows of a benchmark file; a malformed row is an error naming the file and row."""
    from tasks.curation.layouts import apply_layout
    from tasks.curation.schema import Malformed, to_problem
    from tasks.curation.sources import read_source

    rows = []
    for raw in read_source(path):
        if raw.error:
            raise ValueError(f"{path} row {raw.row}: {raw.error}")
        try:
            rows.append(to_problem(apply_layout(raw.value, "canonical"), "benchmark").as_row())
        except Malformed as e:
            raise ValueError(f"{path} row {raw.row}: {e}") from None
    if not rows:
        raise ValueError(f"{path}: benchmark has no rows")
    return rows


def grade_samples(rows: list[dict], samples: list[list[str]], graders: dict) -> list[list]:
    """Grades per problem per sample, batched per domain."""
    from tasks.grading.registry import make_grader

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


def evaluate(model_dir: str, name: str, path: str, cfg: EvalConfig, generator=None, graders=None) -> EvalResult:
    from tasks.generation.select import make_generator

    rows = load_benchmark(path)
    gen = generator or make_generator(model_dir, cfg.backend)
    prompts = [chat_prompt(gen.tok, r["problem"]) for r in rows]
    params = SamplingParams(n=cfg.k, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens,
                            seed=cfg.seed)
    completions = gen.generate(prompts, params)
    samples = [[c.text for c in cs] for cs in completions]
    own = graders is None
    graders = {} if own else graders
    try:
        grades = grade_samples(rows, samples, graders)
    finally:
        if own:
            for g in graders.values():
                g.close()
    return summarize(name, path, cfg, rows, samples, grades)


def summarize(name: str, path: str, cfg: EvalConfig, rows: list[dict], samples: list[list[str]],
              grades: list[list]) -> EvalResult:
    """avg@k / pass@k over the graded samples, infra outcomes counted apart. Per problem: `correct` and
    `n` over graded samples, `infra` samples left out, `scores` per sample (None for infra)."""
    correct = [[None if g.infra else g.correct for g in gs] for gs in grades]
    per = [{"id": r["id"], "domain": r["domain"], "correct": sum(x is True for x in c),
            "n": sum(x is not None for x in c), "infra": sum(x is None for x in c),
            "scores": [None if g.infra else g.score for g in gs], "sample": s[0] if s else ""}
           for r, c, gs, s in zip(rows, correct, grades, samples)]
    infra, infra_problems = infra_counts(correct)
    return EvalResult(name, path, cfg.k, cfg.seed, avg_at_k(correct), mean_pass_at_k(correct, cfg.k), len(rows),
                      per, infra, infra_problems)
