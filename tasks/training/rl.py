"""GPPO reinforcement learning, read top to bottom (the Klear-Reasoner paper's RL section):

per step: sample `prompts_per_step` prompts → `rollouts_per_prompt` completions each (temperature 1.0)
→ rewards (math-verify / sandbox; tasks/grading/rewards.py: a wrong answer, a timed-out program included,
gets the wrong-answer reward; an INFRA grade gets None, is left out and counted in `infra_failures`)
→ group-normalised advantages → drop zero-variance groups → split the
rollouts into `mini_batches` and take one optimizer step per mini-batch (several updates per rollout
batch, as the paper) with

    L = policy_loss(loss, logp, old_logp, Â, mask)  +  α · NLL(correct rollouts)     (α = 0.1)

old_logp is the rollout policy's log-prob. The first mini-batch trains on the unchanged policy and takes
it from its own pass; for the others it is, per `old_logprobs`, either recomputed by a no-grad forward pass
before the first update ("recompute", training numerics exactly) or taken from the rollout engine
("rollout": free; only when the engine is the policy itself in the same precision, i.e. the transformers
backend, whose rollout log-probs differ from the training pass by ≤ 6.4e-6, mean 3e-8, measured on the demo
SFT model, 128 rollouts, 10k tokens; "auto" = "rollout" for backend "hf" without bf16, else "recompute").
Constant lr after warm-up, weight decay 0.1, grad clip 1.0, no KL, seeded.
The rollout engine is the policy itself on CPU (transformers) or vLLM on GPU, whose weights are pushed in
place after every optimizer step (tasks/generation/vllm_backend.py).
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from tasks.generation.base import chat_prompt
from tasks.grading.rewards import is_correct, reward_from_grade
from tasks.progress import StepProgress
from tasks.training.advantages import estimate_advantages, zero_variance_groups
from tasks.training.losses import policy_loss
from tasks.training.config import RLConfig
from tasks.training.checkpoint import check_fresh_out, load_training_state, resume_checkpoint, save_checkpoint
from tasks.training.metrics import MetricsLog, plot_curve
from tasks.training.rl_data import PromptSampler, keep_fitting, load_rl_rows
from tasks.training.schedule import warmup_constant

log = logging.getLogger(__name__)


def default_rl_lr(hidden: int) -> float:
    return min(1e-4, 1e-6 * 4096 / hidden * 10)


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


def train_rl(model_dir: str, data: str, out: str, cfg: RLConfig, resume: bool = False,
             on_step: Callable[[int, int, dict], None] | None = None, graders: dict | None = None) -> dict:
    """Entry rules (as train_sft): the model directory must load; `out` is claimed for this run
    (storage/claims.py); a run that does not resume refuses an `out` holding another run's checkpoints
    or metrics (--force in the CLI); `resume` continues from the newest complete checkpoint. Problems
    whose prompt does not fit the context minus max_tokens are left out and counted (rl_data.py)."""
    from storage.claims import claim_dir
    from tasks.models.checks import check_model_dir

    check_model_dir(model_dir, deep=True)
    check_fresh_out(Path(out), resume)
    with claim_dir(out):
        return _train_rl(model_dir, data, out, cfg, resume, on_step, graders)


def _train_rl(model_dir: str, data: str, out: str, cfg: RLConfig, resume: bool = False,
              on_step: Callable[[int, int, dict], None] | None = None, graders: dict | None = None) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tasks.evaluation.evaluate import grade_samples

    hf_logging.disable_progress_bar()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ckpt = resume_checkpoint(out) if resume else None
    torch.manual_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(str(ckpt or model_dir), dtype=torch.float32).to(device)
    model.config.use_cache = True
    rows, dataset = load_rl_rows(data, tuple(cfg.domains), cfg.min_pass_rate, cfg.max_pass_rate)
    rows, too_long = keep_fitting(rows, tok, getattr(model.config, "max_position_embeddings", None),
                                  cfg.max_tokens, data)
    sampler = PromptSampler(rows, cfg.prompts_per_step, cfg.seed)
    lr = cfg.lr or default_rl_lr(model.config.hidden_size)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_constant(s, cfg.warmup_steps))
    step = 0
    if ckpt is not None:
        step = load_training_state(ckpt, opt, sched, device)
    metrics = MetricsLog(out, resume_from_step=step if ckpt else None)
    (out / "rl_config.json").write_text(json.dumps({"model": model_dir, "data": data, "dataset": dataset,
                                                    "config": asdict(cfg), "lr": lr, "prompts": len(rows),
                                                    "too_long_prompts": too_long}, indent=2))
    gen = _make_rollout_engine(model, tok, model_dir, cfg)
    gen.sync_weights(model)  # a separate engine (vLLM) loaded `model_dir`; on resume the policy is newer
    own_graders = graders is None
    graders = {} if own_graders else graders
    report = StepProgress(f"rl {cfg.loss}", start_step=step)
    try:
        while step < cfg.steps:
            t0 = time.perf_counter()
            batch = sampler.batch(step)
            prompts = [chat_prompt(tok, r["problem"]) for r in batch]
            model.eval()
            comps = gen.generate(prompts, replace(cfg.sampling_params(cfg.rollouts_per_prompt),
                                                  seed=cfg.seed * 1_000_003 + step))
            t_gen = time.perf_counter() - t0
            grades = grade_samples(batch, [[c.text for c in cs] for cs in comps], graders)
            rollouts = _rollouts(batch, prompts, comps, grades, tok, cfg)
            values = _update(model, opt, sched, rollouts, cfg, device, step)
            gen.sync_weights(model)
            step += 1
            values.update(t_generate_s=t_gen, t_step_s=time.perf_counter() - t0, lr=sched.get_last_lr()[0])
            if cfg.eval_benchmark and cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                values["eval_avg_at_k"] = _held_out(gen, tok, cfg, graders)
            metrics.log(step, values)
            held_out = {"avg@k": values["eval_avg_at_k"]} if "eval_avg_at_k" in values else {}
            report.update(step, cfg.steps, tokens=values["response_len"] * len(rollouts),  # generated tokens
                          reward=values["reward_mean"], acc=values["accuracy"], **held_out)
            if on_step:
                on_step(step, cfg.steps, values)
            if step % cfg.save_every == 0 or step == cfg.steps:
                save_checkpoint(model, tok, opt, sched, step, out, cfg.keep_checkpoints)
    finally:
        report.close()
        if own_graders:
            for g in graders.values():
                g.close()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    rows_m = metrics.read()
    plot_curve(rows_m, "reward_mean", out / "reward.png", f"RL reward ({cfg.loss})")
    metrics.close()
    return {"out": str(out), "steps": step, "dataset": dataset, "metrics": rows_m}


def _make_rollout_engine(model, tok, model_dir: str, cfg: RLConfig):
    if cfg.backend == "vllm":
        from tasks.generation.vllm_backend import VLLMGenerator

        return VLLMGenerator(model_dir)
    from tasks.generation.hf_backend import HFGenerator

    class _PolicyEngine(HFGenerator):
        def sync_weights(self, _model) -> None:  # the policy itself generates: nothing to push
            pass

    return _PolicyEngine(model, tok, batch_size=max(64, cfg.rollouts_per_prompt * 8))


def _rollouts(batch, prompts, comps, grades, tok, cfg: RLConfig) -> list[Rollout]:
    out = []
    for g, (row, prompt, cs, gs) in enumerate(zip(batch, prompts, comps, grades)):
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        for c, grade in zip(cs, gs):
            r = reward_from_grade(row["domain"], c.text, grade, cfg.reward)
            out.append(Rollout(g, row["domain"], p_ids, c.token_ids, r, is_correct(r, cfg.reward, row["domain"]),
                               c.finish_reason == "length", list(c.logprobs)))
    return out


def _bf16(cfg: RLConfig, device) -> bool:
    if cfg.bf16 is not None:
        return cfg.bf16
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def _update(model, opt, sched, rollouts: list[Rollout], cfg: RLConfig, device, step: int) -> dict:
    """Advantages, filtering, then `mini_batches` optimizer steps; returns the step's metrics. Forward and
    backward passes run under bf16 autocast when `_bf16` says so (log-probs are taken in fp32)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=_bf16(cfg, device)):
        return _update_steps(model, opt, sched, rollouts, cfg, device, step)


def _update_steps(model, opt, sched, rollouts: list[Rollout], cfg: RLConfig, device, step: int) -> dict:
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
        sched.step()  # keep the schedule aligned with the step count
        return {**values, "loss": 0.0, "grad_norm": 0.0, "entropy": 0.0, "clip_frac_low": 0.0,
                "clip_frac_high": 0.0, "ratio_mean": 1.0}
    random.Random(cfg.seed * 31 + step).shuffle(train)
    model.train()
    size = -(-len(train) // cfg.mini_batches)
    old_flat = _behaviour_logprobs(model, train, size, cfg.micro_batch_size, device,
                                   _use_rollout_logprobs(cfg, device))
    agg: dict[str, list[float]] = {}
    for m in range(0, len(train), size):
        mb, mb_old = train[m:m + size], old_flat[m:m + size]
        n_tok = sum(len(r.response_ids) for r, _ in mb)
        n_sft = sum(len(r.response_ids) for r, _ in mb if r.correct)
        total = 0.0
        for i in range(0, len(mb), cfg.micro_batch_size):
            chunk, chunk_old = mb[i:i + cfg.micro_batch_size], mb_old[i:i + cfg.micro_batch_size]
            logp, mask, ent = _logprobs(model, chunk, device)
            if m == 0:  # the policy is still the behaviour policy: this pass is its log-prob
                old_t = logp.detach()
            else:
                old_t = torch.nn.utils.rnn.pad_sequence(chunk_old, batch_first=True)
            adv_t = torch.tensor([a for _, a in chunk], device=device)
            loss, mets = policy_loss(cfg.loss, logp, old_t, adv_t, mask, cfg.eps_low, cfg.eps_high,
                                     num_tokens=n_tok, beta1=cfg.beta1, beta2=cfg.beta2, dual_clip=cfg.dual_clip)
            if cfg.sft_alpha and n_sft:
                ok = torch.tensor([float(r.correct) for r, _ in chunk], device=device)[:, None]
                loss = loss + cfg.sft_alpha * -(logp * mask * ok).sum() / n_sft
            loss.backward()
            total += loss.item()
            for k, v in {**mets, "entropy": ent}.items():
                agg.setdefault(k, []).append(v)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip).item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        agg.setdefault("loss", []).append(total)
        agg.setdefault("grad_norm", []).append(gnorm)
    sched.step()
    values.update({k: sum(v) / len(v) for k, v in agg.items()})
    return values


def _chunks(xs, n):
    return [xs[i:i + n] for i in range(0, len(xs), n)]


def _use_rollout_logprobs(cfg: RLConfig, device) -> bool:
    """"auto": the rollout log-probs when the engine is the policy itself at training precision (backend
    "hf", no bf16 autocast in the update); else the recomputed pass."""
    if cfg.old_logprobs not in ("auto", "rollout", "recompute"):
        raise ValueError(f"old_logprobs must be auto, rollout or recompute, not {cfg.old_logprobs!r}")
    if cfg.old_logprobs == "auto":
        return cfg.backend == "hf" and not _bf16(cfg, device)
    return cfg.old_logprobs == "rollout"


def _behaviour_logprobs(model, train, size: int, micro: int, device,
                        from_rollouts: bool = False) -> list[torch.Tensor | None]:
    """log π_old per rollout for every mini-batch of `size` after the first (None for the first). The first
    mini-batch needs none: it trains on the unchanged policy, so its own forward pass gives π_old exactly
    (TRL skips the pass the same way when on-policy). With `from_rollouts`, and every rollout carrying one
    log-prob per response token, they are the rollout engine's; otherwise one no-grad pass before any update
    of this step, chunked as training chunks each mini-batch, so π_old has training's numerics exactly
    (another padding width can move a log-prob by ~1e-5)."""
    old: list[torch.Tensor | None] = [None] * min(size, len(train))
    rest = train[size:]
    if from_rollouts and all(len(r.logprobs) == len(r.response_ids) for r, _ in rest):
        return old + [torch.tensor(r.logprobs, device=device) for r, _ in rest]
    with torch.no_grad():
        for m in range(size, len(train), size):
            for chunk in _chunks(train[m:m + size], micro):
                lp, _, _ = _logprobs(model, chunk, device)
                old += [lp[i, :len(r.response_ids)] for i, (r, _) in enumerate(chunk)]
    return old


def _logprobs(model, chunk, device) -> tuple[torch.Tensor, torch.Tensor, float]:
    """log π(response tokens) for a chunk of (rollout, advantage): a (B, T_resp) right-padded tensor, its
    mask, and the mean token entropy (a diagnostic; no gradient). Prompt tokens are not scored."""
    seqs = [r.prompt_ids + r.response_ids for r, _ in chunk]
    width = max(map(len, seqs))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
    logits = model(input_ids=ids, attention_mask=attn).logits.float()
    t_resp = max(len(r.response_ids) for r, _ in chunk)
    out = torch.zeros(len(chunk), t_resp, device=device)
    mask = torch.zeros(len(chunk), t_resp, device=device)
    ent_sum, n = 0.0, 0
    for i, (r, _) in enumerate(chunk):
        p, t = len(r.prompt_ids), len(r.response_ids)
        lg = torch.log_softmax(logits[i, p - 1:p - 1 + t], dim=-1)
        out[i, :t] = lg.gather(-1, torch.tensor(r.response_ids, device=device)[:, None]).squeeze(-1)
        mask[i, :t] = 1
        with torch.no_grad():
            ent_sum += float(-(lg.exp() * lg).sum())
        n += t
    return out, mask, ent_sum / max(1, n)


def _held_out(gen, tok, cfg: RLConfig, graders) -> float:
    from tasks.evaluation.evaluate import EvalConfig, evaluate

    res = evaluate("", "held-out", cfg.eval_benchmark, EvalConfig(k=cfg.eval_k, max_tokens=cfg.max_tokens,
                                                                 seed=cfg.seed), generator=gen, graders=graders,
                   progress_mode="off")  # the RL step's progress has the terminal; avg@k shows in its line
    return res.avg_at_k
