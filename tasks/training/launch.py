"""Run SFT in this process (nproc 1) or as a torchrun subprocess over N local processes (GPUs, or CPU
ranks with gloo), so one command scales from a laptop to a multi-GPU node. Multi-node: run the same
`torchrun --nnodes … -m tasks.training.sft_main …` on each node (README)."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from tasks.training.metrics import read_metrics
from tasks.training.sft import SFTConfig, SFTResult, train_sft


def torchrun_command(nproc: int, model: str, data: str, out: str, cfg: SFTConfig, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "tasks.training.sft_main", model, data, out, json.dumps(asdict(cfg))]
    return cmd + (["--resume"] if resume else [])


def run_sft(model: str, data: str, out: str, cfg: SFTConfig, resume: bool = False, nproc: int = 1,
            on_step: Callable[[int, int, dict], None] | None = None) -> SFTResult:
    if nproc <= 1:
        return train_sft(model, data, out, cfg, resume=resume, on_step=on_step)
    proc = subprocess.run(torchrun_command(nproc, model, data, out, cfg, resume))
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun SFT with {nproc} processes failed (exit {proc.returncode})")
    losses = [r["loss"] for r in read_metrics(Path(out))]
    state = json.loads((Path(out) / "sft_config.json").read_text())
    return SFTResult(Path(out), len(losses), losses, state["dataset"], state["examples"])
