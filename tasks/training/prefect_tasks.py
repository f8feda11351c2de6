"""Thin Prefect wrappers for training: while it runs, a progress line every few seconds in the run log
and a progress artifact (tasks/prefect_tasks.py); after, a loss or reward chart and a markdown report, and
the checkpoint registered with lineage. Their artifacts are keyed by the task run's name: `sft-…`, `rl-…`,
and in the pipeline each RL stage's own (`rl-code-…`)."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE

from tasks.prefect_tasks import progress_feed, run_artifact_key
from tasks.progress import ProgressLine, StepProgress
from tasks.reporting import chart_markdown
from tasks.training.lineage import register_checkpoint
from tasks.training.ablation import run_figures
from tasks.training.launch import run_rl, run_sft
from tasks.training.nodes import NodeLayout
from tasks.training.rl_data import Selection
from tasks.training.sft import SFTConfig


@task(name="sft-train", task_run_name="sft", cache_policy=NONE)
def sft_train_task(model: str, data: str, out: str, config: SFTConfig, resume: bool, store: str | None,
                   nproc: int = 1, nodes: NodeLayout = NodeLayout()) -> dict:
    feed = progress_feed(run_artifact_key("progress"), f"SFT {out}")
    watch = StepProgress("sft", start_step=None, mode="off", feed=feed)  # the terminal has train_sft's own

    def on_step(step: int, total: int, values: dict) -> None:
        watch.update(step, total, tokens=values["input_tokens"], loss=values["loss"])

    result = run_sft(model, data, out, config, resume=resume, nproc=nproc, on_step=on_step, nodes=nodes)
    if nproc > 1 or nodes.multi:  # torchrun ranks report on their own stderr; here only the end is known
        feed(ProgressLine(f"sft {result.steps} steps, final loss {result.losses[-1]:.4f}", 1.0))
    batch = json.loads((Path(out) / "sft_config.json").read_text())
    batch_line = batch.get("batch_size_auto") or f"batch size {batch.get('batch_size')}"
    get_run_logger().info("%s", batch_line)
    row = register_checkpoint(out, "sft", model, result.dataset, {"sft": asdict(config), "data": data}, store)
    alt = f"SFT loss by step: {result.losses[0]:.4f} → {result.losses[-1]:.4f} over {result.steps} steps"
    create_markdown_artifact(key=run_artifact_key("loss-curve"), markdown=chart_markdown(Path(out) / "loss.png", alt),
                             description=f"SFT loss by step, {result.steps} steps")
    create_markdown_artifact(key=run_artifact_key("report"), description=f"SFT checkpoint `{row['id']}`: "
                             "where it is, what it trained on, its loss", markdown=(
        f"# SFT checkpoint `{row['id']}`\n\n- path: `{out}`\n- parent: `{row['parent']}`\n"
        f"- dataset: `{result.dataset}` ({result.examples} examples, {result.truncated} truncated)\n"
        f"- steps: {result.steps}, loss {result.losses[0]:.4f} → {result.losses[-1]:.4f}\n"
        f"- {batch_line}\n- config: `{json.dumps(asdict(config))}`\n"))
    return {"checkpoint": row["id"], "out": out, "steps": result.steps, "first_loss": result.losses[0],
            "last_loss": result.losses[-1], "dataset": result.dataset}


@task(name="rl-train", task_run_name="rl", cache_policy=NONE)
def rl_train_task(model: str, data: str, out: str, config, resume: bool, store: str | None,
                  nproc: int = 1, nodes: NodeLayout = NodeLayout()) -> dict:
    watch = StepProgress(f"rl {config.loss}", start_step=None, mode="off",
                         feed=progress_feed(run_artifact_key("progress"), f"RL ({config.loss}) {out}"))
    rollouts = config.generated_prompts * config.rollouts_per_prompt  # generated per step

    def on_step(step: int, total: int, values: dict) -> None:
        held_out = {"avg@k": values["eval_avg_at_k"]} if "eval_avg_at_k" in values else {}
        watch.update(step, total, tokens=values["response_len"] * rollouts, reward=values["reward_mean"],
                     acc=values["accuracy"], clip_low=values.get("clip_frac_low", 0.0),
                     clip_high=values.get("clip_frac_high", 0.0), **held_out)

    result = run_rl(model, data, out, config, resume=resume, nproc=nproc, on_step=on_step, nodes=nodes)
    selection = Selection(json.loads((Path(out) / "rl_config.json").read_text()).get("selection", {}))
    get_run_logger().info("RL problems: %s", selection.line())
    row = register_checkpoint(out, "rl", model, result["dataset"],
                              {"rl": asdict(config), "data": data, "selection": selection.as_dict()}, store)
    m = [r for r in result["metrics"] if "reward_mean" in r]  # the steps' rows (step 0 holds only the held-out figure)
    alt = (f"RL reward ({config.loss}) by step: {m[0]['reward_mean']:.3f} → {m[-1]['reward_mean']:.3f} over "
           f"{result['steps']} steps")
    create_markdown_artifact(key=run_artifact_key("reward-curve"),
                             markdown=chart_markdown(Path(out) / "reward.png", alt),
                             description=f"RL reward ({config.loss}) by step, {result['steps']} steps")
    create_markdown_artifact(key=run_artifact_key("report"), description=f"RL checkpoint `{row['id']}` "
                             f"({config.loss}): where it is, its problems, reward and accuracy", markdown=(
        f"# RL checkpoint `{row['id']}` ({config.loss})\n\n- path: `{out}`\n- parent: `{row['parent']}`\n"
        f"- dataset: `{result['dataset']}`\n- problems: {selection.line()}\n- steps: {result['steps']}, reward {m[0]['reward_mean']:.3f} → "
        f"{m[-1]['reward_mean']:.3f}, accuracy {m[0]['accuracy']:.3f} → {m[-1]['accuracy']:.3f}\n"))
    figs = run_figures(result["metrics"])  # held-out figures of the trained steps (step 0 is the start)
    return {"checkpoint": row["id"], "out": out, "steps": result["steps"], "dataset": result["dataset"],
            "final_reward": m[-1]["reward_mean"], "final_avg_at_k": figs["final_avg_at_k"],
            "best_avg_at_k": figs["best_avg_at_k"]}
