"""The `rl` flow (GPPO by default) and the `ablate` flow (any RL settings × seeds on the same data)."""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures, short_name
from storage import paths
from storage.checkpoints import recorded_checkpoint_id
from storage.keys import hash_file, hash_json, short_id
from storage.refs import data_ref
from storage.store import Store, resolve_store, store_of
from tasks.pipeline.stages import TRAINING_CODE, finished, stage_key
from tasks.reporting import chart_markdown, plot_arms
from tasks.training.ablation import (TRAINING_FIGURES, ablation_markdown, arm_config, arms, label, pairwise,
                                     repeated_run, run_figures, summarize, training_figures)
from tasks.training.metrics import read_metrics
from tasks.training.launch import run_rl
from tasks.training.nodes import NodeLayout, node_layout
from tasks.training.prefect_tasks import rl_train_task
from tasks.training.rl import RLConfig


@flow(name="rl", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("rl", lambda param: short_name(param("out"))))
@one_line_failures
def rl(model: str, data: str, out: str, config: Annotated[RLConfig, ConfigForm(RLConfig)] = RLConfig(),
       resume: bool = False, store: str | None = None, nproc: int = 1, nnodes: int = 1, node_rank: int = 0,
       rdzv_endpoint: str | None = None) -> dict:
    """Policy-gradient RL from `model` on the rewardable problems of `data` (a store or canonical file).
    The checkpoint is registered as `sft` registers its own (`store`, else data's store, else the default).
    `nproc` > 1 launches torchrun over that many local processes (`config.strategy`: ddp or fsdp).
    Several nodes: one run per node, as the `sft` flow's (node 0's run reports and registers).

    Args:
        model: HF model directory to start from (usually the SFT checkpoint)
        data: a store (its current dataset), STORE#VERSION, or a canonical .jsonl/.parquet file
        out: output directory: the HF checkpoint, checkpoints/, metrics.jsonl, reward.png
        config: RL settings (`klear rl`'s flags)
        resume: continue from the latest checkpoint in `out`
        store: store whose catalog records the checkpoint (default: the one `data` names)
        nproc: processes (GPUs) for torchrun; 1 trains in the flow's own process
        nnodes: machines the run spans (`nproc` processes on each); 1 trains on this one
        node_rank: this machine's place, 0 to nnodes - 1 (node 0 hosts the rendezvous and writes `out`)
        rdzv_endpoint: HOST:PORT of node 0's rendezvous, the same on every node (with nnodes > 1)
    """
    nodes = node_layout(nnodes, node_rank, rdzv_endpoint, environ={})  # parameters only: one line if wrong
    store = store or store_of(data) or resolve_store(None)
    if not nodes.is_main:
        run_rl(model, data, out, config, resume, nproc, nodes=nodes)
        return {"out": out, "nnodes": nodes.nnodes, "node_rank": nodes.node_rank}
    return rl_train_task(model, data, out, config, resume, store, nproc, nodes)


@flow(name="ablate", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("ablate", lambda param: "-".join(param("vary", {}) or {}) or "arms"))
@one_line_failures
def ablate(model: str, data: str, out: str, benchmark: str,
           vary: dict[str, list] = {"loss": ["gppo", "grpo", "cispo"]}, seeds: list[int] = [1, 2],
           config: Annotated[RLConfig, ConfigForm(RLConfig)] = RLConfig(), store: str | None = None,
           nproc: int = 1, arm_list: list[dict] | None = None, nnodes: int = 1, node_rank: int = 0,
           rdzv_endpoint: str | None = None) -> dict:
    """Train one RL run per (arm, seed) from the same model and data — the arms are every combination of
    the `vary` values (tasks/training/ablation.py), or `arm_list` as given — evaluating held-out avg@k at
    step 0 and every `config.eval_every` steps; report per arm the held-out figures (step 0, final, best,
    gain, area under the curve), each a mean over seeds with its 95% interval, and for each pair of arms
    whether their areas are separated at 95% (Welch's t). Runs are content-addressed under `out`: a rerun
    trains nothing, an added seed or arm trains only that run.

    Args:
        model: HF model directory every run starts from (usually the SFT checkpoint)
        data: a store (its current dataset), STORE#VERSION, or a canonical .jsonl/.parquet file
        out: directory of the runs (one per arm and seed, content-addressed) and the ablation's chart and tables
        benchmark: held-out canonical file evaluated at step 0 and every `config.eval_every` steps
        vary: RL setting → the values to try; the arms are every combination
        seeds: the seeds each arm runs with
        config: the RL settings every arm starts from (`klear ablate`'s flags)
        store: store whose catalog records the checkpoints and the ablation (default: the one `data` names)
        nproc: processes (GPUs) for torchrun per run; 1 trains in the flow's own process
        arm_list: the arms as given (each a dict of settings), instead of the combinations of `vary`
        nnodes: machines each run spans (`nproc` processes on each); 1 trains on this one
        node_rank: this machine's place, 0 to nnodes - 1; node 0 hosts the rendezvous, writes `out` and
            reports the ablation, the others only run their ranks of each run, in the same order
        rdzv_endpoint: HOST:PORT of node 0's rendezvous for the first run; run i uses PORT + i
    """
    nodes = node_layout(nnodes, node_rank, rdzv_endpoint, environ={})  # parameters only: one line if wrong
    store = store or store_of(data) or resolve_store(None)
    cfg = replace(config, eval_benchmark=benchmark, eval_every=config.eval_every or max(1, config.steps // 4))
    chosen = arm_list if arm_list else arms(vary)
    plan = [(arm, seed, arm_config(cfg, arm, seed)) for arm in chosen for seed in seeds]  # all checked first
    if twice := repeated_run(plan):
        raise ValueError(f"seeds {seeds} / arms: {twice}; each run must be a distinct one")
    if problem := nodes.runs_problem(len(plan)):
        raise ValueError(f"rdzv_endpoint {rdzv_endpoint}: {problem}")
    if not nodes.is_main:
        return follow_runs(model, data, out, plan, nproc, nodes)
    ablation = short_id("ab", hash_json({"model": recorded_checkpoint_id(model), "data": data_key(data),
                                         "benchmark": benchmark, "vary": vary if not arm_list else None,
                                         "arms": arm_list or None, "seeds": seeds, "config": asdict(cfg)}))
    runs, curves = [], {}
    for i, (arm, seed, run_cfg) in enumerate(plan):
        run_out = run_dir(out, model, data, run_cfg)
        named = rl_train_task.with_options(task_run_name=f"rl {label(arm)} seed {seed}")  # its artifacts too
        res = finished_run(run_out) or named(model, data, str(run_out), run_cfg, True, store, nproc, nodes.for_run(i))
        metrics = read_metrics(run_out)
        runs.append({"ablation": ablation, "arm": label(arm), "settings": arm, "loss": run_cfg.loss, "seed": seed,
                     **res, **run_figures(metrics), **training_figures(metrics)})
        # a step that trained nothing (every group filtered) logs entropy/clip fractions as 0: not a measurement
        curves.setdefault(label(arm), []).append(
            [{k: v for k, v in r.items() if k not in TRAINING_FIGURES or r.get("trained_rollouts", 1) > 0}
             for r in metrics])
    table, pairs = summarize(runs), pairwise(runs, "auc")
    chart = plot_arms(curves, ABLATION_PANELS, Path(out) / f"{ablation}.png",
                      f"Ablation {ablation}: mean over seeds {seeds}, 95% bands")
    (Path(out) / f"{ablation}.json").write_text(json.dumps(
        {"ablation": ablation, "model": model, "data": data, "benchmark": benchmark,
         "vary": None if arm_list else vary, "arms": arm_list, "seeds": seeds, "config": asdict(cfg),
         "table": table, "pairs": pairs, "runs": runs}, indent=1, default=str))
    (Path(out) / f"{ablation}.md").write_text(ablation_markdown(table, pairs, cfg.eval_k, seeds))
    create_markdown_artifact(key="ablation-chart", markdown=chart_markdown(chart, f"Ablation {ablation} by step"),
                             description="per arm, mean over seeds with 95% bands: held-out avg@k, token entropy "
                                         "and the gradient's shares from the low / high clip regions, by step")
    create_table_artifact(key="ablation-table", table=table,
                          description=f"Ablation {ablation}: held-out avg@{cfg.eval_k}, mean (95% interval) over "
                                      f"seeds {seeds}")
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cat = Store(store).catalog
    for r in runs:
        cat.insert_once("ablations", {"id": f"{ablation}-{r['arm']}-{r['seed']}", "ablation": ablation,
                                      "arm": r["arm"], "settings": r["settings"], "loss": r["loss"],
                                      "seed": r["seed"], "checkpoint": r["checkpoint"],
                                      "final_avg_at_k": r["final_avg_at_k"], "best_avg_at_k": r["best_avg_at_k"],
                                      "steps": r["steps"], "benchmark": paths.recorded(benchmark),  # any cwd
                                      "created": created})
    return {"table": table, "pairs": pairs, "chart": str(chart)}


ABLATION_PANELS = ("eval_avg_at_k", "entropy", "grad_share_low", "grad_share_high")


def follow_runs(model: str, data: str, out: str, plan: list, nproc: int, nodes: NodeLayout) -> dict:
    """A node other than 0 of an ablation: its ranks of each run of the plan, in node 0's order, skipping
    the runs finished before (`out` is storage every node shares, so both nodes skip the same ones); node 0
    registers, evaluates and reports."""
    ran = 0
    for i, (_, _, run_cfg) in enumerate(plan):
        run_out = run_dir(out, model, data, run_cfg)
        if not finished(run_out):
            run_rl(model, data, str(run_out), run_cfg, True, nproc, nodes=nodes.for_run(i))
            ran += 1
    return {"out": out, "nnodes": nodes.nnodes, "node_rank": nodes.node_rank, "runs": len(plan), "trained": ran}


def data_key(data: str) -> str:
    """What identifies the training data: a file's content hash, or a store's dataset version."""
    ref = data_ref(data)
    if ref is None:
        return hash_file(data)
    return ref.version or Store(ref.store).current_version() or ref.store


def run_dir(out: str, model: str, data: str, cfg: RLConfig) -> Path:
    """Where one ablation run trains: keyed by the model, the data, its whole config and the training code."""
    return Path(out) / stage_key("rl", {"model": recorded_checkpoint_id(model), "data": data_key(data)}, cfg, TRAINING_CODE)


def finished_run(run_out: Path) -> dict | None:
    """A finished run's figures from its lineage and metrics, or None to train it."""
    if not finished(run_out):
        return None
    rows = read_metrics(run_out)
    figs = run_figures(rows)
    return {"checkpoint": recorded_checkpoint_id(run_out), "out": str(run_out), "steps": rows[-1]["step"] if rows else 0,
            "final_reward": rows[-1].get("reward_mean") if rows else None,
            "final_avg_at_k": figs["final_avg_at_k"], "best_avg_at_k": figs["best_avg_at_k"]}
