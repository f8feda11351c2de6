"""One GPPO update from a step's rollouts, on one process or N ranks (DDP or FSDP), with the same result:

1. rewards → group-normalised advantages (estimate_advantages) → drop zero-variance groups → keep the first
   `prompts_per_step` groups left, in the order their prompts were drawn, when the step was oversampled
   (`oversample` > 1 generated more; the rest are counted in `surplus_groups`); every rank holds
   the whole list of the step's rollouts (the tokens only of those it trains: rollout_exchange.py), so this
   and the seeded shuffle are the same everywhere;
2. the shuffled rollouts are cut into `mini_batches` (with `fixed_mini_batch`, into as many as the groups
   left fill at prompts_per_step / mini_batches prompts each, the paper's fixed mini-batch); one optimizer
   step per mini-batch;
3. each mini-batch is shared over the ranks by token count (`balance`), and each rank's share is cut into
   micro-batches of at most `micro_batch_tokens` tokens (prompt + response; `micro_batches`; a longer
   rollout is a micro-batch of its own), each packed into one row without padding (scoring.py). The
   loss of a micro-batch is

       L = policy_loss(logp, old_logp, Â, mask; num_tokens = T_mb)  +  α · NLL(correct rollouts) / T_mb^ok

   with T_mb the response tokens of the WHOLE mini-batch (all ranks) and T_mb^ok those of its correct
   rollouts, so the micro-batch losses of all ranks add up to the one-process loss. DDP and FSDP average
   gradients over the N ranks, so each rank back-propagates N·L: the averaged gradient is then exactly
   the one-process gradient of Σ L (up to float summation order).
4. Every rank runs the same number of forward passes per mini-batch (a rank with fewer micro-batches runs a
   filler pass whose loss is 0·logp), because under FSDP every forward is a collective; gradients are
   synchronised in the last micro-batch only.

log π is taken at the sampling temperature τ (log softmax(z/τ), the distribution the engine sampled from;
RLConfig refuses top-p < 1, which the trainer does not apply). bf16 (`bf16_enabled`): autocast is opened
around each forward pass only, never around a backward or an optimizer step — autocast keeps its bf16
copies of the fp32 weights for as long as it is open, so a context spanning optimizer steps would run every
later mini-batch on the weights of the first.

π_old (old_logp): the first mini-batch trains on the unchanged policy and takes it from its own pass; for
the others it is either the rollout engine's log-probs (`from_rollouts`) or a no-grad pass before the
first update over the very micro-batches training runs (the same packing, so the same numerics).

Diagnostics, all token-weighted over the whole step (all ranks), kept on the device and read once per step:
clip fractions, ratio mean, entropy, the shares of the gradient from the clipped regions
(`grad_share_low/high`, losses.gradient_shares), `stale_logratio` (π_old's staleness in the later
mini-batches), `grad_norm_max` (pre-clip, per step); `logprob_diff_mean`/`logprob_diff_max` =
|rollout engine log-prob − trainer log-prob| over the tokens whose trainer log-prob this step computed
before any update (the rollout/trainer mismatch: ~0 for the policy itself, larger for a bf16 vLLM engine;
only at τ = 1, where the engines' raw log-probs are the sampled distribution's); `rank_token_imbalance` =
mean over mini-batches of max_rank tokens / mean_rank tokens (1.0 = perfectly even; 1.0 on one process).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from tasks.generation.engine import resolve_backend
from tasks.training.advantages import estimate_advantages, zero_variance_groups
from tasks.training.config import RLConfig
from tasks.training.distributed import all_gather_objects, all_reduce_sum, gradient_sync, scalar, unwrap
from tasks.training.losses import GRADIENT_SHARES, policy_loss_on_device
from tasks.training.metrics import check_finite
from tasks.training.packed_attention import resolve_attention
from tasks.training.scoring import PADDED, ScoringBatch, rollout_batch, score_inputs, scoring


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


def micro_batches(sizes: list[int], budget: int, cap: int | None = None) -> list[list[int]]:
    """Indices of `sizes` (tokens per rollout) cut into micro-batches of at most `budget` tokens and `cap`
    rollouts (None: no cap) by first-fit decreasing: the largest rollout first, each into the first
    micro-batch it fits, else a new one (a rollout over the budget alone). Each micro-batch's indices are
    ascending; micro-batches in order of their first index."""
    bins: list[list[int]] = []
    load: list[int] = []
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        b = next((b for b in range(len(bins)) if load[b] + sizes[i] <= budget
                  and (cap is None or len(bins[b]) < cap)), None)
        if b is None:
            bins.append([])
            load.append(0)
            b = len(bins) - 1
        bins[b].append(i)
        load[b] += sizes[i]
    return sorted((sorted(b) for b in bins), key=lambda b: b[0])


def bf16_enabled(cfg: RLConfig, device: torch.device) -> bool:
    if cfg.bf16 is not None:
        return cfg.bf16
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def gradient_checkpointing(cfg: RLConfig, device: torch.device) -> bool:
    """RLConfig.gradient_checkpointing, None resolved: on with a GPU (long responses), off on CPU."""
    return cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else device.type == "cuda"


def update_attention(cfg: RLConfig, device: torch.device, model_config=None) -> str:
    """The update's layout and kernel: PADDED without packing, else the packed-attention kernel of
    `cfg.attention` on this device for this model (packed_attention.resolve_attention: auto → flex on a GPU,
    varlen else and for sliding-window models)."""
    return resolve_attention(cfg.attention, device, model_config) if cfg.packing else PADDED


def use_rollout_logprobs(cfg: RLConfig, device: torch.device) -> bool:
    """"auto": the rollout log-probs when the engine is the policy itself at training precision (backend
    "hf", or "auto" resolved to it; no bf16 autocast in the update, so no bf16 inference copy either) and
    samples at temperature 1 (the engines' log-probs are the raw distribution's); else the recomputed pass."""
    if cfg.old_logprobs == "auto":
        return resolve_backend(cfg.backend) == "hf" and not bf16_enabled(cfg, device) and cfg.temperature == 1.0
    return cfg.old_logprobs == "rollout"


class _Sums:
    """Token-weighted sums of per-chunk metrics, plus maxima, as device tensors; read and reduced over ranks
    once per step."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor | float] = {}
        self.weights: dict[str, float] = {}
        self.maxima: dict[str, torch.Tensor | float] = {}

    def add(self, name: str, total, weight) -> None:
        """`total`: the metric summed over `weight` tokens (or a mean times its weight); `weight` may be a
        device tensor too (the gradient shares' Σ|g|)."""
        self.sums[name] = self.sums.get(name, 0.0) + total
        self.weights[name] = self.weights.get(name, 0.0) + weight

    def high(self, name: str, value) -> None:
        self.maxima[name] = torch.maximum(self.maxima[name], value) if name in self.maxima else value

    def reduce(self, ctx) -> dict[str, float]:
        sums = {k: (float(v), float(self.weights[k])) for k, v in self.sums.items()}
        maxima = {k: float(v) for k, v in self.maxima.items()}
        if ctx is not None and ctx.world_size > 1:
            gathered = all_gather_objects((sums, maxima), ctx)
            sums, maxima = {}, {}
            for s, m in gathered:
                for k, (v, w) in s.items():
                    v0, w0 = sums.get(k, (0.0, 0.0))
                    sums[k] = (v0 + v, w0 + w)
                for k, v in m.items():
                    maxima[k] = max(maxima.get(k, 0.0), v)
        out = {k: v / w if w else 0.0 for k, (v, w) in sums.items()}  # weight 0: the shares when every g_t = 0
        return {**out, **maxima}


def update_policy(model, opt, sched, rollouts: list[Rollout], cfg: RLConfig, device: torch.device, step: int,
                  *, policy=None, ctx=None) -> dict:
    """Advantages, filtering, then up to `mini_batches` optimizer steps (trained_minibatches) on `rollouts`
    (the step's whole list, the same on every rank); returns the step's metrics. `policy` is the module to run (a DDP wrapper; default
    `model`), `ctx` the distributed context (default: one process). Each forward runs under bf16 autocast
    when `bf16_enabled` says so (log-probs are taken in fp32; backward and optimizer steps outside it). When
    every group is filtered out nothing is trained: no optimizer or scheduler step (warm-up counts updates)."""
    with scoring(model, update_attention(cfg, device, getattr(unwrap(model), "config", None))):
        return _update_steps(model, policy or model, opt, sched, rollouts, cfg, device, step, ctx)


@dataclass
class _Micro:
    """One micro-batch of this rank: its (rollout, advantage) pairs (empty: a filler pass) and inputs."""

    items: list
    batch: ScoringBatch


@dataclass
class _RankPlan:
    chunks: list[_Micro]      # this rank's micro-batches, fillers included
    imbalance: float          # max / mean tokens per rank in this mini-batch


def trained_minibatches(rollouts: list[Rollout], cfg: RLConfig, step: int) -> tuple[dict, list[list]]:
    """(the step's rollout metrics, its mini-batches of (rollout, advantage) pairs): steps 1-2 of the module
    docstring, from each rollout's group, reward, flags and lengths alone (never its tokens), so any rank
    holding the list's metadata computes them (rollout_exchange.py)."""
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
    left = sorted({r.group for r, _ in train})  # groups in the order their prompts were drawn
    trained = set(left[:cfg.prompts_per_step] if cfg.oversample > 1.0 else left)  # oversampled: the first ones
    train = [(r, a) for r, a in train if r.group in trained]
    values.update(trained_rollouts=len(train), generated_groups=n_groups, trained_groups=len(trained),
                  surplus_groups=len(left) - len(trained))
    random.Random(cfg.seed * 31 + step).shuffle(train)
    parts = cfg.mini_batches
    if cfg.fixed_mini_batch:  # the paper's fixed size: as many mini-batches as the groups left fill
        parts = min(parts, -(-len(trained) * cfg.mini_batches // cfg.prompts_per_step))
    minis = even_split(train, parts)
    values["optimizer_steps"] = len(minis)
    return values, minis


def even_split(items: list, parts: int) -> list[list]:
    """`items` cut in order into min(parts, len) pieces whose sizes differ by at most one (the larger first), so
    a step cut into `parts` takes that many optimizer steps whenever it trains at least that many rollouts."""
    k = min(parts, len(items))
    if k == 0:
        return []
    q, r = divmod(len(items), k)
    bounds = [i * q + min(i, r) for i in range(k + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


def rank_micro_batches(mb: list, world: int, cfg: RLConfig) -> list[list[list[int]]]:
    """Per rank, its micro-batches of one mini-batch as indices into `mb` (step 3: `balance` by tokens, then
    `micro_batches`); every rank runs max(len) of them, a shorter share padded with filler passes."""
    sizes = [r.tokens for r, _ in mb]
    return [[[s[j] for j in b] for b in micro_batches([sizes[i] for i in s], cfg.micro_batch_tokens,
                                                      cfg.micro_batch_size)] for s in balance(sizes, world)]


def filler(mb: list):
    """The (rollout, advantage) pair a filler pass of `mb` runs on: its fewest-token rollout."""
    return min(mb, key=lambda x: x[0].tokens)


def _update_steps(model, policy, opt, sched, rollouts, cfg: RLConfig, device, step: int, ctx) -> dict:
    rank, world = (ctx.rank, ctx.world_size) if ctx is not None else (0, 1)
    values, minis = trained_minibatches(rollouts, cfg, step)
    if not minis:
        return {**values, "loss": 0.0, "grad_norm": 0.0, "entropy": 0.0, "clip_frac_low": 0.0,
                "clip_frac_high": 0.0, "ratio_mean": 1.0, "rank_token_imbalance": 1.0}
    attention = update_attention(cfg, device, getattr(unwrap(model), "config", None))
    plans = [_plan(mb, rank, world, cfg, attention, device) for mb in minis]
    policy.train()
    sums = _Sums()
    bf16 = bf16_enabled(cfg, device)
    old = _behaviour_logprobs(policy, plans, cfg, device, bf16, use_rollout_logprobs(cfg, device), sums)
    losses, norms = [], []
    for m, (mb, plan) in enumerate(zip(minis, plans)):
        n_tok = sum(len(r.response_ids) for r, _ in mb)
        n_sft = sum(len(r.response_ids) for r, _ in mb if r.correct)
        total = torch.zeros((), device=device)
        for i, micro in enumerate(plan.chunks):
            with gradient_sync(policy, enabled=i == len(plan.chunks) - 1):
                logp, ent = _forward(policy, micro.batch, cfg, device, bf16)
                if not micro.items:  # this rank's share ran out: a pass for the collectives, zero gradient
                    (logp.sum() * 0.0).backward()
                    continue
                if m == 0:  # the policy is still the behaviour policy: this pass is its log-prob
                    old_t = logp.detach()
                    _mismatch(sums, micro, old_t, cfg)
                else:
                    old_t = old[m][i]
                    sums.add("stale_logratio", (logp.detach() - old_t).abs().sum(), old_t.numel())
                lengths = torch.tensor(micro.batch.lengths, device=device)
                adv_t = torch.tensor([a for _, a in micro.items], device=device).repeat_interleave(lengths)
                loss, mets = policy_loss_on_device(cfg.loss, logp[None], old_t[None], adv_t[None],
                                                   torch.ones_like(logp)[None], cfg.eps_low, cfg.eps_high,
                                                   num_tokens=n_tok, beta1=cfg.beta1, beta2=cfg.beta2,
                                                   dual_clip=cfg.dual_clip)
                if cfg.sft_alpha and n_sft:
                    ok = torch.tensor([float(r.correct) for r, _ in micro.items], device=device)
                    loss = loss + cfg.sft_alpha * -(logp * ok.repeat_interleave(lengths)).sum() / n_sft
                (loss * world).backward()  # ranks' gradients are averaged: ×N gives the sum
                total += loss.detach()
                n_chunk = logp.numel()
                g_abs = mets.pop("grad_abs_sum")  # the shares are ratios of sums over the step (losses.py)
                for k, v in mets.items():
                    sums.add(k, v * g_abs if k in GRADIENT_SHARES else v * n_chunk,
                             g_abs if k in GRADIENT_SHARES else n_chunk)
                sums.add("entropy", ent.sum(), n_chunk)
        norms.append(scalar(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)))
        losses.append(all_reduce_sum(float(total), ctx) if ctx is not None else float(total))
        check_finite(f"RL step {step + 1}, mini-batch {m + 1}", losses[-1], norms[-1], opt.param_groups[0]["lr"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        sums.add("rank_token_imbalance", plan.imbalance, 1.0)
    sched.step()
    values.update(sums.reduce(ctx))
    values.update(loss=sum(losses) / len(losses), grad_norm=sum(norms) / len(norms), grad_norm_max=max(norms))
    return values


def _forward(policy, batch: ScoringBatch, cfg: RLConfig, device, bf16: bool,
             entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log-probs, entropies or None) of one micro-batch: the forward alone under autocast (module docstring)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        return policy(**score_inputs(batch, cfg.temperature, entropy=entropy))


def _plan(mb: list, rank: int, world: int, cfg: RLConfig, attention: str, device) -> _RankPlan:
    per_rank = rank_micro_batches(mb, world, cfg)
    load = [sum(mb[i][0].tokens for b in share for i in b) for share in per_rank]
    n_micro = max(map(len, per_rank))
    smallest = [filler(mb)]
    chunks = []
    for k in range(n_micro):
        items = [mb[i] for i in per_rank[rank][k]] if k < len(per_rank[rank]) else []
        chunks.append(_Micro(items, rollout_batch([r for r, _ in items or smallest], attention, device)))
    return _RankPlan(chunks, max(load) / max(1e-9, sum(load) / world))


def _mismatch(sums: _Sums, micro: _Micro, trainer: torch.Tensor, cfg: RLConfig) -> None:
    """|rollout engine log-prob − trainer log-prob| per token, over the rollouts that carry engine log-probs,
    at temperature 1 only (module docstring)."""
    if cfg.temperature != 1.0:
        return
    engine: list[float] = []  # flat, as `trainer`; NaN where a rollout carries no engine log-probs
    for r, _ in micro.items:
        complete = len(r.logprobs) == len(r.response_ids)
        engine += r.logprobs if complete else [float("nan")] * len(r.response_ids)
    flat = torch.tensor(engine, device=trainer.device)
    have = ~torch.isnan(flat)
    n = sum(len(r.logprobs) for r, _ in micro.items if len(r.logprobs) == len(r.response_ids))
    if not n:
        return
    diff = torch.where(have, (trainer.float() - flat).abs(), torch.zeros_like(flat))
    sums.add("logprob_diff_mean", diff.sum(), n)
    sums.high("logprob_diff_max", diff.max())


def _behaviour_logprobs(policy, plans: list[_RankPlan], cfg: RLConfig, device, bf16: bool, from_rollouts: bool,
                        sums: _Sums) -> list[list[torch.Tensor] | None]:
    """π_old per mini-batch after the first, per micro-batch of this rank, flat over its response tokens
    (None for the first mini-batch, which needs none: it trains on the unchanged policy, so its own pass gives
    π_old exactly). From the rollout engine when `from_rollouts` and every later rollout carries one log-prob
    per response token; else one no-grad pass per micro-batch before any update of this step (filler passes
    included, so every rank runs the same number of forwards)."""
    out: list = [None] * len(plans)
    rest = [r for plan in plans[1:] for micro in plan.chunks for r, _ in micro.items]
    if from_rollouts and all(len(r.logprobs) == len(r.response_ids) for r in rest):
        for m in range(1, len(plans)):
            out[m] = [torch.tensor([x for r, _ in micro.items for x in r.logprobs], device=device)
                      for micro in plans[m].chunks]
        return out
    with torch.no_grad():
        for m in range(1, len(plans)):
            out[m] = []
            for micro in plans[m].chunks:
                lp, _ = _forward(policy, micro.batch, cfg, device, bf16, entropy=False)  # π_old: no softmax pass
                if micro.items:
                    _mismatch(sums, micro, lp, cfg)
                out[m].append(lp)
    return out
