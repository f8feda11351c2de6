"""Distributed context for trainers launched by torchrun (WORLD_SIZE > 1) or run as one process.

One process: nothing is initialised, `wrap` returns the model. Under torchrun: NCCL on GPUs (gloo on
CPU), one device per local rank, DistributedDataParallel. Each rank takes `batch[rank::world]` of every
global batch; token counts are all-reduced so the loss stays the global token mean. Every rank runs the
same number of micro-batches (gradients are all-reduced in the last one), padding a short share with
all-ignored packs, so a batch that does not split evenly cannot leave a rank waiting (sft._train_step).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistContext:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup() -> DistContext:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistContext(0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return DistContext(dist.get_rank(), dist.get_world_size(), device)


def wrap(model: torch.nn.Module, ctx: DistContext) -> torch.nn.Module:
    if ctx.world_size == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


def all_reduce_sum(value: float | int, ctx: DistContext) -> float | int:
    if ctx.world_size == 1:
        return value
    t = torch.tensor([float(value)], device=ctx.device)
    dist.all_reduce(t)
    return type(value)(t.item())


def teardown(ctx: DistContext) -> None:
    if ctx.world_size > 1 and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
