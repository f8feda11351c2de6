"""One generation interface for every backend (transformers, vLLM):

    backend.generate(prompts, SamplingParams(n, temperature, top_p, max_tokens, seed))
        -> list (one per prompt) of list (n) of Completion(text, token_ids, logprobs, finish_reason)

`prompts` are fully formatted prompt strings (see `chat_prompt`). `logprobs[i]` is log π(token_i) under the
model's raw distribution (temperature 1, no top-p), which is what RL needs as the behaviour log-prob.
`token_ids` end with the eos token when finish_reason is "stop" (the text does not show it).
temperature 0 means greedy decoding.

End of sequence (`stop_ids`, both backends): a completion stops at the first token of the stop set =
the model's eos ids (generation_config's `eos_token_id`, an int or a list; config.json's when
generation_config has none) ∪ the tokenizer's eos token. Qwen-family models list several
(<|im_end|> and <|endoftext|>): any of them ends the completion, which then ends with that id, and its
text is everything before it, whichever it was.

Seeding. `generate(prompts, params)` seeds the whole call from `params.seed` (each backend's rule is in
its docstring): the same prompts, in the same order, give the same completions. `generate(prompts, params,
seeds=[s_0, s_1, ...])` (one seed per prompt; `params.seed` is then unused) draws prompt i's n samples
from s_i alone, so a prompt gets the same samples whichever other prompts share the call and in whatever
order — what lets a stage split its problems over processes and get the one-process numbers
(tasks/generation/parallel.py; stages derive s_i from their seed and the problem: sampling.problem_seed).
Float rounding of batched kernels is the one thing batch-dependent left: see each backend.

Lifecycle. `close()` releases what the generator holds (model weights, KV cache, engine processes, GPU
memory); it is idempotent, and a closed generator is not used again. Whoever builds an engine closes it,
in a `finally`; a stage handed a generator by its caller leaves it open.

Prompt-length bound (`fit_prompts`, and `check_prompt_lengths` in every backend): a prompt fits when its
tokens plus `max_tokens` are at most the model's context (`context_length`: max_position_embeddings for
transformers, max_model_len for vLLM), so every completion can run to max_tokens inside the context the
model was built for, and a 1 MB problem never asks the decode loop for a KV cache and mask of 10^12
entries. A backend asked to generate from a prompt that does not fit raises PromptTooLong (ValueError)
before allocating anything. What the stages do with such a prompt is theirs to say: training data
(difficulty tags, RL sampling) leaves the problem out, counted and reported; a benchmark refuses to run
(its avg@k over a subset would not be that benchmark's number): tasks/evaluation/evaluate.py.
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
    top_k: int = 0             # only the k most likely tokens (0: all); the paper's code evaluation: 20


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" (eos) or "length" (hit max_tokens)


class Generator(Protocol):
    tok: object
    context_length: int | None  # tokens of prompt + completion the model takes; None: unknown

    def generate(self, prompts: Sequence[str], params: SamplingParams,
                 seeds: Sequence[int] | None = None) -> list[list[Completion]]: ...

    def close(self) -> None: ...


def accepts(fn, name: str) -> bool:
    """Whether callable `fn` takes keyword `name` (by name or through **kwargs): how stages see whether a
    generator takes `on_batch` or `seeds`."""
    import inspect

    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def check_seeds(seeds: Sequence[int] | None, prompts: Sequence[str]) -> None:
    """Per-prompt seeds, when given, are one per prompt."""
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts: give one seed per prompt")


def stop_ids(model_eos: int | Sequence[int] | None, tokenizer_eos: int | None) -> frozenset[int]:
    """The stop set (module rule "End of sequence") from the model's eos id(s) and the tokenizer's eos id;
    empty when neither names one (every completion then runs to max_tokens)."""
    if model_eos is None:
        ids = set()
    elif isinstance(model_eos, int):
        ids = {model_eos}
    else:
        ids = {int(i) for i in model_eos if i is not None}
    if tokenizer_eos is not None:
        ids.add(int(tokenizer_eos))
    return frozenset(ids)


class PromptTooLong(ValueError):
    """A prompt whose tokens plus max_tokens pass the model's context (see the module rule)."""


@dataclass(frozen=True)
class TooLong:
    index: int          # position in the prompts given
    tokens: int         # the prompt's length in tokens, or a lower bound when not `exact`
    exact: bool = True

    def size(self) -> str:
        return f"{self.tokens:,} tokens" if self.exact else f"more than {self.tokens:,} tokens"


def prompt_budget(context_length: int | None, max_tokens: int) -> int | None:
    """The most prompt tokens that leave room for `max_tokens` in the context; None: no known bound."""
    return None if not context_length else context_length - max_tokens


def check_prompt_lengths(lengths: Sequence[int], context_length: int | None, max_tokens: int) -> None:
    """PromptTooLong for the first prompt (by token count) that does not fit: the backends' guard."""
    budget = prompt_budget(context_length, max_tokens)
    if budget is None:
        return
    for i, n in enumerate(lengths):
        if n > budget:
            raise PromptTooLong(f"prompt {i} is {n:,} tokens; with max_tokens {max_tokens} that passes the "
                                f"model's context of {context_length:,} tokens")


def fit_prompts(tok, context_length: int | None, prompts: Sequence[str],
                max_tokens: int) -> tuple[list[int], list[TooLong]]:
    """Indices of the prompts that fit (module rule) and the ones that do not, with their token counts.
    A prompt whose UTF-8 bytes already fit is not tokenised: no tokenizer makes more tokens than bytes
    plus a few specials (byte-level BPE and byte fallback emit at most one token per byte). A long one is
    tokenised by growing prefixes (4× the budget in characters, doubling) until the count passes the
    budget or the prompt ends, so a 100 MB problem costs about what a budget-sized one does; its count
    is then a lower bound (`exact` False).
    The bytes counted are those of the text as the tokenizer's normaliser leaves it: Unicode
    normalisation can lengthen text (Qwen's NFC turns some single characters into two, NFKC a ligature into
    several), and BPE sees the normalised text."""
    budget = prompt_budget(context_length, max_tokens)
    if budget is None:
        return list(range(len(prompts))), []
    normalize = _normalizer(tok)
    fits, too_long = [], []
    for i, p in enumerate(prompts):
        if (len(p.encode("utf-8", "surrogatepass")) + 8 <= budget
                and len(normalize(p).encode("utf-8", "surrogatepass")) + 8 <= budget):
            fits.append(i)
            continue
        cut = 4 * max(budget, 1) + 64
        while True:
            n = len(tok(p[:cut], add_special_tokens=False)["input_ids"])
            if n > budget + 64 or cut >= len(p):  # (a cut word can tokenise into a few more tokens than whole)
                break
            cut *= 2
        if cut >= len(p) and n <= budget:
            fits.append(i)
        else:
            too_long.append(TooLong(i, n if cut >= len(p) else budget + 64, exact=cut >= len(p)))
    return fits, too_long


def _normalizer(tok):
    """str → str: the fast tokenizer's normaliser (identity when it has none or is not a fast tokenizer)."""
    backend = getattr(tok, "backend_tokenizer", None)
    norm = getattr(backend, "normalizer", None)
    return norm.normalize_str if norm is not None else (lambda text: text)


def describe_too_long(too_long: Sequence[TooLong], context_length: int | None, max_tokens: int,
                      name=lambda i: f"prompt {i}") -> str:
    """One line for a report: how many prompts were left out and why, naming the first few."""
    shown = ", ".join(f"{name(t.index)} ({t.size()})" for t in too_long[:3])
    more = f" and {len(too_long) - 3} more" if len(too_long) > 3 else ""
    return (f"left out {len(too_long)} prompt(s) longer than the model's context {context_length:,} minus "
            f"max_tokens {max_tokens} = {prompt_budget(context_length, max_tokens):,} tokens: {shown}{more}")


def chat_prompt(tokenizer, problem: str) -> str:
    """The prompt for a problem: the model's chat template with one user turn and a generation prompt."""
    return tokenizer.apply_chat_template([{"role": "user", "content": problem}], tokenize=False,
                                         add_generation_prompt=True)
