"""The end-to-end pipeline's typed config (doubles as the `pipeline` flow's parameters → a UI form).

Defaults are the demo: bundled data, tiny model, CPU, a budget of minutes on 2 cores. For real runs set
`demo=False`, give `sources`/`benchmarks`, a `base_model` directory and GPU-sized SFT/RL settings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tasks.training.rl import RLConfig
from tasks.training.sft import SFTConfig


def _demo_sft() -> SFTConfig:
    # measured on the demo task (held-out bench_math avg@4, temperature 0.6): the arithmetic is learned late,
    # 7% after 1.7 epochs, 11% after 3.4, 20% after 5.2, 34% after 6.9, 53% after 8 (1858 steps of 8×256
    # packed tokens, ~0.12 s each on 2 idle cores); fewer epochs leave RL nothing to sharpen
    return SFTConfig(epochs=8, batch_size=8, micro_batch_size=8, seq_len=256, lr=3e-3, save_every=500)


def _demo_rl() -> RLConfig:
    # math only: code rewards for a tiny random-init model are all 0 (zero-variance groups, dropped anyway)
    return RLConfig(steps=20, prompts_per_step=16, rollouts_per_prompt=8, mini_batches=2, lr=1e-4,
                    max_tokens=160, save_every=10, domains=("math",))


@dataclass
class PipelineConfig:
    store: str | None = None                      # default $KLEAR_STORE or ./klear-store
    demo: bool = True                             # generate the bundled demo sources + benchmarks
    demo_scale: float = 1.0                       # size of the bundled data (tests use a small fraction)
    sources: dict[str, str] = field(default_factory=dict)      # NAME → PATH (demo=False)
    benchmarks: dict[str, str] = field(default_factory=dict)   # NAME → PATH, decontamination + evaluation
    eval_benchmark: str = "bench_math"            # which benchmark the base/SFT/RL table reports
    min_tests: int = 16                           # verify: code problems with fewer tests are dropped
    base_model: str | None = None                 # an HF model dir; None: `klear model init` tiny preset
    model_preset: str = "tiny"
    seed: int = 0
    sft: SFTConfig = field(default_factory=_demo_sft)
    sft_nproc: int = 1                            # >1: SFT as a torchrun subprocess over that many GPUs/ranks
    #   (sft.strategy "ddp" or "fsdp"); not part of the SFT stage's content key
    difficulty_k: int = 2                         # samples per problem for difficulty tags (0: skip)
    rl: RLConfig = field(default_factory=_demo_rl)
    eval_k: int = 4
    eval_max_tokens: int = 160
