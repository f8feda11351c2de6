"""One generation interface for every backend (transformers, vLLM):

    backend.generate(prompts, SamplingParams(n, temperature, top_p, max_tokens, seed))
        -> list (one per prompt) of list (n) of Completion(text, token_ids, logprobs, finish_reason)

`prompts` are fully formatted prompt strings (see `chat_prompt`). `logprobs[i]` is log π(token_i) under the
model's raw distribution (temperature 1, no top-p), which is what RL needs as the behaviour log-prob.
`token_ids` end with the eos token when finish_reason is "stop" (the text does not show it).
temperature 0 means greedy decoding.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    temperature: float = 0.6   # paper's evaluation default
    top_p: float = 0.95        # paper's evaluation default
    max_tokens: int = 256      # demo responses are < 150 tokens; the paper uses 32K
    seed: int = 0


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" (eos) or "length" (hit max_tokens)


class Generator(Protocol):
    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Completion]]: ...


def chat_prompt(tokenizer, problem: str) -> str:
    """The prompt for a problem: the model's chat template with one user turn and a generation prompt."""
    return tokenizer.apply_chat_template([{"role": "user", "content": problem}], tokenize=False,
                                         add_generation_prompt=True)
