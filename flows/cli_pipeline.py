"""`klear demo` and `klear pipeline`: the end-to-end flow on the bundled data, then its summary."""
from __future__ import annotations

import os
from typing import Optional

import typer
from rich.table import Table

from flows.cli_checks import store_root
from flows.cli_common import StoreOpt, UserError, console, fault_line, quiet_prefect_defaults, run_flow, starting
from flows.cli_curate import print_curation_summary


def demo(store: Optional[str] = StoreOpt) -> None:
    """The whole pipeline on the bundled demo data with a tiny model on CPU (minutes):
    curate → verify → SFT → difficulty → RL → evaluate base / SFT / RL."""
    _run_pipeline(store, seed=0, scale=1.0)


def pipeline(
    store: Optional[str] = StoreOpt,
    seed: int = typer.Option(0, "--seed"),
    scale: float = typer.Option(1.0, "--scale", help="Size of the bundled demo data"),
) -> None:
    """The end-to-end pipeline on the bundled data: curate → verify → SFT → difficulty → RL → evaluate."""
    _run_pipeline(store, seed, scale)


def _run_pipeline(store: str | None, seed: int, scale: float) -> None:
    import json

    from storage.store import Store

    root = store_root(store)
    config = _pipeline_config(root, seed, scale)
    quiet_prefect_defaults()
    starting("pipeline", f"store {root}; each stage prints a line as it starts and ends")
    from flows.pipeline import pipeline as pipeline_flow

    state = run_flow(pipeline_flow, config, return_state=True)
    try:
        summary = state.result()  # a failed run raises its error here, as a plain call would
    except ValueError as e:  # bad input the stages name (file, row, directory): one line
        raise UserError(str(e)) from None
    except Exception as e:  # no room on the disk: one line (cli_common.fault_line); others are bugs
        if (line := fault_line(e)) is None:
            raise
        raise UserError(line) from None
    st = Store(root)
    print_curation_summary(st.load_version(summary["dataset"]).__dict__, root)
    t = Table(title=f"held-out {summary['benchmark']}: avg@{summary['k']} by stage")
    for col in ("stage", "avg@k", "checkpoint"):
        t.add_column(col)
    for stage in ("base", "sft", "rl"):
        t.add_row(stage, f"{summary[stage + '_avg_at_k']:.3f}", summary[stage])
    console.print(t)
    console.print("catalog tables: datasets, checkpoints, evaluations; views: problems, dropped, verifications")
    console.print(f"TensorBoard: .venv/bin/tensorboard --logdir {st.path('models')}")
    console.print(_prefect_ui_line(state.state_details.flow_run_id))
    console.print(json.dumps(summary))


PIPELINE_FLAGS = {"demo_scale": "--scale", "seed": "--seed", "store": "--store"}  # field → this command's flag
MAX_SEED = (1 << 63) - 1  # the stages' samplers take 63-bit seeds (tasks/generation/sampling.py); the config
#   itself has no upper bound, so a larger one would fail stages in


def _pipeline_config(root: str, seed: int, scale: float):
    """The run's PipelineConfig, checked before any work: a refused value is one line naming this command's
    flag for it (`--scale`, where the config's own message would name the field's `--demo-scale`)."""
    from tasks.config_checks import ConfigError
    from tasks.pipeline.config import PipelineConfig, demo_rl

    if seed > MAX_SEED:
        raise UserError(f"--seed must be at most {MAX_SEED} (got {seed})")
    try:
        return PipelineConfig(store=root, seed=seed, demo_scale=scale, rl=demo_rl(scale))
    except ConfigError as e:
        flag = PIPELINE_FLAGS.get(e.field)
        raise UserError(f"{flag} {e.detail}" if flag else e.message) from None


def _prefect_ui_line(flow_run_id) -> str:
    """Where to see the run: its page on a configured Prefect server; how to get one after a temporary server."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value() if os.environ.get("PREFECT_API_URL") else None
    if ui:
        return f"Prefect UI: {ui.rstrip('/')}/runs/flow-run/{flow_run_id}  (flows, logs and artifacts of this run)"
    return ("Prefect UI: this run used a temporary server, now stopped; run `prefect server start`, set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api and re-run to see its flows and artifacts (stages are cached)")
