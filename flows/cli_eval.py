"""`klear eval` and `klear tag-difficulty`: sample a model on benchmarks or on the current dataset;
their settings are EvalConfig's and DifficultyConfig's fields as flags."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Optional

import typer

from flows.cli_checks import (check_backend, check_benchmark, check_model, resolve_model_flag, check_nproc,
                              check_source_path, recording_store_root, store_root)
from flows.cli_common import (StoreOpt, UserError, checked, console, parse_pairs, quiet_children_after_interrupt,
                              quiet_prefect_defaults, run_flow)
from flows.cli_config_options import build_config, with_config_options
from tasks.evaluation.config import DifficultyConfig, EvalConfig


@with_config_options(EvalConfig)
def eval_(
    model: str = typer.Option(..., "--model", help="HF model directory, pretrained model name or Hub id"),
    benchmark: list[str] = typer.Option(..., "--benchmark", help="NAME=PATH (.jsonl/.parquet canonical rows); repeat"),
    nproc: int = typer.Option(1, "--nproc", help="Worker processes, each with its own engine (one GPU each, "
                              "or a share of the CPU cores); the numbers equal one process's"),
    store: Optional[str] = typer.Option(None, "--store", help="Store whose catalog records each evaluation "
                                        "(its row in `evaluations`, per-problem results beside it); without "
                                        "it nothing is recorded, only the summary lines are printed"),
    **settings,
) -> None:
    """avg@k and pass@k on benchmarks; prints one JSON summary line per benchmark (recorded with --store)."""
    import json

    from tasks.evaluation.evaluate import load_benchmark

    check_nproc(nproc)
    model = resolve_model_flag("--model", model)
    benches = parse_pairs(benchmark, "--benchmark")
    for name, path in benches.items():
        check_source_path("--benchmark", name, path)
        try:
            load_benchmark(path)
        except ValueError as e:
            raise UserError(f"--benchmark {name}={path}: {e}") from None
    cfg = checked(lambda: build_config(EvalConfig, settings))
    check_backend(cfg.backend)
    if store is not None:
        store = recording_store_root(store, "its evaluations")
    check_model(model, max_tokens=cfg.max_tokens)
    for name, path in benches.items():  # every prompt within the context (tasks/evaluation/evaluate.py)
        check_benchmark(f"--benchmark {name}={path}", path, model, cfg.max_tokens)
    quiet_prefect_defaults()
    from flows.evaluate import evaluate as eval_flow

    with quiet_children_after_interrupt() if nproc > 1 else nullcontext():  # workers: one line on Ctrl-C
        rows = run_flow(eval_flow, model=model, benchmarks=benches, store=store, config=cfg, nproc=nproc)
    for row in rows:
        print(json.dumps(row), flush=True)


@with_config_options(DifficultyConfig)
def tag_difficulty(
    model: str = typer.Option(..., "--model", help="HF model directory (or pretrained name, Hub id) that "
                              "samples the answers"),
    nproc: int = typer.Option(1, "--nproc", help="Worker processes, each with its own engine (one GPU each, "
                              "or a share of the CPU cores); the tags equal one process's"),
    store: Optional[str] = StoreOpt,
    **settings,
) -> None:
    """Tag every problem of the current dataset with the model's pass rate and a difficulty."""
    from storage.store import Store

    check_nproc(nproc)
    model = resolve_model_flag("--model", model)
    root = store_root(store)
    if Store(root).current_version() is None:
        raise UserError(f"--store {root}: no curated dataset (run klear curate first)")
    cfg = checked(lambda: build_config(DifficultyConfig, settings))
    check_backend(cfg.backend)
    check_model(model, max_tokens=cfg.max_tokens)
    quiet_prefect_defaults()
    from flows.tag_difficulty import tag_difficulty as tag_flow

    with quiet_children_after_interrupt() if nproc > 1 else nullcontext():  # workers: one line on Ctrl-C
        v = run_flow(tag_flow, model=model, store=root, config=cfg, nproc=nproc)
    console.print(f"dataset {v['id']} (difficulty by {v['parameters']['model']}, k={cfg.k}) is now current in {Store(root).catalog_path}")
