"""The `evaluate` flow: avg@k / pass@k of a checkpoint on one or more benchmarks."""
from __future__ import annotations

from prefect import flow

from tasks.evaluation.evaluate import EvalConfig
from tasks.evaluation.prefect_tasks import evaluate_task


@flow(name="evaluate", log_prints=True)
def evaluate(model: str, benchmarks: dict[str, str], config: EvalConfig = EvalConfig(),
             store: str | None = None) -> list[dict]:
    return [evaluate_task(model, name, path, config, store) for name, path in benchmarks.items()]
