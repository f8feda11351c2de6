"""The sampling settings shared by every stage that samples from a model (evaluation, difficulty tags,
RL rollouts): one type, one set of checks, one conversion to the engines' SamplingParams.

    temperature  0 = greedy; the paper samples at 0.6 for evaluation and 1.0 for RL rollouts
    top_p        nucleus mass in (0, 1]; the paper's evaluation uses 0.95, RL 1.0
    top_k        only the k most likely tokens, before top_p (0: all); the paper's code evaluation uses 20,
                 its math evaluation and RL none
    max_tokens   response budget in tokens (the paper: 32K; the demo's responses are < 150 tokens)
    seed         seeds sampling, so the same model, problems and seed give the same samples

Per-problem seeds (evaluation and difficulty tags): problem p is sampled with its own seed

    problem_seed(seed, p.id) = int(sha256(f"{seed}:{p.id}")[:8], big-endian) >> 2     (62 bits)

passed to the engine per prompt (`generate(..., seeds=...)`, tasks/generation/base.py). The samples of a
problem are then a function of the model, the problem, the sampling settings and `seed` alone: not of
its position in the file, of the other problems batched with it, or of how the problems are split over
processes (`--nproc`), which is what makes N processes give exactly the numbers of one. A problem that
appears twice (the same id) gets the same samples both times. 62 bits: torch.Generator.manual_seed and
vLLM's per-request seed take it, and vLLM's k-th sample (seed + k) stays inside 64 bits.

Stage configs inherit these fields (flat, so `klear eval --temperature` and a deployment's
`config={"temperature": ...}` name the same thing) and change a default only with its reason.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

from tasks.generation.base import SamplingParams


def problem_seed(seed: int, key: str) -> int:
    """The sampling seed of one problem (`key`: its id) under the stage's `seed` (module rule)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 2


def problem_seeds(seed: int, rows: Iterable[dict]) -> list[int]:
    """`problem_seed` of each canonical row, by its `id`."""
    return [problem_seed(seed, r["id"]) for r in rows]


@dataclass
class Sampling:
    temperature: float = 0.6   # the paper's evaluation temperature
    top_p: float = 0.95        # the paper's evaluation top-p
    max_tokens: int = 256      # response budget in tokens (demo responses are < 150)
    seed: int = 0              # seeds sampling (and, in training, data order and initialisation)
    top_k: int = 0             # only the k most likely tokens (0: all); the paper's code evaluation: 20

    def check_sampling(self) -> None:
        from tasks.config_checks import check_float, check_int, check_seed

        check_float(self, "temperature", 0.0, 100.0)
        check_float(self, "top_p", 0.0, 1.0, above=True)
        check_int(self, "max_tokens", 1, high=1 << 20)
        check_seed(self)
        check_int(self, "top_k", 0, high=1 << 24)

    def sampling_params(self, n: int) -> SamplingParams:
        """`n` samples per prompt under these settings."""
        return SamplingParams(n=n, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                              seed=self.seed, top_k=self.top_k)
