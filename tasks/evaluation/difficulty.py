"""Difficulty tags from model pass rates (paper §3.1/§3.2.1: difficulty judged by sampling a model).

For each problem of a dataset version: sample k responses (temperature 0.6 / top_p 0.95 by default), grade
them (graders registry), and add
    pass_rate = correct / graded,  k,  infra_samples,  difficulty_model = checkpoint id,
    difficulty = "unsolved" if pass_rate == 0, "hard" if < hard_below, "medium" if < easy_from, else "easy"
as a child dataset version (kind "difficulty"). Code counts as correct only when all tests pass.
Infra outcomes (sandbox fault, grader hang, ungradable row; tasks/grading/grade.py) say nothing about the
model: graded = k − infra_samples, and a problem whose k samples were all infra gets pass_rate null and
difficulty "unknown". A problem whose prompt does not fit the model's context minus max_tokens
(tasks/generation/base.py) is not sampled: pass_rate null, difficulty "unknown", named in a warning. The
version's parameters report `infra_samples`, `unknown_problems` and `too_long_problems` in total.
RL data selection later filters on pass_rate (paper: code ≥ 0.5 of 16 samples; math: a majority of 16).

Sampling is seeded per problem (problem_seed(seed, id), tasks/generation/sampling.py), so `nproc` N worker
processes, each with its own engine on a shard of the problems (tasks/generation/parallel.py), tag exactly
as one process does; the version id does not depend on `nproc`. An engine built here is closed here (in
a finally); a `generator` handed in is left open.
"""
from __future__ import annotations

import logging
from dataclasses import asdict

import pyarrow as pa

from storage.checkpoints import recorded_checkpoint_id
from storage.keys import code_version, hash_json, short_id
from storage.store import DatasetVersion, Store
from tasks.evaluation.config import DifficultyConfig
from tasks.evaluation.evaluate import sample_and_grade
from tasks.generation.base import chat_prompt, describe_too_long, fit_prompts
from tasks.generation.sampling import problem_seeds
from tasks.generation.select import make_generator
from tasks.progress import Feed, StepProgress

log = logging.getLogger(__name__)


def tag(pass_rate: float | None, cfg: DifficultyConfig) -> str:
    if pass_rate is None:
        return "unknown"
    if pass_rate == 0:
        return "unsolved"
    if pass_rate < cfg.hard_below:
        return "hard"
    return "medium" if pass_rate < cfg.easy_from else "easy"


def pass_rate(grades) -> float | None:
    """correct / graded samples, infra outcomes left out; None when every sample was infra."""
    graded = [g for g in grades if not g.infra]
    return sum(g.correct for g in graded) / len(graded) if graded else None


def difficulty_version_id(parent: str, model_id: str, cfg: DifficultyConfig) -> str:
    return short_id("ds", hash_json({"parent": parent, "stage": "difficulty", "model": model_id,
                                     "config": asdict(cfg),
                                     "code": code_version(("tasks.evaluation", "tasks.grading", "tasks.generation"))}))


def build_difficulty_version(store_root: str | None, model_dir: str, cfg: DifficultyConfig,
                             parent: str | None = None, generator=None,
                             feed: Feed | None = None, nproc: int = 1) -> DatasetVersion:
    """`feed` gets the progress lines (problems done, samples, correct so far) at most every few seconds
    (tasks/progress.py StepProgress), as stderr does. `nproc` > 1: that many worker processes (module
    docstring); not with a `generator`."""
    if generator is not None and nproc != 1:
        raise ValueError(f"difficulty: nproc {nproc} builds its own engines, one per process; a given "
                         "generator runs in this process (nproc 1)")

    store = Store(store_root)
    parent = parent or store.current_version()
    if parent is None:
        raise ValueError(f"store {store.root} has no curated dataset: run `klear curate` first")
    model_id = recorded_checkpoint_id(model_dir)
    vid = difficulty_version_id(parent, model_id, cfg)
    if store.has_version(vid):
        return store.load_version(vid)
    pv = store.load_version(parent)
    problems = store.read_table(parent, "problems")
    rows = problems.to_pylist()
    own_gen = generator is None
    gen = generator or make_generator(model_dir, cfg.backend, nproc=nproc)
    try:
        prompts = [chat_prompt(gen.tok, r["problem"]) for r in rows]
        fits, too_long = fit_prompts(gen.tok, getattr(gen, "context_length", None), prompts, cfg.max_tokens)
        if too_long:
            log.warning("difficulty: %s", describe_too_long(too_long, gen.context_length, cfg.max_tokens,
                                                            lambda i: f"problem {rows[i]['id']}"))
        params = cfg.sampling_params(cfg.k)
        sampled = [rows[i] for i in fits]
        graders: dict = {}
        report = StepProgress("difficulty", unit="problems", feed=feed)
        try:
            _, graded = sample_and_grade(gen, sampled, [prompts[i] for i in fits], params, graders, report,
                                         seeds=problem_seeds(cfg.seed, sampled))
        finally:
            report.close()
            for g in graders.values():
                g.close()
    finally:
        if own_gen:
            gen.close()
    grades: list[list] = [[] for _ in rows]  # a problem left out has no sample: pass_rate None, "unknown"
    for i, gs in zip(fits, graded):
        grades[i] = gs
    rates = [pass_rate(gs) for gs in grades]
    infra = [sum(g.infra for g in gs) for gs in grades]
    tagged = (problems.drop_columns([c for c in ("pass_rate", "k", "infra_samples", "difficulty_model", "difficulty")
                                     if c in problems.column_names])
              .append_column("pass_rate", pa.array(rates, pa.float64()))
              .append_column("k", pa.array([cfg.k] * len(rows), pa.int64()))
              .append_column("infra_samples", pa.array(infra, pa.int64()))
              .append_column("difficulty_model", pa.array([model_id] * len(rows), pa.string()))
              .append_column("difficulty", pa.array([tag(r, cfg) for r in rates], pa.string())))
    version = DatasetVersion(id=vid, kind="difficulty", rows_in=pv.rows_in, parents=[parent], counts=dict(pv.counts),
                             parameters={"model": model_id, **asdict(cfg), "infra_samples": sum(infra),
                                         "unknown_problems": sum(r is None for r in rates),
                                         "too_long_problems": len(too_long)},
                             inputs=pv.inputs)
    return store.write_version(version, {"problems": tagged, "dropped": store.read_table(parent, "dropped")})
