"""Typed configs of evaluation and difficulty tagging. Light (no torch): the CLI reads its defaults from
them, and they double as the flows' parameters, so a deployment run is checked exactly as the CLI is."""
from __future__ import annotations

from dataclasses import dataclass

from tasks.config_checks import STRICT_KEYS
from tasks.generation.sampling import Sampling

BACKENDS = ("auto", "hf", "vllm")  # auto: vLLM when installed and a GPU is present, else transformers
MAX_K = 4096                       # samples per problem; past this a run is a typo, not a plan


@dataclass
class EvalConfig(Sampling):
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    k: int = 8                     # samples per problem (avg@k, pass@k)
    backend: str = "auto"          # engine: auto (vllm when installed and on a GPU, else hf), hf (transformers)
    #                                or vllm

    def __post_init__(self) -> None:
        """Ranges and names, checked once for the CLI and deployments alike."""
        from tasks.config_checks import check_choice, check_int

        self.check_sampling()
        check_int(self, "k", 1, high=MAX_K)
        check_choice(self, "backend", BACKENDS)


@dataclass
class DifficultyConfig(Sampling):
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    k: int = 8                     # samples per problem (paper: 16)
    hard_below: float = 0.25       # pass rate in (0, hard_below) is "hard"
    easy_from: float = 0.75        # pass rate ≥ easy_from is "easy"; in between "medium"
    backend: str = "auto"          # engine: auto (vllm when installed and on a GPU, else hf), hf or vllm

    def __post_init__(self) -> None:
        """Ranges and names, checked once for the CLI and deployments alike."""
        from tasks.config_checks import check_choice, check_float, check_int

        self.check_sampling()
        check_int(self, "k", 1, high=MAX_K)
        check_float(self, "hard_below", 0.0, 1.0, above=True)
        check_float(self, "easy_from", self.hard_below, 1.0)
        check_choice(self, "backend", BACKENDS)
