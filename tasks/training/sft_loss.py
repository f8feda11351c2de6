"""SFT's summed next-token NLL over packed batches, taken from the model's logits in fp32 without keeping an
fp32 copy of the whole [B, T, V] logits for backward.

    NLL = Σ_{b, t : labels[b, t+1] ≠ ignore} − log softmax(logits[b, t])[labels[b, t+1]]

What `cross_entropy(logits[:, :-1].float(), labels[:, 1:], reduction="sum")` computes, and with the same
per-token terms and the same gradient (−(onehot − softmax) per position, zero where the label is ignored), so
training follows the same weights. That form holds the fp32 copy, its log-softmax and then its gradient at
once: 3 × 4·B·T·V bytes (30 GB for a micro-batch of 4 × 4,096 tokens at Qwen's 151,936-token vocabulary).
Here the positions go in blocks of NLL_BLOCK under activation checkpointing: the model's own logits (bf16
under autocast) are kept, and one block's fp32 log-softmax and gradient exist at a time (≈ 14·NLL_BLOCK·V
bytes in backward, as the RL update's log-prob blocks)."""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

NLL_BLOCK = 4096  # positions whose fp32 log-softmax exists at once: 14·4096·V bytes ≈ 8.7 GB at V = 152K


def summed_nll(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """The summed next-token NLL of `labels` ([B, T]) under `logits` ([B, T, V]), an fp32 scalar (formula in the
    module docstring). Position t predicts label t+1; the last position of each row predicts nothing."""
    b, t, v = logits.shape
    following = torch.cat([labels[:, 1:], labels.new_full((b, 1), ignore_index)], dim=1).reshape(-1)
    flat = logits.reshape(b * t, v)  # a view of the model's contiguous logits, no copy
    parts = []
    for s in range(0, b * t, NLL_BLOCK):
        block, ys = flat[s:s + NLL_BLOCK], following[s:s + NLL_BLOCK]
        if block.requires_grad:
            parts.append(checkpoint(_token_nll, block, ys, ignore_index, use_reentrant=False))
        else:
            parts.append(_token_nll(block, ys, ignore_index))
    return torch.cat(parts).sum()


def _token_nll(block: torch.Tensor, ys: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(block.float(), ys, ignore_index=ignore_index, reduction="none")
