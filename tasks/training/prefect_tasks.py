"""Thin Prefect wrappers for training: progress artifact while it runs, loss-curve image and a markdown
report after, checkpoint registered with lineage."""
from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import (create_image_artifact, create_markdown_artifact, create_progress_artifact,
                               update_progress_artifact)
from prefect.cache_policies import NONE

from tasks.training.lineage import register_checkpoint
from tasks.training.launch import run_sft
from tasks.training.sft import SFTConfig


def png_data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


@task(name="sft-train", cache_policy=NONE)
def sft_train_task(model: str, data: str, out: str, config: SFTConfig, resume: bool, store: str | None,
                   nproc: int = 1) -> dict:
    logger = get_run_logger()
    artifact = create_progress_artifact(progress=0.0, description=f"SFT {out}")

    def on_step(step: int, total: int, values: dict) -> None:
        update_progress_artifact(artifact, progress=100.0 * step / total)
        if step == 1 or step % 10 == 0 or step == total:
            logger.info("step %d/%d loss %.4f lr %.2e", step, total, values["loss"], values["lr"])

    result = run_sft(model, data, out, config, resume=resume, nproc=nproc, on_step=on_step)
    row = register_checkpoint(out, "sft", model, result.dataset, {"sft": asdict(config), "data": data}, store)
    create_image_artifact(image_url=png_data_url(Path(out) / "loss.png"), key="sft-loss-curve",
                          description=f"SFT loss, {result.steps} steps")
    create_markdown_artifact(key="sft-report", markdown=(
        f"# SFT checkpoint `{row['id']}`\n\n- path: `{out}`\n- parent: `{row['parent']}`\n"
        f"- dataset: `{result.dataset}` ({result.examples} examples, {result.truncated} truncated)\n"
        f"- steps: {result.steps}, loss {result.losses[0]:.4f} → {result.losses[-1]:.4f}\n"
        f"- config: `{json.dumps(asdict(config))}`\n"))
    return {"checkpoint": row["id"], "out": out, "steps": result.steps, "first_loss": result.losses[0],
            "last_loss": result.losses[-1], "dataset": result.dataset}
