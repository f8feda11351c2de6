"""Run SFT or RL in this process (nproc 1) or as a torchrun subprocess over N local processes (GPUs, or
CPU ranks with gloo), so one command scales from a laptop to a multi-GPU node; with a NodeLayout of
several nodes (tasks/training/nodes.py) each node's launcher starts its torchrun share of one run.
Only node 0's launcher reports progress and returns the result it reads from `out` (global rank 0, on
node 0, writes it); another node's launcher waits for its torchrun to end and returns None."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from tasks.training.config import RLConfig
from tasks.training.metrics import read_metrics
from tasks.training.nodes import NodeLayout
from tasks.training.sft import SFTConfig, SFTResult, train_sft

POLL_S = 2.0  # how often the launcher reads the ranks' metrics.jsonl to report progress


class RanksFailed(RuntimeError):
    """torchrun ended with an error: a rank failed, and printed why (its traceback, or the step watchdog's
    line) above; this is the launcher's one line about it."""

    def __init__(self, stage: str, nproc: int, exit_code: int, nodes: NodeLayout = NodeLayout()):
        where = f" on {nodes.describe()}" if nodes.multi else ""
        super().__init__(f"torchrun {stage} with {nproc} processes{where} failed (exit {exit_code}); the failing "
                         "rank's error is printed above")


def torchrun_command(nproc: int, model: str, data: str, out: str, cfg: SFTConfig | RLConfig, resume: bool,
                     entry: str = "tasks.training.sft_main", nodes: NodeLayout = NodeLayout()) -> list[str]:
    """This node's torchrun command: `nproc` processes of `entry` (nodes.py: standalone on one node)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", *nodes.torchrun_args(nproc),
           "-m", entry, model, data, out, json.dumps(asdict(cfg))]
    return cmd + (["--resume"] if resume else [])


def config_from_json(text: str) -> RLConfig:
    """The RLConfig that `json.dumps(asdict(cfg))` wrote (RLConfig rebuilds its nested configs)."""
    return RLConfig(**json.loads(text))


def run_rl(model: str, data: str, out: str, cfg: RLConfig, resume: bool = False, nproc: int = 1,
           on_step: Callable[[int, int, dict], None] | None = None, nodes: NodeLayout = NodeLayout()) -> dict | None:
    """train_rl here (nproc 1, one node) or over `nproc` torchrun ranks on each of `nodes`; `on_step` is
    then fed from the run's metrics.jsonl as rank 0 writes it. Returns train_rl's result (out, steps,
    dataset, metrics); None on a node other than 0, which only runs its ranks."""
    from tasks.training.rl import train_rl

    if nproc <= 1 and not nodes.multi:
        return train_rl(model, data, out, cfg, resume=resume, on_step=on_step)
    if problem := rl_layout_problem(nproc, cfg, nodes):
        raise ValueError(problem)  # once here, rather than from every rank
    cmd = torchrun_command(nproc, model, data, out, cfg, resume, "tasks.training.rl_main", nodes)
    if not nodes.is_main:
        run_torchrun(cmd, "RL", nproc, nodes=nodes)
        return None
    started = time.time()
    seen = _step_before(out, resume)

    def report() -> None:
        nonlocal seen
        seen = _report_new(out, seen, cfg.steps, on_step, started)

    run_torchrun(cmd, "RL", nproc, while_running=report, nodes=nodes)
    report()
    state = json.loads((Path(out) / "rl_config.json").read_text())
    rows = read_metrics(Path(out))
    return {"out": str(out), "steps": rows[-1]["step"] if rows else 0, "dataset": state["dataset"],
            "metrics": rows}


def rl_layout_problem(nproc: int, cfg: RLConfig, nodes: NodeLayout = NodeLayout()) -> str | None:
    """Why RL's vLLM engines cannot be laid out over `nproc` processes on each of `nodes`, or None: an
    engine's tensor-parallel ranks are consecutive, so on one node (tensor_parallel divides nproc), and
    every engine of the whole run needs a prompt group each step (rl_engine.engine_layout_problem)."""
    from tasks.training.rl_engine import engine_layout_problem

    count, flag = cfg.generated_prompts, cfg.generated_prompts_flags
    return (engine_layout_problem(nproc, cfg.tensor_parallel, count, flag)
            or engine_layout_problem(nodes.world(nproc), cfg.tensor_parallel, count, flag))


def run_torchrun(cmd: list[str], stage: str, nproc: int, while_running: Callable[[], None] | None = None,
                 nodes: NodeLayout = NodeLayout()) -> None:
    """Run a torchrun command to its end, calling `while_running` every POLL_S seconds meanwhile.
    Interrupted or cancelled (Ctrl-C, a Prefect cancellation, a test's timeout), torchrun is stopped with its
    ranks (`stop_process`); a non-zero exit is RanksFailed."""
    proc = subprocess.Popen(cmd)
    try:
        while True:
            try:
                proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if while_running is not None:
                    while_running()
    finally:
        stop_process(proc)
    if proc.returncode != 0:
        raise RanksFailed(stage, nproc, proc.returncode, nodes)


def stop_process(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM a still-running launcher (torchrun passes it on to its ranks), SIGKILL after `grace_s`."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _step_before(out: str, resume: bool) -> int:
    """The step a resumed run continues from (its newest complete checkpoint), else 0."""
    from tasks.training.checkpoint import checkpoint_step, resume_checkpoint

    ckpt = resume_checkpoint(Path(out)) if resume else None
    return (checkpoint_step(ckpt) or 0) if ckpt else 0


def _report_new(out: str, seen: int, total: int, on_step, started: float) -> int:
    """Call `on_step` for the rows past `seen` of a metrics.jsonl rewritten by this run (not a stale one)."""
    path = Path(out) / "metrics.jsonl"
    if on_step is None or not path.exists() or path.stat().st_mtime < started:
        return seen
    try:
        rows = read_metrics(Path(out))
    except (OSError, ValueError):  # a line being written
        return seen
    for row in rows:
        if row["step"] > seen:
            on_step(row["step"], total, row)
            seen = row["step"]
    return seen


def run_sft(model: str, data: str, out: str, cfg: SFTConfig, resume: bool = False, nproc: int = 1,
            on_step: Callable[[int, int, dict], None] | None = None,
            nodes: NodeLayout = NodeLayout()) -> SFTResult | None:
    """train_sft here (nproc 1, one node) or over `nproc` torchrun ranks on each of `nodes` (the ranks
    report on their own stderr). None on a node other than 0, which only runs its ranks."""
    if nproc <= 1 and not nodes.multi:
        return train_sft(model, data, out, cfg, resume=resume, on_step=on_step)
    run_torchrun(torchrun_command(nproc, model, data, out, cfg, resume, nodes=nodes), "SFT", nproc, nodes=nodes)
    if not nodes.is_main:
        return None
    losses = [r["loss"] for r in read_metrics(Path(out))]
    state = json.loads((Path(out) / "sft_config.json").read_text())
    return SFTResult(Path(out), len(losses), losses, state["dataset"], state["examples"])
