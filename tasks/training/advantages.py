"""Advantage estimators: one registry; each maps rewards grouped by prompt to one advantage per rollout.

    advantages = estimate_advantages(name, rewards, group_ids, eps=1e-6)
"""
from __future__ import annotations

from typing import Callable

import torch

ADVANTAGES: dict[str, Callable[..., torch.Tensor]] = {}


def register_advantage(name: str):
    def deco(fn):
        ADVANTAGES[name] = fn
        return fn
    return deco


def _group_stats(rewards: torch.Tensor, groups: torch.Tensor):
    uniq, inv = torch.unique(groups, return_inverse=True)
    count = torch.zeros(len(uniq), dtype=rewards.dtype).index_add_(0, inv, torch.ones_like(rewards))
    mean = torch.zeros(len(uniq), dtype=rewards.dtype).index_add_(0, inv, rewards) / count
    var = torch.zeros(len(uniq), dtype=rewards.dtype).index_add_(0, inv, (rewards - mean[inv]) ** 2)
    std = torch.sqrt(var / (count - 1).clamp_min(1))  # unbiased, as torch.std
    return mean[inv], std[inv]


@register_advantage("grpo")
def grpo_advantage(rewards: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (Shao et al. 2024), used by the paper: Â_i = (r_i − mean_group(r)) / (std_group(r) + ε)."""
    mean, std = _group_stats(rewards, groups)
    return (rewards - mean) / (std + eps)


@register_advantage("drgrpo")
def drgrpo_advantage(rewards: torch.Tensor, groups: torch.Tensor, **_) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025): Â_i = r_i − mean_group(r), no std division (no difficulty bias)."""
    mean, _ = _group_stats(rewards, groups)
    return rewards - mean


def estimate_advantages(name: str, rewards, groups, **opts) -> torch.Tensor:
    if name not in ADVANTAGES:
        raise ValueError(f"unknown advantage estimator {name!r} (known: {', '.join(sorted(ADVANTAGES))})")
    return ADVANTAGES[name](torch.as_tensor(rewards, dtype=torch.float32), torch.as_tensor(groups), **opts)


def zero_variance_groups(rewards, groups) -> set[int]:
    """Groups whose rewards do not vary (all right or all wrong): their advantages are all 0, so the paper
    drops them from the batch."""
    spread: dict[int, set[float]] = {}
    for r, g in zip(torch.as_tensor(rewards).tolist(), torch.as_tensor(groups).tolist()):
        spread.setdefault(g, set()).add(round(r, 9))
    return {g for g, vals in spread.items() if len(vals) == 1}
