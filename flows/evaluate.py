"""The `evaluate` flow: avg@k / pass@k of a checkpoint on one or more benchmarks. `nproc` N samples in N
worker processes (one GPU each, or a share of the CPU cores) with exactly the one-process numbers
(tasks/evaluation/evaluate.py)."""
from __future__ import annotations

from typing import Annotated

from prefect import flow

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures, short_name
from tasks.evaluation.evaluate import EvalConfig
from tasks.evaluation.prefect_tasks import evaluate_task


def _model_on_benchmarks(param) -> str:
    """`sft-3f2a…-bench_math`: the checkpoint's directory name, then the benchmarks' names."""
    return "-".join([short_name(param("model")), *sorted(param("benchmarks", {}) or {})])


@flow(name="evaluate", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("evaluate", _model_on_benchmarks))
@one_line_failures
def evaluate(model: str, benchmarks: dict[str, str],
             config: Annotated[EvalConfig, ConfigForm(EvalConfig)] = EvalConfig(), store: str | None = None,
             nproc: int = 1) -> list[dict]:
    """avg@k / pass@k of `model` on each benchmark, recorded in the store's catalog when a store is given.

    Args:
        model: HF model directory (a checkpoint)
        benchmarks: NAME → PATH of each benchmark (a canonical .jsonl/.parquet)
        config: sampling settings and k (`klear eval`'s flags)
        store: store whose catalog records the evaluations (None: nothing is recorded, the rows are returned)
        nproc: worker processes that share the problems (one GPU each, or a share of the CPU cores)
    """
    return [evaluate_task(model, name, path, config, store, nproc) for name, path in benchmarks.items()]
