"""SFT's summed next-token NLL over packed batches, on label positions only, taken from the hidden states:

    NLL = Σ_{b, t : labels[b, t+1] ≠ ignore, doc[b, t+1] = doc[b, t]} − log softmax(h[b, t] · Wᵀ)[labels[b, t+1]]

Only the positions whose next token is a label of their own example (a response token; not prompts, not
padding, not the last position of a row or of an example) are gathered from the last hidden states, and
their log-probs go through the output embedding W in chunks (a kernel of tasks/training/nll_kernels.py:
torch's chunks, or Liger's fused linear cross-entropy on a GPU): no [B, T, V] logits exist, forward or
backward. As every example starts with its prompt (no label on its first token), the value and gradient are
those of `cross_entropy(logits[:, :-1], labels[:, 1:], reduction="sum")` over the model's full logits,
within float rounding (tests/training/test_sft_loss.py).
"""
from __future__ import annotations

import torch

from tasks.training.packed_attention import attention_inputs
from tasks.training.scoring import ScoringBatch, score_inputs, scoring
from tasks.training.sft_data import next_token_labels


def label_batch(t: dict, attention: str, ignore_index: int = -100) -> ScoringBatch:
    """A collated SFT batch (sft_data.collate, on its device) as a ScoringBatch: position t of row b is scored
    when labels[b, t+1] ≠ ignore_index and token t+1 is of t's document (sft_data.next_token_labels), against
    that label (module formula)."""
    following = next_token_labels(t["labels"], t["document_ids"], ignore_index).reshape(-1)
    index = (following != ignore_index).nonzero()[:, 0]
    inputs = {"input_ids": t["input_ids"], "position_ids": t["position_ids"], **attention_inputs(t, attention)}
    return ScoringBatch(inputs, index, following.index_select(0, index), [int(index.numel())])


def summed_nll(policy, model, t: dict, attention: str, bf16: bool = False, ignore_index: int = -100,
               kernel: str = "chunked") -> torch.Tensor:
    """The summed NLL (fp32 scalar) of a collated batch `t` under `model`, run through `policy` (the model or
    its DDP/FSDP wrapper) with the resolved `attention` and output-layer `kernel` (nll_kernels.NLL_KERNELS);
    the forward under bf16 autocast when `bf16`. A batch with every label ignored gives 0 and still runs a
    backward to every weight (a filler pack under DDP/FSDP)."""
    batch = label_batch(t, attention, ignore_index)
    with scoring(model, attention):
        with torch.autocast(t["input_ids"].device.type, dtype=torch.bfloat16, enabled=bf16):
            logp_sum, _ = policy(**score_inputs(batch, 1.0, entropy=False, summed_with=kernel))
    return -logp_sum
