"""A dry run of RL: the memory plan (tasks/training/plan.py) of an RLConfig on given hardware, for a model
named by its Hugging Face directory (only config.json is read; weights are never opened) or by a shape
name of plan.SHAPES, so a paper-scale run can be planned on a laptop before renting GPUs.

Rules:
- `model`: a directory holding config.json is read as that model; else a SHAPES name; else ValueError
  (one line naming the argument and the known shapes).
- longest prompt: `prompt_tokens` (the data's longest prompt, when the caller measured it), else
  DEFAULT_PROMPT_TOKENS. When the model states its context (max_position_embeddings), a prompt longer than
  context − max_tokens is planned at that budget: train_rl leaves such prompts out (rl_data.keep_fitting),
  so they never reach the GPU. A context with no room left for any prompt is refused.
- tokens per micro-batch: cfg.micro_batch_tokens, but never more than one mini-batch holds
  (⌈prompts_per_step · rollouts_per_prompt / mini_batches⌉ full-length rollouts) nor more than
  cfg.micro_batch_size of them, and at least one full-length rollout (a longer one runs alone): the
  largest row the update really builds.
- gradient checkpointing: cfg.gradient_checkpointing when set; None plans it on (train_rl turns it on
  with a GPU, the machine a plan is for). bf16 likewise: cfg.bf16, None planned on (a GPU's default).
- mini-batches: cfg.mini_batches, which with the ranks sets how many rollouts a rank trains per optimizer
  step (plan.py: more than one micro-batch keeps unsharded gradients under fsdp).
- what train_rl will run comes from `cfg`, whatever `hw` says: the strategy is cfg.strategy, tp is
  cfg.tensor_parallel, and a vLLM
  engine is planned unless cfg.backend is "hf" ("auto" picks vLLM on a GPU with vLLM installed, the machine
  a plan is for); with "hf" the policy generates (plan.py: a copy per rank under fsdp or a bf16 update, and
  the decode batch within the engine's share of the GPU). `hw` gives the rest: GPUs, their memory, checkpointing, the engine's
  share, sleeping.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.generation.base import prompt_budget
from tasks.training.plan import SHAPES, Hardware, Plan, Shape, Workload, plan_rl

if TYPE_CHECKING:
    from tasks.training.config import RLConfig

DEFAULT_PROMPT_TOKENS = 4096  # the paper's prompt cap (prompts ≤ 4K tokens), when the data's longest is unknown


def model_config(model: str) -> tuple[str, dict]:
    """(a label, the HF config dict) of a model directory or a SHAPES name (module rules)."""
    path = Path(model) / "config.json"
    if path.is_file():
        try:
            value = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"{path}: not readable JSON ({str(e).splitlines()[0][:120]})") from None
        if not isinstance(value, dict):
            raise ValueError(f"{path}: not a JSON object")
        return str(model), value
    if model in SHAPES:
        return model, dict(SHAPES[model])
    raise ValueError(f"model {model!r}: neither a model directory with config.json nor a known shape "
                     f"(known: {', '.join(SHAPES)})")


def dry_run(model: str, cfg: "RLConfig", hw: Hardware, prompt_tokens: int | None = None) -> Plan:
    """The per-GPU memory plan of training `cfg` on `hw` (module rules), its title naming the model."""
    label, config = model_config(model)
    try:
        shape = Shape.from_hf_config(config)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise ValueError(f"{label}: config.json lacks a usable {e} (not a decoder-only model config)") from None
    context = config.get("max_position_embeddings") or None
    budget = prompt_budget(context, cfg.max_tokens)
    longest = DEFAULT_PROMPT_TOKENS if prompt_tokens is None else prompt_tokens
    prompt = longest if budget is None else max(0, min(longest, budget))
    rollouts = cfg.prompts_per_step * cfg.rollouts_per_prompt
    seq = prompt + cfg.max_tokens
    most = min(-(-rollouts // cfg.mini_batches), cfg.micro_batch_size or rollouts)
    micro = max(seq, min(cfg.micro_batch_tokens, most * seq))
    work = Workload(prompts_per_step=cfg.prompts_per_step, rollouts_per_prompt=cfg.rollouts_per_prompt,
                    micro_batch_tokens=micro, prompt_tokens=prompt, max_tokens=cfg.max_tokens,
                    mini_batches=cfg.mini_batches, generated_prompts=cfg.generated_prompts)
    checkpointing = True if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing
    plan = plan_rl(shape, work, replace(hw, strategy=cfg.strategy, engine=cfg.backend != "hf", tp=cfg.tensor_parallel,
                                        gradient_checkpointing=checkpointing, bf16=cfg.bf16 is not False))
    title = f"{label} ({cfg.backend} rollouts): {plan.title}"
    if 0 < prompt < longest:
        title += (f"; prompts over {prompt:,} tokens are left out (context {context:,} − max_tokens "
                  f"{cfg.max_tokens:,})")
    refusal = plan.refusal
    if budget is not None and budget < 1:
        refusal = (f"max_tokens {cfg.max_tokens:,} leaves no room for a prompt in the model's {context:,}-token "
                   f"context; lower max_tokens")
    return replace(plan, title=title, refusal=refusal)
