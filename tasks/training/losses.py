"""Policy losses: one registry, one signature, aggregation written once.

    loss, metrics = policy_loss(name, logp, old_logp, advantages, mask, eps_low=0.2, eps_high=0.28, **opts)

Tensors are (batch, response_len); `advantages` per token (broadcast a per-sequence value); `mask` is 1 on
response tokens. Each registered loss returns the per-token objective J_t to MAXIMISE; `policy_loss`
returns −Σ_t mask·J_t / N, where N is the number of unmasked tokens of the batch — or `num_tokens=` the
count of the whole global batch, so summing micro-batch losses gives exactly the full-batch loss (and
gradient) whatever the micro-batching or gradient accumulation.

δ_t = π_θ(o_t)/π_old(o_t) = exp(logp − old_logp); sg = stop-gradient.
"""
from __future__ import annotations

from typing import Callable

import torch

LossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
POLICY_LOSSES: dict[str, LossFn] = {}


def register_policy_loss(name: str) -> Callable[[LossFn], LossFn]:
    def deco(fn: LossFn) -> LossFn:
        POLICY_LOSSES[name] = fn
        return fn
    return deco


def _clip_regions(ratio, adv, eps_low, eps_high):
    """Tokens where the clipped branch is the active one of the min: δ<1−ε_l with Â<0, δ>1+ε_h with Â>0."""
    low = (ratio < 1 - eps_low) & (adv < 0)
    high = (ratio > 1 + eps_high) & (adv > 0)
    return low, high


def _dual_clip(obj, adv, c: float | None):
    """Dual-clip (Ye et al. 2020; verl's default c = 3, the Klear release uses 10): for Â<0 the objective
    is bounded below by c·Â, so a huge ratio on a negative sample cannot dominate. Off when c is None."""
    if c is None:
        return obj
    return torch.where(adv < 0, torch.maximum(obj, c * adv), obj)


@register_policy_loss("grpo")
def grpo(logp, old_logp, adv, eps_low, eps_high, dual_clip: float | None = None, **_):
    """PPO clipped surrogate as used by GRPO/DAPO (DAPO "clip-higher" when ε_h = 0.28 > ε_l = 0.2):

        J_t = min(δ·Â, clip(δ, 1−ε_l, 1+ε_h)·Â)

    Gradient F·Â·∇log π with F = δ inside the trust region and F = 0 on clipped tokens."""
    ratio = torch.exp(logp - old_logp)
    obj = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv)
    return _dual_clip(obj, adv, dual_clip), ratio


@register_policy_loss("gppo")
def gppo(logp, old_logp, adv, eps_low, eps_high, beta1: float = 1.0, beta2: float = 1.0,
         dual_clip: float | None = None, **_):
    """GPPO, Klear-Reasoner Eq. 11 (Su et al. 2025, arXiv 2508.07629), general form of App. A.2:

        J_t = min(δ·Â, c(δ)·Â),  c(δ) = β1(1−ε_l)·δ/sg(δ) if δ < 1−ε_l;  β2(1+ε_h)·δ/sg(δ) if δ > 1+ε_h;  δ else

    Forward value equals clip-higher PPO when β1 = β2 = 1 (δ/sg(δ) = 1). The gradient keeps a bounded
    signal on clipped tokens: F = β1(1−ε_l) when δ < 1−ε_l and Â < 0, F = β2(1+ε_h) when δ > 1+ε_h and
    Â > 0, F = δ otherwise (PPO has F = 0 in those two regions). The branch is chosen by those regions
    (exactly where the β = 1 min picks the clipped term), so β < 1 scales the clipped tokens' value and
    gradient without moving the region boundaries."""
    ratio = torch.exp(logp - old_logp)
    unit = ratio / ratio.detach()  # value 1, gradient ∇log π
    low, high = _clip_regions(ratio, adv, eps_low, eps_high)
    obj = torch.where(low, beta1 * (1 - eps_low) * unit * adv,
                      torch.where(high, beta2 * (1 + eps_high) * unit * adv, ratio * adv))
    return _dual_clip(obj, adv, dual_clip), ratio


@register_policy_loss("cispo")
def cispo(logp, old_logp, adv, eps_low, eps_high, **_):
    """CISPO (MiniMax-M1, 2025): REINFORCE with a clipped, stop-gradient importance weight:

        J_t = sg(clip(δ, 1−ε_l, 1+ε_h))·Â·log π_θ(o_t)

    Every token keeps a gradient sg(clip δ)·Â·∇log π; the value itself is only a surrogate."""
    ratio = torch.exp(logp - old_logp)
    weight = torch.clamp(ratio, 1 - eps_low, 1 + eps_high).detach()
    return weight * adv * logp, ratio


def policy_loss(name: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.28,
                num_tokens: float | None = None, **opts) -> tuple[torch.Tensor, dict[str, float]]:
    loss, metrics = policy_loss_on_device(name, logp, old_logp, advantages, mask, eps_low, eps_high, num_tokens,
                                          **opts)
    return loss, {k: float(v) for k, v in metrics.items()}


def policy_loss_on_device(name: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                          mask: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.28,
                          num_tokens: float | None = None, **opts) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`policy_loss` with its metrics left as 0-d tensors on the loss's device: a trainer reads them once per
    step instead of waiting for the device at every micro-batch."""
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r} (known: {', '.join(sorted(POLICY_LOSSES))})")
    adv = advantages if advantages.shape == logp.shape else advantages.reshape(-1, 1).expand_as(logp)
    mask = mask.to(logp.dtype)
    obj, ratio = POLICY_LOSSES[name](logp, old_logp.detach(), adv.detach(), eps_low, eps_high, **opts)
    n = mask.sum() if num_tokens is None else torch.as_tensor(num_tokens, dtype=logp.dtype)
    loss = -(obj * mask).sum() / n.clamp_min(1)
    with torch.no_grad():
        low, high = _clip_regions(ratio, adv, eps_low, eps_high)
        m = mask.sum().clamp_min(1)
        metrics = {"clip_frac_low": (low * mask).sum() / m,
                   "clip_frac_high": (high * mask).sum() / m,
                   "ratio_mean": (ratio * mask).sum() / m,
                   **gradient_shares_on_device(name, logp, old_logp, adv, mask, low, high, eps_low, eps_high, **opts)}
    return loss, metrics


GRADIENT_SHARES = ("grad_share_low", "grad_share_high")


def gradient_shares(name: str, logp, old_logp, adv, mask, low, high, eps_low, eps_high, **opts) -> dict[str, float]:
    """How much of the policy gradient comes from the clipped regions: with g_t = ∂J_t/∂log π(o_t) (= F·Â,
    the per-token weight of ∇log π),

        grad_share_low = Σ_{t∈low} |g_t| / Σ_t |g_t|,   grad_share_high likewise for the high region
        (both 0 when every g_t is 0).

    PPO/GRPO have g = 0 there (shares 0); GPPO keeps β(1∓ε)·Â by design, CISPO clip(δ)·Â. The low and high
    boundaries push entropy in opposite directions (CE-GPPO, arXiv 2509.20712), hence the two figures. g is
    taken by autograd on a detached copy of log π, so it holds for any registered loss."""
    shares = gradient_shares_on_device(name, logp, old_logp, adv, mask, low, high, eps_low, eps_high, **opts)
    return {k: float(v) for k, v in shares.items() if k in GRADIENT_SHARES}


def gradient_shares_on_device(name: str, logp, old_logp, adv, mask, low, high, eps_low, eps_high,
                              **opts) -> dict[str, torch.Tensor]:
    """`gradient_shares` as 0-d tensors on the device (no wait for it), plus `grad_abs_sum` = Σ_t |g_t|, the
    shares' denominator: a trainer that splits a batch sums share·grad_abs_sum and grad_abs_sum over its
    pieces, so its figure is the ratio of the sums above whatever the micro-batching or rank count."""
    with torch.enable_grad():
        leaf = logp.detach().requires_grad_(True)
        obj, _ = POLICY_LOSSES[name](leaf, old_logp.detach(), adv.detach(), eps_low, eps_high, **opts)
        (g,) = torch.autograd.grad((obj * mask).sum(), leaf)
    g = (g * mask).abs()
    total = g.sum()
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return {"grad_share_low": (g * low).sum() / safe, "grad_share_high": (g * high).sum() / safe,
            "grad_abs_sum": total}
