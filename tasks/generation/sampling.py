"""The sampling settings shared by every stage that samples from a model (evaluation, difficulty tags,
RL rollouts): one type, one set of checks, one conversion to the engines' SamplingParams.

    temperature  0 = greedy; the paper samples at 0.6 for evaluation and 1.0 for RL rollouts
    top_p        nucleus mass in (0, 1]; the paper's evaluation uses 0.95, RL 1.0
    max_tokens   response budget in tokens (the paper: 32K; the demo's responses are < 150 tokens)
    seed         seeds the engine, so the same model, prompts and seed give the same samples

Stage configs inherit these fields (flat, so `klear eval --temperature` and a deployment's
`config={"temperature": ...}` name the same thing) and change a default only with its reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.generation.base import SamplingParams


@dataclass
class Sampling:
    temperature: float = 0.6   # the paper's evaluation temperature
    top_p: float = 0.95        # the paper's evaluation top-p
    max_tokens: int = 256      # response budget in tokens (demo responses are < 150)
    seed: int = 0              # seeds sampling (and, in training, data order and initialisation)

    def check_sampling(self) -> None:
        from tasks.config_checks import check_float, check_int

        check_float(self, "temperature", 0.0, 100.0)
        check_float(self, "top_p", 0.0, 1.0, above=True)
        check_int(self, "max_tokens", 1, high=1 << 20)
        check_int(self, "seed", 0, high=(1 << 63) - 1)

    def sampling_params(self, n: int) -> SamplingParams:
        """`n` samples per prompt under these settings."""
        return SamplingParams(n=n, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                              seed=self.seed)
