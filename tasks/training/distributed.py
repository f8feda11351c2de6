"""Distributed context for trainers launched by torchrun (WORLD_SIZE > 1) or run as one process.

One process: nothing is initialised, `wrap` returns the model. Under torchrun: NCCL on GPUs (gloo on
CPU), one device per local rank, and a strategy (STRATEGIES):
- "ddp": DistributedDataParallel — every rank holds the whole model and optimizer state; gradients are
  all-reduced (averaged) once per optimizer step.
- "fsdp": FSDP2 (`torch.distributed.fsdp.fully_shard`) on every transformer block (the model's
  `_no_split_modules` classes) and then the root — parameters, gradients and AdamW state are sharded over
  the ranks (each holds ≈ 1/world of them), gathered block by block for forward and backward, gradients
  reduce-scattered (averaged, as DDP). Checkpoints gather a full state dict to rank 0, so the files are the
  same HF checkpoint whichever strategy wrote them, and `--resume` works across strategies.
Each rank takes `batch[rank::world]` of every global batch; token counts are all-reduced so the loss stays
the global token mean. Every rank runs the same number of micro-batches (gradients are synchronised in the
last one), padding a short share with all-ignored packs, so a batch that does not split evenly cannot
leave a rank waiting in a collective (sft.train_step).
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from tasks.training.config import STRATEGIES  # noqa: E402  (one list, shared with SFTConfig)

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


def wrap(model: torch.nn.Module, ctx: DistContext, strategy: str = "ddp") -> torch.nn.Module:
    """The module to run forward/backward on: `model` itself (one process, or FSDP, which shards it in
    place) or a DDP wrapper. Build the optimizer after this: under FSDP its parameters become shards."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if ctx.world_size == 1:
        return model
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        blocks = set(getattr(model, "_no_split_modules", None) or [])
        for module in [m for m in model.modules() if type(m).__name__ in blocks]:
            fully_shard(module)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def gradient_sync(model: torch.nn.Module, enabled: bool):
    """Backward passes inside synchronise gradients across ranks only when `enabled` (the last
    micro-batch of an optimizer step); earlier ones accumulate locally (DDP no_sync / FSDP2's flag)."""
    if hasattr(model, "no_sync"):  # DDP
        with contextlib.nullcontext() if enabled else model.no_sync():
            yield
    elif is_sharded(model):
        model.set_requires_gradient_sync(enabled)
        yield
    else:
        yield


def scalar(x) -> float:
    """A 0-d tensor as a float; a sharded DTensor (e.g. FSDP's total grad norm) is made whole first."""
    return float(x.full_tensor() if hasattr(x, "full_tensor") else x)


def full_state(model: torch.nn.Module, opt: torch.optim.Optimizer | None = None) -> tuple[Any, Any]:
    """(model state dict, optimizer state dict) whole, on CPU, for rank 0 to save. A collective under FSDP:
    every rank must call it (other ranks get empty dicts). (None, None) when the model is not sharded: it
    saves its own state as usual."""
    if not is_sharded(model):
        return None, None
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd = get_model_state_dict(model, options=options)
    opt_sd = get_optimizer_state_dict(model, opt, options=options) if opt is not None else None
    return model_sd, opt_sd


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DDP wrapper; the module itself otherwise (FSDP2 shards in place)."""
    return model.module if hasattr(model, "no_sync") else model


def full_parameters(model: torch.nn.Module):
    """(name, whole tensor) for every parameter, one at a time: a sharded (FSDP) parameter is gathered on
    every rank (a collective: all ranks must iterate to the end), so at most one whole parameter exists
    beyond the shards at any time. Names are the unwrapped model's (a DDP wrapper's `module.` dropped)."""
    for name, p in unwrap(model).named_parameters():
        yield name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach()


def all_gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """Every rank's `obj` (picklable), in rank order, on every rank; [obj] on one process."""
    if ctx.world_size == 1:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def load_optimizer_state(model: torch.nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    """Restore a saved optimizer state into `opt`, sharded or not. The file holds either
    `opt.state_dict()` (one process, DDP: parameters by index) or a full state keyed by parameter name
    (FSDP); each is loaded into either kind of model."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    by_name = any(isinstance(k, str) for k in state.get("state", {}))
    if not by_name and not is_sharded(model):
        opt.load_state_dict(state)
        return
    if not by_name:  # index-keyed (DDP/one process) into a sharded model: name the parameters first
        names = [n for n, _ in model.named_parameters()]
        state = {"state": {names[int(i)]: v for i, v in state["state"].items()},
                 "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, opt, optim_state_dict=state, options=StateDictOptions(full_state_dict=True))


def all_reduce_sum(value: float | int, ctx: DistContext) -> float | int:
    if ctx.world_size == 1:
        return value
    t = torch.tensor([float(value)], device=ctx.device)
    dist.all_reduce(t)
    return type(value)(t.item())


def barrier(ctx: DistContext) -> None:
    """Every rank waits here until all have come; nothing on one process."""
    if ctx.world_size > 1:
        dist.barrier()


TEARDOWN_SETTLE_S = 0.5  # after the last barrier, the GIL left free this long (see teardown)


def teardown(ctx: DistContext) -> None:
    """The last barrier, then the process group destroyed. Between the two this thread sleeps (GIL released)
    for TEARDOWN_SETTLE_S: gloo's worker thread drops each finished collective after waking its caller, and
    that can free tensors Python created (an all_gather's), which takes the GIL. The group's destructor
    joins that thread; it runs where Python frees the group or the DDP wrapper holding it, GIL held, so
    without the pause a loaded machine could leave a rank hung at exit for ever (seen: torch 2.13, gloo,
    a DDP run whose rank 1 waited in ~ProcessGroupGloo while its worker waited for the GIL)."""
    if ctx.world_size > 1 and dist.is_initialized():
        dist.barrier()
        time.sleep(TEARDOWN_SETTLE_S)
        dist.destroy_process_group()
