"""Optional torch.compile of each decoder block (SFTConfig.compile, RLConfig.compile).

Each block (the model's `_no_split_modules` classes, the units FSDP shards) is compiled in place with
`nn.Module.compile`: the module, its parameters and its state-dict keys stay what they were, so checkpoints,
DDP and FSDP2 (applied after this, as torchtitan orders them) see the same model. Shapes are marked dynamic:
packed micro-batches change length every step. The varlen attention kernel stays outside the graph (its
per-document loop follows the batch's documents: traced, it would recompile for every new layout), and the
documents reach it as a tensor (packed_attention.span_table: its length a dynamic size, where a list's would
be a guard, a compilation per count of documents); the
projections, norms, rotary embedding and MLP around it are compiled — on a GPU that fuses the elementwise
work between the matmuls (RMSNorm, SwiGLU, residual adds) into a few kernels. FlexAttention (the GPU's packed
kernel) is compiled with the block."""
from __future__ import annotations

import torch


def decoder_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's decoder blocks: modules of its `_no_split_modules` classes."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def compile_blocks(model: torch.nn.Module) -> int:
    """Compile every decoder block in place (module docstring); returns how many. A model that names no
    blocks is refused in one line."""
    blocks = decoder_blocks(model)
    if not blocks:
        raise ValueError(f"compile: {type(model).__name__} names no decoder blocks (_no_split_modules)")
    for block in blocks:
        block.compile(dynamic=True)
    return len(blocks)
