"""One GPPO update from a step's rollouts, on one process or N ranks (DDP or FSDP), with the same result:

1. rewards → group-normalised advantages (estimate_advantages) → drop zero-variance groups; every rank holds
   the whole list of the step's rollouts, so this and the seeded shuffle are the same everywhere;
2. the shuffled rollouts are cut into `mini_batches`; one optimizer step per mini-batch;
3. each mini-batch is shared over the ranks by token count (`balance`), and each rank's share is cut into
   micro-batches of `micro_batch_size`. The loss of a micro-batch is

       L = policy_loss(logp, old_logp, Â, mask; num_tokens = T_mb)  +  α · NLL(correct rollouts) / T_mb^ok

   with T_mb the response tokens of the WHOLE mini-batch (all ranks) and T_mb^ok those of its correct
   rollouts, so the micro-batch losses of all ranks add up to the one-process loss. DDP and FSDP average
   gradients over the N ranks, so each rank back-propagates N·L: the averaged gradient is then exactly
   the one-process gradient of Σ L (up to float summation order).
4. Every rank runs the same number of forward passes per mini-batch (a rank with fewer micro-batches runs a
   filler pass whose loss is 0·logp), because under FSDP every forward is a collective; gradients are
   synchronised in the last micro-batch only.

π_old (old_logp): the first mini-batch trains on the unchanged policy and takes it from its own pass; for
the others it is either the rollout engine's log-probs (`from_rollouts`) or a no-grad pass before the
first update, chunked exactly as training chunks them (another padding width can move a log-prob ~1e-5).

Diagnostics, all token-weighted over the whole step (all ranks): clip fractions, ratio mean, entropy,
the shares of the gradient from the clipped regions (`grad_share_low/high`, losses.gradient_shares),
`stale_logratio` (π_old's staleness in the later mini-batches), `grad_norm_max` (pre-clip, per step);
`logprob_diff_mean`/`logprob_diff_max` = |rollout engine log-prob − trainer log-prob| over the tokens whose
trainer log-prob this step computed before any update (the rollout/trainer mismatch: ~0 for the policy
itself, larger for a bf16 vLLM engine); `rank_token_imbalance` = mean over mini-batches of
max_rank tokens / mean_rank tokens (1.0 = perfectly even; 1.0 on one process).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch
from torch.utils.checkpoint import checkpoint

from tasks.generation.engine import resolve_backend
from tasks.training.advantages import estimate_advantages, zero_variance_groups
from tasks.training.config import RLConfig
from tasks.training.distributed import all_gather_objects, all_reduce_sum, gradient_sync, scalar
from tasks.training.losses import policy_loss
from tasks.training.metrics import check_finite


@dataclass
class Rollout:
    group: int
    domain: str
    prompt_ids: list[int]
    response_ids: list[int]
    reward: float | None
    correct: bool
    truncated: bool
    logprobs: list[float] = field(default_factory=list)  # the rollout engine's raw log-probs of response_ids

    @property
    def tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


def balance(sizes: list[int], world: int) -> list[list[int]]:
    """Indices of `sizes` shared over `world` ranks by longest-processing-time-first: the largest item goes
    to the rank with the fewest tokens so far (ties: the lower index, the lower rank). Each rank's indices
    are returned in ascending order, so one rank gets 0..n-1 in order."""
    shares: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(world), key=lambda r: (load[r], r))
        shares[r].append(i)
        load[r] += sizes[i]
    return [sorted(s) for s in shares]


def bf16_enabled(cfg: RLConfig, device: torch.device) -> bool:
    if cfg.bf16 is not None:
        return cfg.bf16
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def use_rollout_logprobs(cfg: RLConfig, device: torch.device) -> bool:
    """"auto": the rollout log-probs when the engine is the policy itself at training precision (backend
    "hf", or "auto" resolved to it; no bf16 autocast in the update); else the recomputed pass."""
    if cfg.old_logprobs == "auto":
        return resolve_backend(cfg.backend) == "hf" and not bf16_enabled(cfg, device)
    return cfg.old_logprobs == "rollout"


class _Sums:
    """Token-weighted sums of per-chunk metrics, plus maxima; reduced over ranks once per step."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.maxima: dict[str, float] = {}

    def add(self, name: str, value: float, weight: float) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + value * weight
        self.sums[name + "#w"] = self.sums.get(name + "#w", 0.0) + weight

    def high(self, name: str, value: float) -> None:
        self.maxima[name] = max(self.maxima.get(name, 0.0), value)

    def reduce(self, ctx) -> dict[str, float]:
        if ctx is not None and ctx.world_size > 1:
            gathered = all_gather_objects((self.sums, self.maxima), ctx)
            sums: dict[str, float] = {}
            maxima: dict[str, float] = {}
            for s, m in gathered:
                for k, v in s.items():
                    sums[k] = sums.get(k, 0.0) + v
                for k, v in m.items():
                    maxima[k] = max(maxima.get(k, 0.0), v)
        else:
            sums, maxima = self.sums, self.maxima
        out = {k: v / sums[k + "#w"] for k, v in sums.items() if not k.endswith("#w") and sums[k + "#w"]}
        return {**out, **maxima}


def update_policy(model, opt, sched, rollouts: list[Rollout], cfg: RLConfig, device: torch.device, step: int,
                  *, policy=None, ctx=None) -> dict:
    """Advantages, filtering, then `mini_batches` optimizer steps on `rollouts` (the step's whole list, the
    same on every rank); returns the step's metrics. `policy` is the module to run (a DDP wrapper; default
    `model`), `ctx` the distributed context (default: one process). Forward and backward run under bf16
    autocast when `bf16_enabled` says so (log-probs are taken in fp32). When every group is filtered out
    nothing is trained: no optimizer or scheduler step (warm-up counts updates)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16_enabled(cfg, device)):
        return _update_steps(model, policy or model, opt, sched, rollouts, cfg, device, step, ctx)


def _update_steps(model, policy, opt, sched, rollouts, cfg: RLConfig, device, step: int, ctx) -> dict:
    rank, world = (ctx.rank, ctx.world_size) if ctx is not None else (0, 1)
    scored = [r for r in rollouts if r.reward is not None and r.response_ids]
    infra = len(rollouts) - len(scored)  # INFRA grades (reward None; an empty response too)
    if cfg.overlong_filter:
        scored = [r for r in scored if not r.truncated]
    rewards = [r.reward for r in scored]
    groups = [r.group for r in scored]
    n_groups = len(set(r.group for r in rollouts))
    flat = zero_variance_groups(rewards, groups) if cfg.filter_zero_variance else set()
    values = {
        "reward_mean": sum(r.reward for r in scored) / max(1, len(scored)),
        "accuracy": sum(r.correct for r in scored) / max(1, len(scored)),
        "response_len": sum(len(r.response_ids) for r in rollouts) / max(1, len(rollouts)),
        "truncated_frac": sum(r.truncated for r in rollouts) / max(1, len(rollouts)),
        "filtered_group_frac": len(flat) / max(1, n_groups),
        "infra_failures": infra,
    }
    adv = estimate_advantages(cfg.advantage, rewards, groups).tolist() if scored else []
    train = [(r, a) for r, a in zip(scored, adv) if r.group not in flat]
    values["trained_rollouts"] = len(train)
    if not train:
        return {**values, "loss": 0.0, "grad_norm": 0.0, "entropy": 0.0, "clip_frac_low": 0.0,
                "clip_frac_high": 0.0, "ratio_mean": 1.0, "rank_token_imbalance": 1.0}
    random.Random(cfg.seed * 31 + step).shuffle(train)
    size = -(-len(train) // cfg.mini_batches)
    minis = [train[m:m + size] for m in range(0, len(train), size)]
    plans = [_plan(mb, rank, world, cfg.micro_batch_size) for mb in minis]
    policy.train()
    sums = _Sums()
    old = _behaviour_logprobs(policy, minis, plans, device, use_rollout_logprobs(cfg, device), sums)
    losses, norms = [], []
    for m, (mb, plan) in enumerate(zip(minis, plans)):
        n_tok = sum(len(r.response_ids) for r, _ in mb)
        n_sft = sum(len(r.response_ids) for r, _ in mb if r.correct)
        total = 0.0
        for i, chunk in enumerate(plan.chunks):
            with gradient_sync(policy, enabled=i == len(plan.chunks) - 1):
                if not chunk:  # this rank's share ran out: a pass for the collectives, zero gradient
                    logp, _, _ = logprobs(policy, plan.filler, device)
                    (logp.sum() * 0.0).backward()
                    continue
                logp, mask, ent = logprobs(policy, chunk, device)
                if m == 0:  # the policy is still the behaviour policy: this pass is its log-prob
                    old_t = logp.detach()
                    _mismatch(sums, chunk, old_t)
                else:
                    old_t = torch.nn.utils.rnn.pad_sequence(old[m][i], batch_first=True)
                    _staleness(sums, logp, old_t, mask)
                adv_t = torch.tensor([a for _, a in chunk], device=device)
                loss, mets = policy_loss(cfg.loss, logp, old_t, adv_t, mask, cfg.eps_low, cfg.eps_high,
                                         num_tokens=n_tok, beta1=cfg.beta1, beta2=cfg.beta2,
                                         dual_clip=cfg.dual_clip)
                if cfg.sft_alpha and n_sft:
                    ok = torch.tensor([float(r.correct) for r, _ in chunk], device=device)[:, None]
                    loss = loss + cfg.sft_alpha * -(logp * mask * ok).sum() / n_sft
                (loss * world).backward()  # ranks' gradients are averaged: ×N gives the sum
                total += loss.item()
                n_chunk = float(mask.sum())
                for k, v in {**mets, "entropy": ent}.items():
                    sums.add(k, v, n_chunk)
        norms.append(scalar(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)))
        losses.append(all_reduce_sum(total, ctx) if ctx is not None else total)
        check_finite(f"RL step {step + 1}, mini-batch {m + 1}", losses[-1], norms[-1], opt.param_groups[0]["lr"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        sums.add("rank_token_imbalance", plan.imbalance, 1.0)
    sched.step()
    values.update(sums.reduce(ctx))
    values.update(loss=sum(losses) / len(losses), grad_norm=sum(norms) / len(norms), grad_norm_max=max(norms))
    return values


def _staleness(sums: _Sums, logp: torch.Tensor, old_t: torch.Tensor, mask: torch.Tensor) -> None:
    """`stale_logratio` = mean |log π_θ − log π_old| over the tokens of the mini-batches after the first: how
    far the policy has moved from the one that sampled them when they are trained (0 with one mini-batch;
    the clip regions start at |log δ| ≈ 0.22–0.25)."""
    n = float(mask.sum())
    if n:
        with torch.no_grad():
            sums.add("stale_logratio", float(((logp.detach() - old_t).abs() * mask).sum()) / n, n)


@dataclass
class _RankPlan:
    chunks: list[list]        # this rank's micro-batches; [] = a filler pass
    filler: list              # one (rollout, advantage) to run a filler pass on
    imbalance: float          # max / mean tokens per rank in this mini-batch


def _plan(mb: list, rank: int, world: int, micro: int) -> _RankPlan:
    shares = balance([r.tokens for r, _ in mb], world)
    load = [sum(mb[i][0].tokens for i in s) for s in shares]
    mine = [mb[i] for i in shares[rank]]
    n_micro = max(math.ceil(len(s) / micro) for s in shares)
    chunks = [mine[i * micro:(i + 1) * micro] for i in range(n_micro)]
    smallest = min(mb, key=lambda x: x[0].tokens)
    return _RankPlan(chunks, [smallest], max(load) / max(1e-9, sum(load) / world))


def _mismatch(sums: _Sums, chunk: list, trainer: torch.Tensor) -> None:
    """|rollout engine log-prob − trainer log-prob| per token, for rollouts that carry engine log-probs."""
    for i, (r, _) in enumerate(chunk):
        if len(r.logprobs) != len(r.response_ids) or not r.logprobs:
            continue
        diff = (trainer[i, :len(r.logprobs)].float().cpu() - torch.tensor(r.logprobs)).abs()
        sums.add("logprob_diff_mean", float(diff.mean()), len(r.logprobs))
        sums.high("logprob_diff_max", float(diff.max()))


def _behaviour_logprobs(policy, minis: list, plans: list[_RankPlan], device, from_rollouts: bool,
                        sums: _Sums) -> list[list[list[torch.Tensor]] | None]:
    """π_old per mini-batch after the first, per micro-batch of this rank, per rollout (None for the first
    mini-batch, which needs none: it trains on the unchanged policy, so its own pass gives π_old exactly).
    From the rollout engine when `from_rollouts` and every later rollout carries one log-prob per response
    token; else one no-grad pass per micro-batch before any update of this step (filler passes included,
    so every rank runs the same number of forwards)."""
    out: list = [None] * len(minis)
    rest = [r for mb in minis[1:] for r, _ in mb]
    if from_rollouts and all(len(r.logprobs) == len(r.response_ids) for r in rest):
        for m in range(1, len(minis)):
            out[m] = [[torch.tensor(r.logprobs, device=device) for r, _ in chunk] for chunk in plans[m].chunks]
        return out
    with torch.no_grad():
        for m in range(1, len(minis)):
            out[m] = []
            for chunk in plans[m].chunks:
                lp, _, _ = logprobs(policy, chunk or plans[m].filler, device)
                if not chunk:
                    out[m].append([])
                    continue
                _mismatch(sums, chunk, lp)
                out[m].append([lp[i, :len(r.response_ids)] for i, (r, _) in enumerate(chunk)])
    return out


LOGPROB_BLOCK = 4096  # response tokens whose fp32 log-softmax exists at once (with its backward ≈ 14·4096·V bytes:
#                      8.7 GB at V = 152K; tasks/training/plan.py counts it)


def logprobs(model, chunk: list, device) -> tuple[torch.Tensor, torch.Tensor, float]:
    """log π(response tokens) for a chunk of (rollout, advantage): a (B, T_resp) right-padded tensor, its
    mask, and the mean token entropy (a diagnostic; no gradient). Prompt tokens are not scored.

    Memory: the model computes logits only from the first position that scores a response token
    (`logits_to_keep`), in its own dtype (bf16 under autocast); log-probs are taken in fp32 as
    logit[y] − logsumexp(logits) in blocks of LOGPROB_BLOCK tokens under activation checkpointing
    (`token_logprobs`), so no fp32 copy of the [B, T, V] logits is kept for backward: one block's is
    rebuilt at a time (the entropy diagnostic is summed block by block too)."""
    seqs = [r.prompt_ids + r.response_ids for r, _ in chunk]
    width = max(map(len, seqs))
    first = min(len(r.prompt_ids) for r, _ in chunk) - 1  # position of the first scored logit
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
    logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=width - first).logits
    t_resp = max(len(r.response_ids) for r, _ in chunk)
    rows, ent_sum, n = [], 0.0, 0
    for i, (r, _) in enumerate(chunk):
        p, t = len(r.prompt_ids), len(r.response_ids)
        lg = logits[i, p - 1 - first:p - 1 - first + t]
        y = torch.tensor(r.response_ids, device=device)
        parts = []
        for s in range(0, t, LOGPROB_BLOCK):
            block, ys = lg[s:s + LOGPROB_BLOCK], y[s:s + LOGPROB_BLOCK]
            if block.requires_grad:
                parts.append(checkpoint(token_logprobs, block, ys, use_reentrant=False))
            else:
                parts.append(token_logprobs(block, ys))
            with torch.no_grad():
                full = torch.log_softmax(block.detach().float(), dim=-1)
                ent_sum += float(-(full.exp() * full).sum())
        rows.append(torch.nn.functional.pad(torch.cat(parts), (0, t_resp - t)))
        n += t
    mask = torch.tensor([[1.0] * len(r.response_ids) + [0.0] * (t_resp - len(r.response_ids)) for r, _ in chunk],
                        device=device)
    return torch.stack(rows), mask, ent_sum / max(1, n)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[token] per row, in fp32: logit[token] − logsumexp(logits)."""
    logits = logits.float()
    return logits.gather(-1, tokens[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
