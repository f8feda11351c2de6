"""Named RL settings at the paper's scale: the RLConfig fields the paper states (as overrides of RLConfig's
laptop-scale defaults) and the run shape they are meant for (a model shape of plan.SHAPES and the GPUs, as
a plan.Hardware; nproc is not an RLConfig field but the launcher's), so `RLConfig(**preset.config)` is the
paper's run and `dry_run(preset.model, that config, preset.hardware)` its memory plan.

Two entries, the paper's two RL stages: "paper" (math, the first stage; "paper-math" is the same) and
"paper-code" (code, started from the math stage's result). No "demo" entry: RLConfig's own defaults are
the laptop demo (each with its reason next to it), so a preset of no overrides would only be a second
place for them to drift.

What the presets leave at RLConfig's defaults, and why:
- steps: the paper does not state the number of rollout batches per stage; the user sets it.
- reward: RewardConfig's defaults are the paper's (±1 math, −2.0 without <think>, soft code reward = pass
  fraction) but for −1.0 rather than the release's −0.5 without </think>: no format penalty may pay more
  than a wrong answer (tasks/grading/rewards.py says why).
- one PPO epoch over each rollout batch: what train_rl always does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tasks.training.plan import Hardware

PAPER_MATH: dict = {
    "loss": "gppo",                  # the paper's method: clip-higher GRPO whose clipped tokens keep a gradient
    "eps_low": 0.2,                  # lower clip bound 1 − 0.2, as the paper sets it
    "eps_high": 0.28,                # upper clip bound 1 + 0.28 (clip-higher), as the paper sets it
    "beta1": 1.0,                    # the paper's main results use the plain form (β1 = β2 = 1)
    "beta2": 1.0,
    "dual_clip": None,               # the paper has no dual clip (only the authors' release adds c = 10)
    "advantage": "grpo",             # reward minus the group mean, over the group std (+1e-6)
    "prompts_per_step": 128,         # 128 prompts in each rollout batch
    "oversample": 2.0,               # generation batch of 256 prompts: zero-variance groups dropped, the first
    #                                  128 left are trained, no refill
    "rollouts_per_prompt": 8,        # 8 sampled responses per prompt
    "mini_batches": 8,               # math mini-batches of 16 prompts: 128/16 = 8 optimizer steps per batch
    "fixed_mini_batch": True,        # mini-batches of about 16 prompts whatever the filter left: a step with
    #                                  fewer groups takes fewer optimizer steps (⌈groups / 16⌉, evenly split)
    "micro_batch_tokens": 36864,     # not in the paper: one full-length rollout (4K prompt + 32K response)
    #                                  per packed pass; shorter ones share it (the plan of 8 × 80 GiB GPUs, fsdp,
    #                                  checkpointing, fits this budget, not twice it)
    "gradient_checkpointing": True,  # without it one 36K-token rollout's activations alone pass 80 GiB
    "lr": 1e-6,                      # math-stage learning rate, held constant after warm-up
    "warmup_steps": 10,              # 10 warm-up steps
    "weight_decay": 0.1,             # AdamW weight decay 0.1
    "grad_clip": 1.0,                # gradient norm clipped at 1.0
    "sft_alpha": 0.1,                # NLL on correct rollouts at weight 0.1, the best of the paper's ablation
    "filter_zero_variance": True,    # groups whose rewards are all equal are dropped (steadier in the ablation)
    "overlong_filter": False,        # optional in the paper, not part of its main runs
    "temperature": 1.0,              # rollouts sample the policy unchanged
    "top_p": 1.0,                    # ... without a nucleus cut
    "max_tokens": 32768,             # responses up to 32K tokens
    "backend": "vllm",               # a 32K-token rollout batch of 1,024 responses needs a serving engine
    "strategy": "fsdp",              # ddp replicas would each hold 16 bytes × 8.2B parameters = 122 GiB of state
    "domains": ("math",),            # the first stage trains on math problems only
    "selection": {"math_min": 9 / 16,  # math: a majority of 16 samples pass, so 9 of 16 (8 is a tie)
                  "code_min": 0.5},    # code: pass rate ≥ 0.5 over 16 samples
}

PAPER_CODE: dict = {
    **PAPER_MATH,
    "mini_batches": 4,               # code mini-batches of 32 prompts: 128/32 = 4 optimizer steps per batch
    "lr": 5e-7,                      # the code stage's lower learning rate
    "domains": ("code",),            # the second stage trains on code problems only
}

PAPER_HARDWARE = Hardware(
    gpu_memory_gib=80.0,             # the paper names no GPUs; an 8 × 80 GB (A100/H100) node is the usual one
    nproc=8,                         # one such node, one rank per GPU
    strategy="fsdp",                 # the config's strategy (what dry_run plans), for plan_rl used directly
    gradient_checkpointing=True,     # without it one 36K-token rollout's activations alone pass 80 GiB
    engine=True,                     # the vLLM engine (backend "vllm") shares each GPU with its trainer rank
    engine_sleeps=True,              # trainer (~71 GiB) + awake engine (40 GiB) pass 80 GiB: the engine must
    #                                  free its memory during the update
    tp=1,                            # 8B bf16 weights (15 GiB) fit one GPU; one engine per rank
    gpu_memory_utilization=0.5,      # the engine's share while it generates (VLLMGenerator's default)
)


@dataclass(frozen=True)
class RLPreset:
    description: str
    model: str                       # a plan.SHAPES name: the model shape the settings were made for
    config: dict = field(default_factory=dict)   # RLConfig overrides
    hardware: Hardware = field(default_factory=Hardware)   # the run shape: GPUs, strategy, engine

    def rl_config(self, **overrides):
        """RLConfig of this preset, `overrides` applied on top (checked by RLConfig itself)."""
        from tasks.training.config import RLConfig

        return RLConfig(**{**self.config, **overrides})


RL_PRESETS: dict[str, RLPreset] = {
    "paper": RLPreset("the paper's math RL stage (Qwen3-8B, 8 × 80 GiB, fsdp, vLLM)", "qwen3-8b",
                      PAPER_MATH, PAPER_HARDWARE),
    "paper-math": RLPreset("the paper's math RL stage (same as 'paper')", "qwen3-8b", PAPER_MATH, PAPER_HARDWARE),
    "paper-code": RLPreset("the paper's code RL stage, after the math stage", "qwen3-8b", PAPER_CODE,
                           PAPER_HARDWARE),
}
