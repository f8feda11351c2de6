"""Optimizer settings shared by the trainers."""
from __future__ import annotations

import torch


def fused_adamw(device: torch.device) -> dict:
    """AdamW's keyword for `device`: the fused kernel on a GPU (one launch for every parameter's update,
    instead of a loop of small kernels per tensor group; FSDP2's DTensor shards included), torch's default
    (foreach) elsewhere — on CPU the fused kernel gives no gain and other float rounding."""
    return {"fused": True} if device.type == "cuda" else {}
