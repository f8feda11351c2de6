"""Long-CoT supervised fine-tuning, read top to bottom: load → tokenise → pack → train → checkpoint.

Loss: token-mean negative log-likelihood over every response token of the global batch,

    L = − Σ_{sequences, t ∈ response} log π(y_t | y_<t, x) / N_response_tokens(global batch)

each micro-batch adds its sum divided by the global count, so gradient accumulation and micro-batch
size never change the gradient. Packed examples attend only within themselves (sft_data: the rule reads
per-token document ids) through a kernel that takes the documents, not an L×L mask (`attention`, ATTENTIONS):
FlexAttention with a tile-level BlockMask on a GPU, causal SDPA per document span on CPU, each over a
micro-batch's packs joined into one row without their padding (sft_data.join_packs); the dense
[B, 1, L, L] mask over padded rows stays as the reference. AdamW, warm-up then cosine decay to `min_lr_ratio`·lr
(paper: 8e-5 → 4e-5 for an 8B model), grad-norm clip 1.0. Seeded data order (seed, epoch); checkpoints
every `save_every` steps hold weights, optimizer, schedule position and step, so `resume=True` continues
the same loss curve.
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from storage.claims import claim_dir
from tasks.cpu_threads import ThreadGovernor
from tasks.models.checks import check_model_dir
from tasks.progress import StepProgress
from tasks.reporting import plot_curve
from tasks.training import distributed as dist_utils
from tasks.training.compile import compile_blocks
from tasks.training.config import SFTConfig
from tasks.training.checkpoint import (check_fresh_out, load_training_state, resume_checkpoint, save_checkpoint,
                                       save_model)
from tasks.training.metrics import MetricsLog, check_finite
from tasks.training.model_loading import build_model, load_weights
from tasks.training.optim import fused_adamw
from tasks.training.schedule import warmup_cosine
from tasks.training.packed_attention import attn_implementation, resolve_attention
from tasks.training.nll_kernels import agreed_logprob_kernel
from tasks.training.sft_loss import summed_nll
from tasks.training.sft_data import (IGNORE, Pack, collate_micro_batch, load_sft_rows, pack_examples, target_count,
                                     tokenize_examples)
from tasks.training.sft_responses import select_responses

log = logging.getLogger(__name__)


@dataclass
class SFTResult:
    out: Path
    steps: int
    losses: list[float] = field(default_factory=list)
    dataset: str = ""
    examples: int = 0
    truncated: int = 0


def default_lr(hidden_size: int) -> float:
    return min(3e-3, 8e-5 * 4096 / hidden_size)


AUTO_BATCH_MAX = 16    # packed sequences per step when the data gives enough steps (the former fixed default)
AUTO_BATCH_MIN = 2     # the smallest batch the rule picks
AUTO_MIN_STEPS = 1000  # optimizer steps the rule aims for


def auto_batch_size(packs_per_epoch: list[int], max_steps: int | None = None) -> int:
    """The batch of `batch_size=None` ("auto"): the largest batch b in [AUTO_BATCH_MIN, AUTO_BATCH_MAX]
    packed sequences whose run makes at least AUTO_MIN_STEPS optimizer steps (or `max_steps`, when that
    is fewer), where steps(b) = Σ_epochs ⌈packs_e / b⌉; AUTO_BATCH_MIN when even that makes fewer.

    Why steps and not epochs: AdamW moves each weight by about lr per step whatever the batch, so with a
    fixed batch a small dataset ends its cosine schedule after too few updates. Measured basis (tiny model,
    8 epochs, seq_len 512, default lr; held-out bench_math avg@4, base model 0.000): on 1,800 worked math
    examples batch 16 → 248 steps, 0.159; 8 → 496, 0.275; 4 → 991, 0.247; auto 3 → 1,319, 0.338; 2 →
    1,979, 0.213; on 3,000, batch 16 → 416 steps, 0.434; auto 6 → 1,101, 0.656. The gain comes from the
    first ~500 steps; past that the figures wander without a trend, and ~1,000 sits inside that plateau
    (docs/training.md, "SFT on small data"). Data that gives AUTO_MIN_STEPS at batch 16 trains at 16, as before; the
    tokens of an epoch are the same either way."""
    def steps(b: int) -> int:
        return sum(math.ceil(n / b) for n in packs_per_epoch)

    target = AUTO_MIN_STEPS if max_steps is None else min(AUTO_MIN_STEPS, max_steps)
    return next((b for b in range(AUTO_BATCH_MAX, AUTO_BATCH_MIN - 1, -1) if steps(b) >= target), AUTO_BATCH_MIN)


def resolve_batch_size(cfg: SFTConfig, packs_per_epoch: list[int], examples: int) -> tuple[SFTConfig, str | None]:
    """`cfg` as trained: an explicit batch as it is; None → `auto_batch_size`, with the micro-batch lowered
    to it if larger (micro-batching never changes the gradient), and the one line that says so."""
    if cfg.batch_size is not None:
        return cfg, None
    b = auto_batch_size(packs_per_epoch, cfg.max_steps)
    total = sum(math.ceil(n / b) for n in packs_per_epoch)
    total = total if cfg.max_steps is None else min(total, cfg.max_steps)
    note = f"batch size {b} (auto: {examples:,} examples → {total:,} steps; set --batch-size to override)"
    return replace(cfg, batch_size=b, micro_batch_size=min(cfg.micro_batch_size or b, b)), note


def _say(line: str) -> None:
    """One line on stderr (not print: a Prefect flow with log_prints would take it off the terminal)."""
    log.info(line)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def train_sft(model_dir: str, data: str, out: str, cfg: SFTConfig, resume: bool = False,
              on_step: Callable[[int, int, dict], None] | None = None) -> SFTResult:
    """Entry rules: the model directory must load (tasks/models/checks.py: one line naming the
    file); `out` is claimed for this run (storage/claims.py: a second run on the same `out` is refused
    while this one runs; only the main rank claims, torchrun ranks share their launcher's claim); a run
    that does not resume refuses an `out` holding another run's checkpoints or metrics
    (checkpoint.check_fresh_out; the CLI's --force clears them first); `resume` continues from the newest
    complete checkpoint (checkpoint.resume_checkpoint)."""
    check_model_dir(model_dir, deep=True)
    check_fresh_out(Path(out), resume)
    if os.environ.get("RANK", "0") != "0":  # torchrun rank > 0: rank 0 holds the claim
        return _train_sft(model_dir, data, out, cfg, resume, on_step)
    with claim_dir(out):
        return _train_sft(model_dir, data, out, cfg, resume, on_step)


def _train_sft(model_dir: str, data: str, out: str, cfg: SFTConfig, resume: bool = False,
               on_step: Callable[[int, int, dict], None] | None = None) -> SFTResult:
    from transformers import AutoConfig, AutoTokenizer  # slow to import: only when a run starts
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = Path(out)
    requested = asdict(cfg)  # as asked, before anything is resolved (tasks/training/finished.py compares it)
    ctx = dist_utils.setup()
    torch.manual_seed(cfg.seed)
    ckpt = resume_checkpoint(out) if resume else None
    if resume and ckpt is None:
        log.info("--resume: no checkpoint in %s, starting fresh", out)
    tok = AutoTokenizer.from_pretrained(model_dir)
    cfg = replace(cfg, attention=resolve_attention(cfg.attention, ctx.device,  # recorded as trained
                                                   AutoConfig.from_pretrained(model_dir)))
    cfg = replace(cfg, logprob_kernel=agreed_logprob_kernel(cfg.logprob_kernel, ctx))  # recorded too
    model = build_model(model_dir, ctx, cfg.strategy, attn_implementation(cfg.attention))  # FSDP: a skeleton
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if cfg.compile:
        compile_blocks(model)
    model.config.use_cache = False
    bf16 = cfg.bf16 if cfg.bf16 is not None else (ctx.device.type == "cuda" and torch.cuda.is_bf16_supported())

    rows = load_sft_rows(data)
    if not rows.rows:
        raise ValueError(f"{data}: no rows with a response to train on")
    trained, response_counts = select_responses(rows.rows, cfg.responses)
    if not trained:
        raise ValueError(f"{data}: no response left to train on under responses={cfg.responses} ({response_counts})")
    if cfg.responses != "all" and ctx.is_main:
        _say(f"sft: responses {cfg.responses}: {', '.join(f'{k} {v}' for k, v in response_counts.items())}")
    examples = tokenize_examples(trained, tok)
    pad = tok.pad_token_id
    packs_per_epoch = [len(pack_examples(examples, cfg.seq_len, pad, cfg.seed, e)[0]) for e in range(cfg.epochs)]
    cfg, auto_note = resolve_batch_size(cfg, packs_per_epoch, len(examples))
    if auto_note and ctx.is_main:
        _say(auto_note)
    steps_per_epoch = [math.ceil(n / cfg.batch_size) for n in packs_per_epoch]
    total = sum(steps_per_epoch) if cfg.max_steps is None else min(cfg.max_steps, sum(steps_per_epoch))
    lr = cfg.lr or default_lr(model.config.hidden_size)
    warmup = max(1, round(cfg.warmup_ratio * total)) if cfg.warmup_ratio > 0 else 0

    ddp_model = dist_utils.wrap(model, ctx, cfg.strategy, bf16, cfg.shard_group_size)
    load_weights(model, model_dir, ctx.device)  # each rank reads its shards (model_loading); whole models: nothing
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay,
                            **fused_adamw(ctx.device))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, total, warmup, cfg.min_lr_ratio))
    step = 0
    if ckpt is not None:
        step = load_training_state(ckpt, model, opt, sched)  # weights, optimizer, schedule
    metrics = MetricsLog(out, resume_from_step=step if ckpt else None) if ctx.is_main else None
    # one process on CPU: torch's thread count by tasks/cpu_threads.py's policy (ranks get their share instead)
    threads = ThreadGovernor() if ctx.device.type == "cpu" and ctx.world_size == 1 else None
    if ctx.is_main:
        (out / "sft_config.json").write_text(json.dumps({
            "model": str(model_dir), "data": str(data), "dataset": rows.dataset, "config": asdict(cfg),
            "requested": requested,
            "lr": lr, "total_steps": total, "examples": len(examples), "responses": response_counts,
            "world_size": ctx.world_size, "batch_size": cfg.batch_size, "batch_size_auto": auto_note,
            "torch_threads": ThreadGovernor.recorded(threads, ctx.device.type == "cpu")}, indent=2))

    losses: list[float] = []
    truncated = 0
    model.train()
    done_before = 0
    report = StepProgress("sft", start_step=step) if ctx.is_main else None  # main rank only
    try:
        for epoch in range(cfg.epochs):
            packs, trunc = pack_examples(examples, cfg.seq_len, pad, cfg.seed, epoch)
            truncated = max(truncated, trunc)
            for b in range(steps_per_epoch[epoch]):
                global_step = done_before + b
                if global_step < step:
                    continue  # already trained before the checkpoint we resumed from
                if global_step >= total:
                    break
                batch = packs[b * cfg.batch_size:(b + 1) * cfg.batch_size]
                if threads:
                    threads()
                t0 = time.perf_counter()
                loss, n_tok = train_step(ddp_model, batch, cfg, ctx, bf16)
                gnorm = dist_utils.scalar(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
                check_finite(f"SFT step {global_step + 1}", loss, gnorm, sched.get_last_lr()[0])
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                step = global_step + 1
                losses.append(loss)
                seconds = max(1e-9, time.perf_counter() - t0)
                n_in = sum(sum(seg >= 0 for seg in p.segments) for p in batch)  # whole batch: all ranks
                values = {"loss": loss, "lr": sched.get_last_lr()[0], "grad_norm": gnorm, "epoch": epoch,
                          "tokens": n_tok, "tokens_per_s": n_tok / seconds,  # response (loss) tokens
                          "input_tokens": n_in, "input_tokens_per_s": n_in / seconds}  # packed, padding excluded
                if ctx.is_main:
                    metrics.log(step, values)
                    report.update(step, total, tokens=n_in, loss=loss)
                    if on_step:
                        on_step(step, total, values)
                if step % cfg.save_every == 0 or step == total:
                    # every rank writes its own shards (tasks/training/checkpoint.py)
                    save_checkpoint(model, tok, opt, sched, step, out, cfg.keep_checkpoints, ctx)
            done_before += steps_per_epoch[epoch]
            if step >= total:
                break
    finally:
        if report is not None:
            report.close()

    model_sd = dist_utils.full_model_state(model)  # weights only
    if ctx.is_main:
        save_model(model, tok, out, model_sd)
        all_rows = metrics.read()
        plot_curve(all_rows, "loss", out / "loss.png", "SFT loss")
        metrics.close()
        losses = [r["loss"] for r in all_rows]
    dist_utils.teardown(ctx)
    return SFTResult(out, step, losses, rows.dataset, len(examples), truncated)


def train_step(model, batch, cfg: SFTConfig, ctx, bf16: bool) -> tuple[float, int]:
    """One optimizer step's forward/backward over this rank's share of `batch`; returns the global
    token-mean loss and the global number of response tokens.

    Every rank runs the same number of micro-batches, that of the largest share (`batch[rank::world]` sizes
    differ by one when the batch does not split evenly, e.g. a final short batch): DDP all-reduces gradients
    (FSDP reduce-scatters them) in each synchronised backward, and FSDP gathers each block's parameters in
    every forward and backward, so unequal counts would leave a rank waiting for a peer that never comes.
    A rank whose share runs out runs a filler pack with every label ignored (zero loss, zero gradient)."""
    mine = batch[ctx.rank::ctx.world_size]
    n_micro = math.ceil(math.ceil(len(batch) / ctx.world_size) / cfg.micro_batch_size)
    filler = [Pack(batch[0].input_ids, [IGNORE] * len(batch[0].labels), batch[0].position_ids, batch[0].segments)]
    # each one row without padding under the packed kernels (sft_data.join_packs), padded rows under dense
    micro = [collate_micro_batch(mine[i * cfg.micro_batch_size:(i + 1) * cfg.micro_batch_size] or filler,
                                 cfg.attention) for i in range(n_micro)]  # O(tokens): no L×L mask yet
    n_global = dist_utils.all_reduce_sum(sum(map(target_count, micro)), ctx)  # a filler's count is 0
    total_loss = 0.0
    for i, t in enumerate(micro):
        t = {k: v.to(ctx.device) for k, v in t.items()}
        # gradients are all-reduced once, in the last backward (all ranks reach it: same micro-batch count)
        sync = ctx.world_size == 1 or i == n_micro - 1
        with dist_utils.gradient_sync(model, sync):
            # label positions only, from the hidden states in chunks: no [B, T, V] logits (sft_loss.py)
            nll = summed_nll(model, dist_utils.unwrap(model), t, cfg.attention, bf16, IGNORE, cfg.logprob_kernel)
            # DDP and FSDP average gradients over ranks; scale by world size: the result is the global token mean
            (nll * ctx.world_size / max(1, n_global)).backward()
        total_loss += nll.item()
    return dist_utils.all_reduce_sum(total_loss, ctx) / max(1, n_global), n_global
