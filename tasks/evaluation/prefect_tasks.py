"""Thin Prefect wrapper for evaluation: runs it, records it in the catalog, publishes a table artifact."""
from __future__ import annotations

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NONE

from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.evaluation.record import record_evaluation


@task(name="evaluate", cache_policy=NONE)
def evaluate_task(model: str, name: str, path: str, config: EvalConfig, store: str | None) -> dict:
    result = evaluate(model, name, path, config)
    row = record_evaluation(model, result, config, store)
    create_table_artifact(key=f"eval-{name.lower().replace('_', '-')}", table=[row],
                          description=f"{name}: avg@{config.k} and pass@{config.k}")
    return row
