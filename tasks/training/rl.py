"""GPPO reinforcement learning, read top to bottom (the Klear-Reasoner paper's RL section):

per step: sample ⌈oversample · prompts_per_step⌉ prompts (oversample 1 by default; the paper draws 256 to train 128)
→ `rollouts_per_prompt` completions each (temperature 1.0)
→ rewards (math-verify / sandbox; tasks/grading/rewards.py: a wrong answer, a timed-out program included,
gets the wrong-answer reward; an INFRA grade gets None, is left out and counted in `infra_failures`)
→ group-normalised advantages → drop zero-variance groups → keep the first `prompts_per_step` groups left
(no refill when fewer are left: the step trains those) → split the
rollouts into `mini_batches` and take one optimizer step per mini-batch (several updates per rollout
batch, as the paper) with

    L = policy_loss(loss, logp, old_logp, Â, mask)  +  α · NLL(correct rollouts)     (α = 0.1)

old_logp is the rollout policy's log-prob. The first mini-batch trains on the unchanged policy and takes
it from its own pass; for the others it is, per `old_logprobs`, either recomputed by a no-grad forward pass
before the first update ("recompute", training numerics exactly) or taken from the rollout engine
("rollout": free; only when the engine is the policy itself in the same precision, i.e. the transformers
backend, whose rollout log-probs match the training pass to a few 1e-6 (docs/benchmarks.md); "auto" =
"rollout" for backend "hf" without bf16, else "recompute").
Constant lr after warm-up, weight decay 0.1, grad clip 1.0, no KL, seeded.
The rollout engine is the policy itself on CPU (transformers) or vLLM on GPU, whose weights are pushed in
place after every optimizer step (tasks/training/rl_engine.py).

On N ranks (torchrun; launch.run_rl): every rank draws the same prompts; rank r generates and grades the
groups r, r+N, … (a group stays whole on one rank), then every rank gets every rollout's metadata in group
order and the tokens of those it trains (tasks/training/rollout_exchange.py) and runs the same update
(tasks/training/rl_update.py: the step's result equals one process's on the same rollouts). With
--tensor-parallel tp (vLLM), tp consecutive ranks share one engine: they generate the same
groups with the same seed and split them for grading (rl_engine.rollout_share). Only rank 0 writes
metrics; every rank writes its own shards of a checkpoint (tasks/training/checkpoint.py); rank 0 runs the
held-out evaluation, with tp > 1 every rank does (the engines step together). With `step_timeout_s` a rank whose step, held-out
evaluation or checkpoint outlasts it ends the run (tasks/training/watchdog.py); the ranks meet after an
evaluation and after a checkpoint, so each phase is timed on every rank.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

import torch

from storage.claims import claim_dir
from tasks.cpu_threads import ThreadGovernor
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.generation.base import chat_prompt
from tasks.generation.engine import resolve_backend
from tasks.grading.batch import grade_samples
from tasks.grading.rewards import is_correct, reward_from_grade
from tasks.models.checks import check_model_dir
from tasks.progress import StepProgress
from tasks.reporting import plot_curve
from tasks.training import distributed as dist_utils
from tasks.training.compile import compile_blocks
from tasks.training.config import RLConfig
from tasks.training.checkpoint import (check_fresh_out, load_training_state, resume_checkpoint, save_checkpoint,
                                       save_model)
from tasks.training.metrics import MetricsLog
from tasks.training.model_loading import build_model, load_weights
from tasks.training.optim import fused_adamw
from tasks.training.rl_data import PromptSampler, keep_fitting, load_rl_rows
from tasks.training.rl_engine import (engine_layout_problem, generates_here, make_rollout_engine, rollout_batch_rows,
                                      rollout_share)
from tasks.training.rl_update import Rollout, bf16_enabled, gradient_checkpointing, update_policy
from tasks.training.rollout_exchange import exchange_rollouts
from tasks.training.schedule import warmup_constant
from tasks.training.watchdog import StepWatchdog

log = logging.getLogger(__name__)

__all__ = ["RLConfig", "Rollout", "default_rl_lr", "train_rl", "rollout_seed"]


def default_rl_lr(hidden: int) -> float:
    """The RL peak lr when none is given: the paper's 1e-6 at Qwen3-8B's width (4096), scaled as 1/width like
    SFT's default (sft.default_lr), at most 1e-4."""
    return min(1e-4, 1e-6 * 4096 / hidden)


def rollout_seed(seed: int, step: int, rank: int = 0, world: int = 1) -> int:
    """The sampling seed of one rank's rollouts at `step`: (seed·1000003 + step)·N + rank, so steps and
    ranks never share a seed and one process keeps seed·1000003 + step."""
    return (seed * 1_000_003 + step) * world + rank


def train_rl(model_dir: str, data: str, out: str, cfg: RLConfig, resume: bool = False,
             on_step: Callable[[int, int, dict], None] | None = None, graders: dict | None = None) -> dict:
    """Entry rules (as train_sft): the model directory must load; `out` is claimed for this run
    (storage/claims.py; under torchrun rank 0 holds the claim); a run that does not resume refuses an
    `out` holding another run's checkpoints or metrics (--force in the CLI); `resume` continues from the
    newest complete checkpoint. Problems whose prompt does not fit the context minus max_tokens are left
    out and counted (rl_data.py)."""
    check_model_dir(model_dir, deep=True)
    check_fresh_out(Path(out), resume)
    if os.environ.get("RANK", "0") != "0":  # torchrun rank > 0: rank 0 holds the claim
        return _train_rl(model_dir, data, out, cfg, resume, on_step, graders)
    with claim_dir(out):
        return _train_rl(model_dir, data, out, cfg, resume, on_step, graders)


def _train_rl(model_dir: str, data: str, out: str, cfg: RLConfig, resume: bool = False,
              on_step: Callable[[int, int, dict], None] | None = None, graders: dict | None = None) -> dict:
    from transformers import AutoTokenizer  # slow to import: only when a run starts
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = dist_utils.setup()
    device = ctx.device
    requested = asdict(cfg)  # as asked, before anything is resolved (tasks/training/finished.py compares it)
    cfg = replace(cfg, backend=resolve_backend(cfg.backend))
    ckpt = resume_checkpoint(out) if resume else None
    torch.manual_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = build_model(model_dir, ctx, cfg.strategy)  # under FSDP a skeleton, loaded into its shards below
    model.config.use_cache = True  # generation's (the update's forwards pass use_cache=False)
    if gradient_checkpointing(cfg, device):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    rows, dataset, selection = load_rl_rows(data, tuple(cfg.domains), cfg.selection)
    if ctx.is_main:
        log.info("RL problems of %s: %s", data, selection.line())
    rows, too_long = keep_fitting(rows, tok, getattr(model.config, "max_position_embeddings", None),
                                  cfg.max_tokens, data, selection)
    sampler = PromptSampler(rows, cfg.generated_prompts, cfg.seed)
    lr = cfg.lr or default_rl_lr(model.config.hidden_size)
    sharded = ctx.world_size > 1 and cfg.strategy == "fsdp"
    if problem := engine_layout_problem(ctx.world_size, cfg.tensor_parallel, cfg.generated_prompts,
                                        cfg.generated_prompts_flags):
        raise ValueError(problem)
    gen = make_rollout_engine(model, tok, model_dir, cfg.backend,
                              rollout_batch_rows(device, cfg.generated_prompts, cfg.rollouts_per_prompt),
                              sharded or cfg.compile,  # a compiled policy generates from an uncompiled copy
                              cfg.tensor_parallel, ctx.world_size,
                              dtype=torch.bfloat16 if bf16_enabled(cfg, device) else torch.float32, device=device,
                              generates=generates_here(ctx.rank, ctx.world_size, cfg.tensor_parallel,
                                                       cfg.generated_prompts))
    if cfg.compile:
        compile_blocks(model)
    policy = dist_utils.wrap(model, ctx, cfg.strategy, bf16_enabled(cfg, device), cfg.shard_group_size)
    load_weights(model, model_dir, device)  # each rank reads its shards (model_loading); whole models: nothing
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=cfg.weight_decay,
                            **fused_adamw(device))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_constant(s, cfg.warmup_steps))
    step = 0
    if ckpt is not None:
        step = load_training_state(ckpt, model, opt, sched)  # weights, optimizer, schedule
    metrics = MetricsLog(out, resume_from_step=step if ckpt else None) if ctx.is_main else None
    # one process on CPU with transformers rollouts: torch's thread count by tasks/cpu_threads.py's policy
    # (vLLM's CPU worker sets its own; ranks get their share)
    threads = (ThreadGovernor() if device.type == "cpu" and ctx.world_size == 1 and cfg.backend == "hf"
               else None)
    if ctx.is_main:
        (out / "rl_config.json").write_text(json.dumps({
            "model": model_dir, "data": data, "dataset": dataset, "config": asdict(cfg), "requested": requested,
            "lr": lr,
            "prompts": len(rows), "too_long_prompts": too_long, "selection": selection.as_dict(),
            "world_size": ctx.world_size,
            "torch_threads": ThreadGovernor.recorded(threads, device.type == "cpu")}, indent=2))
        # every problem of the data with its fate (kept, or why not), by id: one fate per row
        (out / "selection.jsonl").write_text("".join(json.dumps(f) + "\n" for f in selection.fates))
    own_graders = graders is None
    graders = {} if own_graders else graders
    report = StepProgress(f"rl {cfg.loss}", start_step=step) if ctx.is_main else None
    watchdog = StepWatchdog(cfg.step_timeout_s if ctx.world_size > 1 else 0, ctx.rank)
    if cfg.step_timeout_s and ctx.world_size == 1:
        log.info("step_timeout_s limits runs of several processes; this one process runs without it")
    try:
        try:
            watchdog.arm("the first weight sync")
            gen.sync_weights(model)  # a separate engine (vLLM) loaded `model_dir`; on resume the policy is newer
            if step == 0 and cfg.eval_benchmark and cfg.eval_every:  # where the held-out curve starts
                watchdog.arm("RL step 0's held-out evaluation")
                if ctx.is_main or cfg.tensor_parallel > 1:
                    held = _held_out(gen, tok, cfg, graders)
                    if ctx.is_main:
                        metrics.log(0, {"eval_avg_at_k": held})
                dist_utils.barrier(ctx)
            while step < cfg.steps:
                watchdog.arm(f"RL step {step + 1}")
                if threads:
                    threads()
                t0 = time.perf_counter()
                rollouts = _rank_rollouts(gen, sampler.batch(step), tok, cfg, step, ctx, graders)
                gen.sleep()  # a GPU engine frees its memory for the update
                t_gen = time.perf_counter() - t0
                rollouts = exchange_rollouts(rollouts, cfg, step, ctx)  # metadata to all, tokens where trained
                t1 = time.perf_counter()
                values = update_policy(model, opt, sched, rollouts, cfg, device, step, policy=policy, ctx=ctx)
                t2 = time.perf_counter()
                gen.sync_weights(model)
                step += 1
                values.update(t_generate_s=t_gen, t_update_s=t2 - t1, t_sync_s=time.perf_counter() - t2,
                              t_step_s=time.perf_counter() - t0, lr=sched.get_last_lr()[0])
                if cfg.eval_benchmark and cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                    watchdog.arm(f"RL step {step}'s held-out evaluation")
                    t3 = time.perf_counter()
                    if ctx.is_main or cfg.tensor_parallel > 1:  # tp engines step together: every rank
                        held = _held_out(gen, tok, cfg, graders)
                        values.update(eval_avg_at_k=held, t_eval_s=time.perf_counter() - t3)
                    dist_utils.barrier(ctx)  # the others wait for it here, not in the next step
                if ctx.is_main:
                    metrics.log(step, values)
                    held_out = {"avg@k": values["eval_avg_at_k"]} if "eval_avg_at_k" in values else {}
                    report.update(step, cfg.steps, tokens=values["response_len"] * len(rollouts),  # generated
                                  reward=values["reward_mean"], acc=values["accuracy"], **held_out)
                    if on_step:
                        on_step(step, cfg.steps, values)
                if step % cfg.save_every == 0 or step == cfg.steps:
                    watchdog.arm(f"RL step {step}'s checkpoint")
                    # every rank writes its own shards (tasks/training/checkpoint.py)
                    save_checkpoint(model, tok, opt, sched, step, out, cfg.keep_checkpoints, ctx)
                    dist_utils.barrier(ctx)  # rank 0's save counts here on every rank, not in the next step
        finally:
            if report is not None:
                report.close()
            gen.close()
            if own_graders:
                for g in graders.values():
                    g.close()
        watchdog.arm("the final checkpoint")
        model_sd = dist_utils.full_model_state(model)  # weights only
        rows_m: list[dict] = []
        if ctx.is_main:
            save_model(model, tok, out, model_sd)
            rows_m = metrics.read()
            plot_curve(rows_m, "reward_mean", out / "reward.png", f"RL reward ({cfg.loss})")
            metrics.close()
        dist_utils.teardown(ctx)
    finally:
        watchdog.disarm()
    return {"out": str(out), "steps": step, "dataset": dataset, "metrics": rows_m}


def _rank_rollouts(gen, batch: list[dict], tok, cfg: RLConfig, step: int, ctx, graders) -> list[Rollout]:
    """This rank's groups of the step (groups r, r+N, …), generated, graded and rewarded."""
    share = rollout_share(len(batch), ctx.rank, ctx.world_size, cfg.tensor_parallel)
    if not share.generate:
        return []
    params = replace(cfg.sampling_params(cfg.rollouts_per_prompt),
                     seed=rollout_seed(cfg.seed, step, share.seed_slot, share.seed_slots))
    comps = gen.generate([chat_prompt(tok, batch[g]["problem"]) for g in share.generate], params)
    mine = [share.generate[i] for i in share.grade]
    comps = [comps[i] for i in share.grade]
    rows = [batch[g] for g in mine]
    prompts = [chat_prompt(tok, r["problem"]) for r in rows]
    if not rows:
        return []
    grades = grade_samples(rows, [[c.text for c in cs] for cs in comps], graders)
    out = []
    for g, row, prompt, cs, gs in zip(mine, rows, prompts, comps, grades):
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        for c, grade in zip(cs, gs):
            r = reward_from_grade(row["domain"], c.text, grade, cfg.reward)
            out.append(Rollout(g, row["domain"], p_ids, c.token_ids, r, is_correct(r, cfg.reward, row["domain"]),
                               c.finish_reason == "length", list(c.logprobs)))
    return out


def _held_out(gen, tok, cfg: RLConfig, graders) -> float:
    res = evaluate("", "held-out", cfg.eval_benchmark, EvalConfig(k=cfg.eval_k, max_tokens=cfg.max_tokens,
                                                                 seed=cfg.seed), generator=gen, graders=graders,
                   progress_mode="off")  # the RL step's progress has the terminal; avg@k shows in its line
    return res.avg_at_k
