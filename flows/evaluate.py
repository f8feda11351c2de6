"""The `evaluate` flow: avg@k / pass@k of a checkpoint on one or more benchmarks. `nproc` N samples in N
worker processes (one GPU each, or a share of the CPU cores) with exactly the one-process numbers
(tasks/evaluation/evaluate.py)."""
from __future__ import annotations

from prefect import flow

from tasks.evaluation.evaluate import EvalConfig
from tasks.evaluation.prefect_tasks import evaluate_task


@flow(name="evaluate", log_prints=True)
def evaluate(model: str, benchmarks: dict[str, str], config: EvalConfig = EvalConfig(),
             store: str | None = None, nproc: int = 1) -> list[dict]:
    return [evaluate_task(model, name, path, config, store, nproc) for name, path in benchmarks.items()]
