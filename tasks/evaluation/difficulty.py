"""Difficulty tags from model pass rates (paper §3.1/§3.2.1: difficulty judged by sampling a model).

For each problem of a dataset version: sample k responses (temperature 0.6 / top_p 0.95 by default), grade
them (graders registry), and add
    pass_rate = correct / graded,  k,  infra_samples,  difficulty_model = checkpoint id,
    difficulty = "unsolved" if pass_rate == 0, "hard" if < hard_below, "medium" if < easy_from, else "easy"
as a child dataset version (kind "difficulty"). Code counts as correct only when all tests pass.
Infra outcomes (sandbox fault, grader hang, ungradable row; tasks/grading/grade.py) say nothing about the
model: graded = k − infra_samples, and a problem whose k samples were all infra gets pass_rate null and
difficulty "unknown". The version's parameters report `infra_samples` and `unknown_problems` in total.
RL data selection later filters on pass_rate (paper: code ≥ 0.5 of 16 samples; math: a majority of 16).
"""
from __future__ import annotations

from dataclasses import asdict

import pyarrow as pa

from storage.checkpoints import checkpoint_id
from storage.keys import code_version, hash_json, short_id
from storage.store import DatasetVersion, Store
from tasks.evaluation.config import DifficultyConfig


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
                             parent: str | None = None, generator=None) -> DatasetVersion:
    from tasks.evaluation.evaluate import grade_samples
    from tasks.generation.base import SamplingParams, chat_prompt
    from tasks.generation.select import make_generator

    store = Store(store_root)
    parent = parent or store.current_version()
    if parent is None:
        raise ValueError(f"store {store.root} has no curated dataset: run `klear curate` first")
    model_id = checkpoint_id(model_dir)
    vid = difficulty_version_id(parent, model_id, cfg)
    if store.has_version(vid):
        return store.load_version(vid)
    pv = store.load_version(parent)
    problems = store.read_table(parent, "problems")
    rows = problems.to_pylist()
    gen = generator or make_generator(model_dir, cfg.backend)
    comps = gen.generate([chat_prompt(gen.tok, r["problem"]) for r in rows],
                         SamplingParams(n=cfg.k, temperature=cfg.temperature, top_p=cfg.top_p,
                                        max_tokens=cfg.max_tokens, seed=cfg.seed))
    graders: dict = {}
    try:
        grades = grade_samples(rows, [[c.text for c in cs] for cs in comps], graders)
    finally:
        for g in graders.values():
            g.close()
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
                                         "unknown_problems": sum(r is None for r in rates)},
                             inputs=pv.inputs)
    return store.write_version(version, {"problems": tagged, "dropped": store.read_table(parent, "dropped")})
