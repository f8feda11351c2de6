"""Token log-probs as the trainers train on them: packed rows, no padding, no full-vocabulary logits.

A `ScoringBatch` is model inputs plus the flat positions whose next token is scored and those tokens. The
hidden states of those positions alone are gathered and their log-probs (and entropies) are taken through
the output embedding in chunks (linear_logprobs.py) at a temperature, so the [tokens, V] logits never exist
whole. RL scores rollouts (`rollout_batch`: position p−1+j predicts response token j of a sequence whose
prompt has p tokens); SFT scores the label positions of its packs (sft_loss.py).

RL layouts (`rollout_batch`'s `attention`):
- packed (flex, varlen, dense): every sequence (prompt + response) of the micro-batch laid end to end in ONE
  row, each with its own positions (restarting at 0) and attending only to itself — the packed-attention
  rule of SFT (sft_data.py; kernels in packed_attention.py: FlexAttention's document BlockMask on a GPU,
  causal SDPA per document on CPU, the dense mask as reference). No padding token is computed.
- PADDED (the reference): one sequence per row, right-padded to the longest, the model's own attention with
  a padding mask — what the update did before packing.

The forward runs through the caller's module (the model itself, or its DDP/FSDP wrapper: gradients are then
synchronised and FSDP gathers the shards as for any forward) with the model's forward swapped for
`_score_forward` while `scoring` is open, so the output embedding is used inside the module's own forward
(under FSDP2 the root's parameters are whole only there). Every forward passes `use_cache=False`: a
training pass builds no KV cache.
"""
from __future__ import annotations

import contextlib
import functools
import types
from dataclasses import dataclass

import torch

from tasks.training.linear_logprobs import linear_logprobs
from tasks.training.nll_kernels import summed_logprob
from tasks.training.packed_attention import attention_inputs, attn_implementation
from tasks.training.sft_data import IGNORE, Pack, collate

PADDED = "padded"  # the reference layout's name where an attention kernel is named


@dataclass
class ScoringBatch:
    """Model inputs of one micro-batch and which next tokens it scores (module docstring)."""

    inputs: dict                # input_ids, position_ids and the attention arguments of the layout
    score_index: torch.Tensor   # [N] flat positions (row · width + column) whose next token is scored
    targets: torch.Tensor       # [N] the tokens they predict
    lengths: list[int]          # scored tokens per rollout, in order (Σ = N; SFT: [N])


def rollout_batch(rollouts: list, attention: str, device: torch.device) -> ScoringBatch:
    """The inputs of `rollouts` (objects with prompt_ids and response_ids) under a resolved `attention`:
    flex, varlen or dense pack them into one row; PADDED gives one right-padded row each."""
    seqs = [r.prompt_ids + r.response_ids for r in rollouts]
    lengths = [len(r.response_ids) for r in rollouts]
    targets = torch.tensor([t for r in rollouts for t in r.response_ids], device=device)
    if attention == PADDED:
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
        starts = [i * width + len(r.prompt_ids) - 1 for i, r in enumerate(rollouts)]
        inputs = {"input_ids": ids, "attention_mask": mask,
                  "position_ids": (mask.cumsum(-1) - 1).clamp_min(0)}
    else:
        pack = Pack([t for s in seqs for t in s], [IGNORE] * sum(map(len, seqs)),
                    [p for s in seqs for p in range(len(s))], [d for d, s in enumerate(seqs) for _ in s])
        t = {k: v.to(device) for k, v in collate([pack]).items()}
        offsets = [0]
        for s in seqs[:-1]:
            offsets.append(offsets[-1] + len(s))
        starts = [o + len(r.prompt_ids) - 1 for o, r in zip(offsets, rollouts)]
        inputs = {"input_ids": t["input_ids"], "position_ids": t["position_ids"], **attention_inputs(t, attention)}
    index = torch.tensor([s + j for s, n in zip(starts, lengths) for j in range(n)], device=device)
    return ScoringBatch(inputs, index, targets, lengths)


def hidden_state_scoring_problem(model) -> str | None:
    """Why the model's token log-probs cannot be taken from its last hidden states and output embedding, or
    None: the output layer must be a bias-free linear map with nothing after it (no logit soft-capping or
    scaling). Such a model is scored from its own full logits instead (`_score_forward`)."""
    head = model.get_output_embeddings()
    cfg = model.config
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        return f"{type(model).__name__}: its output layer is not a bias-free linear map"
    for name in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        if getattr(cfg, name, None) not in (None, 1, 1.0):
            return f"{type(model).__name__}: its logits are transformed after the output layer ({name})"
    return None


def _score_forward(self, input_ids, position_ids, score_index, targets, temperature, entropy, summed_with=None, *,
                   full_logits: bool = False, **attention):
    """The swapped-in forward: last hidden states → the scored positions → (log-probs, entropies or None),
    through the output embedding in chunks (linear_logprobs.py); with `summed_with` (a resolved NLL_KERNELS
    name, τ = 1) → (Σ log-probs, None) by that kernel (nll_kernels.py). `full_logits`: a model whose logits are
    transformed after its output layer (hidden_state_scoring_problem) runs its own forward instead and is
    scored from those logits — every position's, the memory the chunks save, but its own numbers."""
    if full_logits:
        logits = type(self).forward(self, input_ids=input_ids, position_ids=position_ids, use_cache=False,
                                    **attention).logits
        z = logits.flatten(0, 1).index_select(0, score_index).float() / temperature
        logz = torch.log_softmax(z, dim=-1)
        logp = logz.gather(-1, targets[:, None]).squeeze(-1)
        if summed_with is not None:
            return logp.sum(), None
        return logp, (-(logz.exp() * logz).sum(-1).detach() if entropy else None)
    out = self.base_model(input_ids=input_ids, position_ids=position_ids, use_cache=False, **attention)
    hidden = out.last_hidden_state.flatten(0, 1).index_select(0, score_index)
    weight = self.get_output_embeddings().weight
    if summed_with is not None:
        return summed_logprob(hidden, weight, targets, summed_with), None
    return linear_logprobs(hidden, weight, targets, temperature, entropy=entropy)


@contextlib.contextmanager
def scoring(model, attention: str):
    """While open, a call of `model` — or of the DDP/FSDP module wrapping it — with `score_inputs(batch, τ)`
    returns (log-probs [N] fp32, entropies [N] or None); `attention` (resolved: flex, varlen, dense, or PADDED) is
    the model's attention kernel meanwhile. Both are restored on exit, so generation in between is not
    affected if it happens outside."""
    full = hidden_state_scoring_problem(model) is not None
    cfg = model.config
    saved = cfg._attn_implementation
    model.forward = types.MethodType(functools.partial(_score_forward, full_logits=full), model)
    if attention != PADDED:
        cfg._attn_implementation = attn_implementation(attention) or "sdpa"
    try:
        yield
    finally:
        del model.forward
        cfg._attn_implementation = saved


def score_inputs(batch: ScoringBatch, temperature: float, entropy: bool = True, summed_with: str | None = None) -> dict:
    """The keyword arguments of a call under `scoring` (entropies only when `entropy`; with `summed_with`, a
    kernel of nll_kernels.NLL_KERNELS, the call returns the log-probs' sum at temperature 1)."""
    if summed_with is not None and temperature != 1.0:
        raise ValueError(f"a summed log-likelihood is taken at temperature 1 (got {temperature})")
    return {**batch.inputs, "score_index": batch.score_index, "targets": batch.targets, "temperature": temperature,
            "entropy": entropy, "summed_with": summed_with}


def rollout_logprobs(policy, model, rollouts: list, attention: str, device: torch.device,
                     temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """(log-probs [N], entropies [N], response lengths) of `rollouts` in one forward of `policy` (the module
    to call: `model` or its wrapper) — opening `scoring` for this one call."""
    batch = rollout_batch(rollouts, attention, device)
    with scoring(model, attention):
        logp, ent = policy(**score_inputs(batch, temperature))
    return logp, ent, batch.lengths
