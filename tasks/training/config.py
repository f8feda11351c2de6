"""Typed configs of SFT and RL training. Light (no torch at import): the CLI reads its defaults from
them, and they double as the flows' parameters, so a deployment run is checked exactly as the CLI is:
a bad value fails when the config is made, before any model loads."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from tasks.config_checks import (STRICT_KEYS, ConfigError, check_choice, check_existing_file, check_float, check_int,
                                 check_seed, check_subset)
from tasks.evaluation.config import MAX_K
from tasks.generation.sampling import Sampling
from tasks.grading.registry import GRADERS
from tasks.grading.rewards import RewardConfig
from tasks.training.sft_responses import RESPONSE_RULES

STRATEGIES = ("ddp", "fsdp")        # several processes: replicas, or parameters/grads/optimizer sharded (FSDP2)
ATTENTIONS = ("auto", "flex", "varlen", "dense")  # packed SFT attention kernels (tasks/training/packed_attention.py)
ROLLOUT_BACKENDS = ("auto", "hf", "vllm")  # auto: vllm when installed and a GPU is present, else hf (the policy
#                                            itself); vllm: an engine per rank, weights synced in place
OLD_LOGPROBS = ("auto", "rollout", "recompute")
LOGPROB_KERNELS = ("auto", "chunked", "liger")  # SFT's loss over the output layer (tasks/training/nll_kernels.py)


@dataclass
class SFTConfig:
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    epochs: int = 3                       # passes over the data (paper: 4)
    max_steps: int | None = None          # stop early after this many optimizer steps
    lr: float | None = None               # peak; None: 8e-5·4096/hidden_size capped at 3e-3 (paper's 8e-5 at 8B width)
    min_lr_ratio: float = 0.5             # cosine decay ends at this share of lr (paper: 8e-5 → 4e-5)
    warmup_ratio: float = 0.03            # share of the steps spent warming up linearly
    weight_decay: float = 0.0             # AdamW
    batch_size: int | None = None         # packed sequences per optimizer step (global, all ranks); None:
    #   auto, sized to the data: 16, or fewer so that a run makes ~1,000 steps (sft.py auto_batch_size)
    micro_batch_size: int | None = None   # packed sequences per forward/backward (None: min(8, batch_size)),
    #   run as one row without their padding (flex, varlen) or as padded rows (dense); accumulation = batch/micro
    seq_len: int = 512                    # packed sequence length in tokens (demo examples are < 200)
    grad_clip: float = 1.0                # max gradient norm
    seed: int = 0                         # data order and initialisation
    save_every: int = 50                  # checkpoint every N optimizer steps
    keep_checkpoints: int = 2             # older checkpoints are deleted
    gradient_checkpointing: bool = False  # trade compute for memory on long contexts
    compile: bool = False                 # torch.compile each decoder block (tasks/training/compile.py): fuses
    #   the elementwise work between matmuls on a GPU; the first steps pay the compilation
    bf16: bool | None = None              # None: on when the GPU supports it; CPU trains in fp32
    strategy: str = "ddp"                 # several processes: "ddp" (replicas) or "fsdp" (sharded, FSDP2)
    shard_group_size: int | None = None   # fsdp: shard each parameter over groups of this many ranks and
    #   replicate across the groups (HSDP, a 2-D mesh; e.g. the GPUs of one node, so only 1/g of the gradient
    #   bytes cross nodes); must divide the world size; None: shard over every rank
    attention: str = "auto"               # packed attention, never an L×L mask: flex (FlexAttention, document
    #   BlockMask; CUDA only: no backward on CPU), varlen (causal SDPA per document; CPU/GPU), dense (the
    #   [B,1,L,L] mask: the reference, 1 GiB a sequence at 32K); auto: flex on a GPU, varlen on CPU
    responses: str = "all"                # teacher responses trained on: all, correct (graded correct), or
    #   by_difficulty (the paper's finding: every response on hard/unsolved problems, correct ones on easy/
    #   medium; needs difficulty tags); off by default (tasks/training/sft_responses.py)
    logprob_kernel: str = "auto"          # the loss over the output layer, never the tokens × V logits whole:
    #   liger (Liger Kernel's fused linear cross-entropy: one Triton pass over each chunk's logits, gradients in
    #   the forward; CUDA, the `gpu` extra), chunked (torch, any device); auto: liger on a GPU where liger-kernel
    #   is installed and passes its probe, else chunked (tasks/training/nll_kernels.py)

    def __post_init__(self) -> None:
        """Ranges, checked once for the CLI and deployments alike (a bad value fails before any work):
        `--lr 0` or `inf` would train at the default lr or into NaN weights, `--epochs 0` write an
        untrained checkpoint, `--seq-len 1` train nothing."""
        check_int(self, "epochs", 1)
        check_int(self, "max_steps", 1, optional=True)
        check_float(self, "lr", 0.0, above=True, optional=True)
        check_float(self, "min_lr_ratio", 0.0, 1.0)
        check_float(self, "warmup_ratio", 0.0, 0.99)
        check_float(self, "weight_decay", 0.0)
        check_int(self, "batch_size", 1, optional=True)
        if self.micro_batch_size is None:  # an auto batch lowers it at train time if the batch is smaller
            self.micro_batch_size = min(8, self.batch_size or 8)
        check_int(self, "micro_batch_size", 1)
        if self.batch_size is not None and self.micro_batch_size > self.batch_size:
            raise ConfigError("micro_batch_size", f"must not exceed --batch-size {self.batch_size} "
                                                  f"(got {self.micro_batch_size})")
        check_int(self, "seq_len", 8)
        check_float(self, "grad_clip", 0.0, above=True)
        check_seed(self)
        check_int(self, "save_every", 1)
        check_int(self, "keep_checkpoints", 1)
        check_choice(self, "strategy", STRATEGIES)
        check_choice(self, "attention", ATTENTIONS)
        check_choice(self, "responses", RESPONSE_RULES)
        check_choice(self, "logprob_kernel", LOGPROB_KERNELS)
        check_shard_group(self)


def check_shard_group(cfg) -> None:
    """`shard_group_size` (HSDP) is a positive rank count and shapes FSDP's mesh only: refused with ddp,
    which has no shards. (That it divides the world size is checked at launch: distributed.device_mesh.)"""
    check_int(cfg, "shard_group_size", 1, optional=True)
    if cfg.shard_group_size is not None and cfg.strategy != "fsdp":
        raise ConfigError("shard_group_size", f"needs --strategy fsdp (got {cfg.shard_group_size} with "
                                              f"strategy {cfg.strategy})")


UNTAGGED_RULES = ("keep", "exclude")  # RL problems without a pass rate: trained on, or left out


@dataclass
class SelectionConfig:
    """Which problems RL trains on, by their difficulty tag (pass_rate = correct / graded samples of the
    tagging model, `klear tag-difficulty`): a problem of a domain is kept when min ≤ pass_rate ≤ max (None:
    no bound). The paper keeps code problems whose pass rate over 16 samples is ≥ 0.5, and math problems a
    majority of whose 16 samples pass, i.e. math_min 9/16 (the paper presets set it). The defaults start both
    windows at 0.5, a tie kept, which reads the same at any tagging k (the demo tags with 4 samples, where a
    majority would take 3). Every problem is counted as kept or excluded with its reason (rl_data.Selection)."""
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    math_min: float | None = 0.5          # at least half the samples pass (paper: a majority, 9/16 at k = 16)
    math_max: float | None = None         # None: no upper bound (all-correct groups are dropped anyway)
    code_min: float | None = 0.5          # paper: pass rate ≥ 0.5 over 16 samples
    code_max: float | None = None         # None: no upper bound
    untagged: str = "keep"                # problems with no pass rate (untagged data, or every sample an
    #                                       infra failure): keep (train on them) or exclude

    def __post_init__(self) -> None:
        for domain in ("math", "code"):
            check_float(self, f"{domain}_min", 0.0, 1.0, optional=True)
            check_float(self, f"{domain}_max", getattr(self, f"{domain}_min") or 0.0, 1.0, optional=True)
        check_choice(self, "untagged", UNTAGGED_RULES)

    def window(self, domain: str) -> tuple[float | None, float | None]:
        return getattr(self, f"{domain}_min", None), getattr(self, f"{domain}_max", None)


@dataclass
class RLConfig(Sampling):
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    # fields that change how a run is watched, never what it computes: content-addressed run keys leave them
    # out, so a run stopped by its step limit resumes in the same directory under a longer one
    UNKEYED: ClassVar[tuple[str, ...]] = ("step_timeout_s",)

    loss: str = "gppo"                    # policy loss: gppo (the paper's), grpo (clip-higher), cispo
    eps_low: float = 0.2                  # lower clip: ratio 1 − ε_l (paper: 0.2)
    eps_high: float = 0.28                # upper clip: ratio 1 + ε_h (paper: 0.28, clip-higher)
    beta1: float = 1.0                    # GPPO general form (App. A.2); 1 = the paper's Eq. 11
    beta2: float = 1.0                    # GPPO general form, the other side of the clip; 1 = Eq. 11
    dual_clip: float | None = None        # off, as the paper (the release uses 10)
    advantage: str = "grpo"               # group-normalised (grpo), or "drgrpo" without the std division
    steps: int = 40                       # rollout batches (each gives up to `mini_batches` optimizer steps)
    prompts_per_step: int = 16            # prompts trained on per step, at most (paper: 128)
    oversample: float = 1.0               # a step draws and generates ⌈oversample · prompts_per_step⌉ prompts;
    #                                       the zero-variance filter drops groups and the first prompts_per_step
    #                                       groups left are trained, the rest unused, no refill (paper: 2, 256
    #                                       generated for 128); 1: every generated group is trained
    rollouts_per_prompt: int = 8          # paper: 8
    mini_batches: int = 2                 # optimizer steps per rollout batch (paper: 8 math / 4 code); more of
    #                                       them move π further from π_old per batch: with GPPO lower the lr
    #                                       (8 at lr 3e-4 collapsed, 8 at 1e-4 did not: docs/ablation.md)
    fixed_mini_batch: bool = False        # mini-batches of prompts_per_step / mini_batches prompts (the paper's
    #                                       16 of 128, math): a step whose filter left g groups takes
    #                                       ⌈g · mini_batches / prompts_per_step⌉ optimizer steps; off: always
    #                                       mini_batches steps, smaller ones when groups were dropped
    micro_batch_tokens: int = 16384       # tokens (prompt + response) per forward/backward per rank: each
    #                                       micro-batch is packed into one row without padding; a longer
    #                                       rollout runs alone. 16K: a 0.5B model's activations fit an 80 GB
    #                                       GPU without checkpointing (tasks/training/plan.py counts them)
    micro_batch_size: int | None = None   # at most this many rollouts per micro-batch (None: the token budget
    #                                       alone decides)
    packing: bool = True                  # pack each micro-batch into one row (document-masked attention);
    #                                       off: one right-padded row per rollout, the reference layout
    attention: str = "auto"               # packed attention: flex (FlexAttention, CUDA), varlen (causal SDPA
    #                                       per rollout), dense (an L×L mask: reference); auto: flex on a GPU
    gradient_checkpointing: bool | None = None  # recompute each block's activations in backward; None: on
    #                                       with a GPU (long responses), off on CPU (short ones, speed)
    compile: bool = False                 # torch.compile each decoder block (tasks/training/compile.py) for the
    #                                       update's forwards and backwards; generation runs uncompiled
    lr: float | None = None               # None: 1e-6·4096/hidden (paper's 1e-6 at 8B width), capped 1e-4
    warmup_steps: int = 2                 # paper: 10 (over far longer runs)
    weight_decay: float = 0.1             # AdamW
    grad_clip: float = 1.0                # max gradient norm
    sft_alpha: float = 0.1                # weight α of the NLL term on correct rollouts (paper ablation: 0.1 best)
    filter_zero_variance: bool = True     # drop groups whose rollouts all got the same reward (no signal)
    overlong_filter: bool = False         # leave truncated rollouts out of the loss
    temperature: float = 1.0              # rollouts sample the raw policy (the paper's RL setting)
    top_p: float = 1.0                    # the paper's RL setting
    save_every: int = 20                  # checkpoint every N rollout batches
    keep_checkpoints: int = 2             # older checkpoints are deleted
    reward: RewardConfig = field(default_factory=RewardConfig)  # rewards of correct and wrong answers, format
    #                                       penalties (no <think> / </think>), code: soft (pass fraction) or hard
    eval_benchmark: str | None = None     # held-out canonical file evaluated every `eval_every` steps
    eval_every: int = 0                   # 0: no evaluation during training
    eval_k: int = 4                       # samples per held-out problem
    backend: str = "auto"                 # rollout engine: auto (vllm when installed and on a GPU, else hf),
    #                                       hf (the policy itself) or vllm (an engine per rank, synced in place)
    strategy: str = "ddp"                 # with several processes (--nproc): ddp (replicas) or fsdp (sharded)
    shard_group_size: int | None = None   # fsdp: shard over groups of this many ranks, replicated across the
    #                                       groups (HSDP, a 2-D mesh: one node's GPUs per group); must divide
    #                                       the world size; None: shard over every rank
    tensor_parallel: int = 1              # vllm backend: GPUs per engine; the ranks form groups of this many
    #                                       consecutive ranks, each group one engine over its GPUs (for models
    #                                       whose weights + KV cache do not fit one GPU); must divide --nproc
    step_timeout_s: float = 0.0           # several processes: a rank whose step, held-out evaluation or
    #                                       checkpoint runs longer ends the run with its stacks (a hung rank
    #                                       holds every GPU until a process-group timeout, if any); 0: no limit
    old_logprobs: str = "auto"            # π_old after the 1st mini-batch: "rollout" | "recompute" | "auto"
    bf16: bool | None = None              # update forward/backward under bf16 autocast (fp32 weights and
    #                                       optimizer); None: on when the GPU supports it, CPU stays fp32
    domains: tuple[str, ...] = ("math", "code")  # problem domains to train on (comma-separated)
    selection: SelectionConfig = field(default_factory=SelectionConfig)  # pass-rate windows per domain

    @property
    def generated_prompts(self) -> int:
        """Prompts a step draws and generates: ⌈oversample · prompts_per_step⌉ (prompts_per_step at 1)."""
        return math.ceil(self.prompts_per_step * self.oversample - 1e-9)

    @property
    def generated_prompts_flags(self) -> str:
        """The flags that set `generated_prompts` and their value, for messages about it."""
        if self.oversample == 1.0:
            return f"--prompts-per-step {self.prompts_per_step}"
        return (f"--prompts-per-step {self.prompts_per_step} × --oversample {self.oversample:g} "
                f"({self.generated_prompts} prompts)")

    def __post_init__(self) -> None:
        """Ranges and registry names, checked once for the CLI and deployments alike. A group needs at
        least 2 rollouts (one rollout has zero reward variance: no advantage, nothing learned); the
        rollouts of a step must fill every mini-batch."""
        from tasks.training.advantages import ADVANTAGES  # these import torch; the CLI builds configs without it
        from tasks.training.losses import POLICY_LOSSES

        self.check_sampling()
        check_choice(self, "loss", POLICY_LOSSES)
        check_choice(self, "advantage", ADVANTAGES)
        check_float(self, "eps_low", 0.0, 1.0)
        check_float(self, "eps_high", 0.0)
        check_float(self, "beta1", 0.0)
        check_float(self, "beta2", 0.0)
        check_float(self, "dual_clip", 1.0, above=True, optional=True)
        check_int(self, "steps", 1)
        check_int(self, "prompts_per_step", 1)
        check_float(self, "oversample", 1.0, 100.0)
        if self.oversample > 1.0 and not self.filter_zero_variance:
            raise ConfigError("oversample", f"{self.oversample:g} needs the zero-variance filter: the extra groups "
                                            "only replace the ones it drops; set --oversample 1 or keep the filter")
        check_int(self, "rollouts_per_prompt", 2, high=MAX_K)
        check_int(self, "mini_batches", 1)
        rollouts = self.prompts_per_step * self.rollouts_per_prompt
        if self.mini_batches > rollouts:
            raise ConfigError("mini_batches", f"must not exceed the {rollouts} rollouts of a step "
                                              f"(got {self.mini_batches})")
        check_int(self, "micro_batch_tokens", 1)
        check_int(self, "micro_batch_size", 1, optional=True)
        check_choice(self, "attention", ATTENTIONS)
        check_float(self, "lr", 0.0, above=True, optional=True)
        check_int(self, "warmup_steps", 0)
        check_float(self, "weight_decay", 0.0)
        check_float(self, "grad_clip", 0.0, above=True)
        check_float(self, "sft_alpha", 0.0)
        check_int(self, "save_every", 1)
        check_int(self, "keep_checkpoints", 1)
        check_existing_file(self, "eval_benchmark", optional=True)
        check_int(self, "eval_every", 0)
        check_int(self, "eval_k", 1, high=MAX_K)
        check_choice(self, "backend", ROLLOUT_BACKENDS)
        check_choice(self, "strategy", STRATEGIES)
        check_choice(self, "old_logprobs", OLD_LOGPROBS)
        check_shard_group(self)
        check_int(self, "tensor_parallel", 1)
        check_float(self, "step_timeout_s", 0.0)
        self.check_scored_sampling()
        if self.tensor_parallel > 1 and self.backend == "hf":
            raise ConfigError("tensor_parallel", f"needs the vllm backend (got {self.tensor_parallel} with backend hf)")
        self.domains = tuple(self.domains) if isinstance(self.domains, list) else self.domains
        check_subset(self, "domains", GRADERS)
        if isinstance(self.reward, dict):  # nested configs from JSON (a deployment's, the torchrun launcher's)
            self.reward = RewardConfig(**self.reward)
        if isinstance(self.selection, dict):
            self.selection = SelectionConfig(**self.selection)


    def check_scored_sampling(self) -> None:
        """The update scores tokens under the distribution the engine sampled from, log softmax(z/τ): the
        temperature is applied the same way; top-p < 1 (a renormalised nucleus, which the trainer does not
        apply) and greedy decoding (no distribution) are refused, and so are the engines' log-probs as π_old
        at τ ≠ 1 (they are of the raw distribution, τ = 1)."""
        if self.temperature <= 0:
            raise ConfigError("temperature", f"must be > 0 for RL rollouts: the update scores the sampled "
                                             f"distribution softmax(z/τ) (got {self.temperature})")
        if self.top_p != 1.0:
            raise ConfigError("top_p", f"must be 1.0 for RL rollouts: the update scores softmax(z/τ), not the "
                                       f"top-p nucleus the engine would sample from (got {self.top_p})")
        if self.top_k != 0:
            raise ConfigError("top_k", f"must be 0 for RL rollouts: the update scores softmax(z/τ) over every "
                                       f"token, not the top k the engine would sample from (got {self.top_k})")
        if self.old_logprobs == "rollout" and self.temperature != 1.0:
            raise ConfigError("old_logprobs", f"rollout needs temperature 1.0: the engines' log-probs are of the "
                                              f"raw distribution (τ = 1), not of τ = {self.temperature}; use "
                                              f"recompute or auto")


RL_NESTED = {"reward": RewardConfig, "selection": SelectionConfig}  # RLConfig's nested configs (CLI flags, JSON)
