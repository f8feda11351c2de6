"""Learning-rate schedules as multipliers of the peak lr (for torch LambdaLR)."""
from __future__ import annotations

import math


def warmup_cosine(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Linear warm-up over `warmup` steps to 1, then cosine from 1 down to `min_ratio` at `total`.
    Paper SFT: 8e-5 → 4e-5, i.e. min_ratio 0.5."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_constant(step: int, warmup: int) -> float:
    """Linear warm-up then constant (paper RL: constant lr, 10 warm-up steps)."""
    return min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
