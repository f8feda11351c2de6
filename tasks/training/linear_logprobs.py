"""Token log-probs taken from the last hidden states in chunks, so the [tokens, vocabulary] logits never exist
whole, forward or backward (the idea of Liger Kernel's fused linear cross-entropy and of cut-cross-entropy,
written as one torch autograd function that runs on CPU and GPU alike).

For the hidden states h (N × d) of the positions that predict `targets` y (N), the output embedding W (V × d)
and the sampling temperature τ:

    z_i = (h_i · Wᵀ) / τ                      (in the compute dtype: bf16 under autocast, else h's; then fp32)
    log π(y_i) = z_i[y_i] − logsumexp(z_i)
    H_i = logsumexp(z_i) − Σ_v softmax(z_i)_v · z_i,v      (entropy of π(·|i): a diagnostic, no gradient)

Backward, for the incoming ∂L/∂log π(y_i) = g_i:

    ∂L/∂z_i = g_i · (onehot(y_i) − softmax(z_i))
    ∂L/∂h_i = (∂L/∂z_i / τ) · W          ∂L/∂W = Σ_i (∂L/∂z_i / τ)ᵀ h_i

Chunks of LOGPROB_CHUNK positions: forward keeps only h, W, y and logsumexp(z) (N floats); backward rebuilds
each chunk's logits from h and W. What one chunk of C positions holds at once: forward, the fp32 logits and
one fp32 work buffer (logsumexp's, then the entropy's softmax) — 8·C·V bytes (the compute-dtype product,
2·C·V with bf16, lives only until its fp32 copy is made); backward the fp32 logits turned in place into ∂L/∂z and its
compute-dtype copy — 6·C·V bytes with bf16. tasks/training/plan.py counts 8·C·V, plus W cast to bf16. Against
the plain form (full logits kept for backward, then their fp32 log-softmax and its gradient) this costs one
more h·Wᵀ matmul per chunk.
"""
from __future__ import annotations

import torch

LOGPROB_CHUNK = 4096  # positions per chunk: 8·4096·V bytes at most ≈ 5.0 GB at Qwen's V = 151,936


def compute_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The dtype the h·Wᵀ matmul runs in: autocast's when it is on for `device` (as the model's lm_head
    would run under it), else `dtype` (the hidden states')."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return dtype


def _chunk_logits(h: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype, temperature: float) -> torch.Tensor:
    z = (h.to(dtype) @ weight.to(dtype).t()).float()
    return z.div_(temperature) if temperature != 1.0 else z


class _LinearLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, chunk: int, dtype: torch.dtype, entropy: bool):
        n = hidden.shape[0]
        logp = hidden.new_empty(n, dtype=torch.float32)
        lse = hidden.new_empty(n, dtype=torch.float32)
        ent = hidden.new_empty(n if entropy else 0, dtype=torch.float32)
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, n, chunk):
                z = _chunk_logits(hidden[s:s + chunk], weight, dtype, temperature)
                m = torch.logsumexp(z, dim=-1)
                lse[s:s + chunk] = m
                logp[s:s + chunk] = z.gather(-1, targets[s:s + chunk, None]).squeeze(-1) - m
                if entropy:
                    ent[s:s + chunk] = m - torch.softmax(z, dim=-1).mul_(z).sum(-1)
                del z
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.chunk, ctx.dtype = temperature, chunk, dtype
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        hidden, weight, targets, lse = ctx.saved_tensors
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = None
        dtype, tau = ctx.dtype, ctx.temperature
        w = weight.to(dtype)
        with torch.autocast(hidden.device.type, enabled=False):
            for s in range(0, hidden.shape[0], ctx.chunk):
                h = hidden[s:s + ctx.chunk]
                g = grad_logp[s:s + ctx.chunk].float()
                dz = _chunk_logits(h, w, dtype, tau)
                dz.sub_(lse[s:s + ctx.chunk, None]).exp_().mul_(-g[:, None])      # −g·softmax(z)
                dz.scatter_add_(-1, targets[s:s + ctx.chunk, None], g[:, None])  # + g·onehot(y)
                if tau != 1.0:
                    dz.div_(tau)
                dz = dz.to(dtype)
                if need_h:
                    grad_h[s:s + ctx.chunk] = (dz @ w).to(hidden.dtype)
                if need_w:
                    part = (dz.t() @ h.to(dtype)).float()
                    grad_w = part if grad_w is None else grad_w.add_(part)
                del dz
        if need_w and grad_w is None:  # no position at all (a filler pass): a zero gradient, still one
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        return grad_h, (grad_w.to(weight.dtype) if need_w else None), None, None, None, None, None


def linear_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                    chunk: int = LOGPROB_CHUNK, entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log π(targets) in fp32 with its gradient, entropy per position in fp32 without one — None when not
    `entropy`, which saves a softmax per chunk) for hidden states [N, d] under the output embedding `weight`
    [V, d] at `temperature` (formulas in the module docstring). Under autocast the matmuls run in autocast's
    dtype, as the model's lm_head would."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to score tokens (got {temperature})")
    dtype = compute_dtype(hidden.device, hidden.dtype)
    logp, ent = _LinearLogprobs.apply(hidden, weight, targets, float(temperature), int(chunk), dtype, entropy)
    return logp, (ent if entropy else None)
