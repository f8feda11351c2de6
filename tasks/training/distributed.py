"""Distributed context for trainers launched by torchrun (WORLD_SIZE > 1) or run as one process.

One process: nothing is initialised, `wrap` returns the model. Under torchrun: NCCL on GPUs (gloo on
CPU), one device per local rank, and a strategy (STRATEGIES):
- "ddp": DistributedDataParallel — every rank holds the whole model and optimizer state; gradients are
  all-reduced (averaged) once per optimizer step.
- "fsdp": FSDP2 (`torch.distributed.fsdp.fully_shard`) on every transformer block (the model's
  `_no_split_modules` classes) and then the root — parameters, gradients and AdamW state are sharded over
  the ranks (each holds ≈ 1/world of them: ZeRO-3), gathered block by block for forward and backward,
  gradients reduce-scattered (averaged, as DDP). In bf16 a mixed-precision policy (`mixed_precision`)
  gathers bf16 parameters and reduces fp32 gradients; with `shard_group_size` g the mesh is 2-D
  (`device_mesh`: HSDP, sharded within groups of g ranks, replicated across them).
Checkpoints are sharded (`sharded_state`, tasks/training/checkpoint.py): each rank writes and reads its own
part through torch.distributed.checkpoint, keyed by parameter name, so a checkpoint of any strategy and
world size resumes under any other; only the final model is gathered whole (`full_model_state`).
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


def wrap(model: torch.nn.Module, ctx: DistContext, strategy: str = "ddp", bf16: bool = False,
         shard_group_size: int | None = None) -> torch.nn.Module:
    """The module to run forward/backward on: `model` itself (one process, or FSDP, which shards it in
    place) or a DDP wrapper. Build the optimizer after this: under FSDP its parameters become shards.
    `bf16` and `shard_group_size` apply to FSDP only (`shard`, `device_mesh`)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if ctx.world_size == 1:
        return model
    if strategy == "fsdp":
        return shard(model, device_mesh(ctx, shard_group_size), bf16)
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


def mixed_precision(bf16: bool):
    """FSDP2's policy: in bf16, parameters all-gathered and computed in bf16 (half the gather traffic of
    fp32) while gradients are reduce-scattered in fp32 and the sharded master weights and AdamW state stay
    fp32; otherwise everything fp32 (the default policy). The trainers keep bf16 autocast around each
    forward on every path, so ops autocast runs in fp32 (log-softmax, reductions) stay fp32 here too."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not bf16:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def device_mesh(ctx: DistContext, shard_group_size: int | None = None):
    """The ranks FSDP shards over. None (or the world size): a 1-D mesh ("shard",) of every rank. g < world:
    HSDP, a 2-D mesh ("replicate", "shard") of shape (world/g, g) — each parameter sharded over g
    consecutive ranks (one node's GPUs, where the links are fast) and replicated across the world/g groups:
    gradients are reduce-scattered within a group and all-reduced across groups, so only 1/g of the
    gradient bytes cross the slower links between nodes. g must divide the world size."""
    from torch.distributed.device_mesh import init_device_mesh

    g = shard_group_size or ctx.world_size
    if g < 1 or ctx.world_size % g:
        raise ValueError(f"shard_group_size {g} must divide the {ctx.world_size} ranks")
    if g == ctx.world_size:
        return init_device_mesh(ctx.device.type, (g,), mesh_dim_names=("shard",))
    return init_device_mesh(ctx.device.type, (ctx.world_size // g, g), mesh_dim_names=("replicate", "shard"))


def shard(model: torch.nn.Module, mesh, bf16: bool = False) -> torch.nn.Module:
    """`fully_shard` on every transformer block (the model's `_no_split_modules` classes), then the root,
    over `mesh` with the `mixed_precision(bf16)` policy; the model is sharded in place and returned."""
    from torch.distributed.fsdp import fully_shard

    policy = mixed_precision(bf16)
    blocks = set(getattr(model, "_no_split_modules", None) or [])
    for module in [m for m in model.modules() if type(m).__name__ in blocks]:
        fully_shard(module, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def gradient_sync(model: torch.nn.Module, enabled: bool):
    """Backward passes inside a DDP model all-reduce gradients only when `enabled` (the last micro-batch of
    an optimizer step); earlier ones accumulate locally (no_sync): each rank holds whole gradients anyway.
    Under FSDP every micro-batch reduce-scatters, `enabled` or not: skipping it would keep each earlier
    micro-batch's gradients unsharded, a whole fp32 copy of the model's gradients on every GPU (4P bytes:
    32.8 GiB at 8B, the largest term of the paper preset's plan, and one that no number of GPUs shrinks),
    to save a reduce-scatter per micro-batch. The sum is the same: shards accumulate what the whole
    gradients would have (tasks/training/plan.py counts it so)."""
    if hasattr(model, "no_sync"):  # DDP
        with contextlib.nullcontext() if enabled else model.no_sync():
            yield
    elif is_sharded(model):
        model.set_requires_gradient_sync(True)
        yield
    else:
        yield


def scalar(x) -> float:
    """A 0-d tensor as a float; a sharded DTensor (e.g. FSDP's total grad norm) is made whole first."""
    return float(x.full_tensor() if hasattr(x, "full_tensor") else x)


def full_model_state(model: torch.nn.Module) -> dict | None:
    """The model's state dict whole, on CPU, for rank 0 to save as the run's final HF model (weights only;
    the optimizer state is never gathered). A collective under FSDP: every rank must call it (other ranks
    get an empty dict). None when the model is not sharded: it saves its own state as usual."""
    if not is_sharded(model):
        return None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return share_tied(model, state)


def share_tied(model: torch.nn.Module, state: dict) -> dict:
    """`state` with the names of one shared parameter (tied input and output embeddings) pointing at one
    tensor again, as in the model itself: gathering copies each name apart, and `save_pretrained` then
    writes the tied copy too, so the same weights would get other files (and another checkpoint id) than a
    one-process run or an export writes."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    for first, *others in names.values():
        for name in others:
            if first in state and name in state:
                state[name] = state[first]
    return state


def sharded_state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """{"model": ..., "optim": ...} as this rank holds them, for torch.distributed.checkpoint to save or
    load in place: under FSDP the rank's own shards (DTensors, nothing gathered), under DDP or in one
    process the whole tensors (DCP writes each replicated tensor once, from one rank). Both are keyed by
    parameter name, so any layout loads into any other (DCP reads each rank's slices: resharding). An
    optimizer that has not stepped yet gets its state made first (a zero-lr step; the load overwrites it)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(unwrap(model), opt)
    return {"model": model_sd, "optim": optim_sd}


@contextlib.contextmanager
def quiet_single_process_dcp():
    """DCP warns at every save or load without a process group that it assumes one process; that is what
    one process means here, so the warning is silenced (other warnings pass)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def load_sharded_state(model: torch.nn.Module, opt: torch.optim.Optimizer, path) -> None:
    """Read the model and optimizer state DCP saved at `path` (`sharded_state`'s layout, any world size)
    into this rank's parameters and optimizer: each rank reads only the slices it holds. A collective
    under torchrun; torch's CheckpointException (a BaseException) when it cannot be read or does not fit."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    state = sharded_state(model, opt)
    with quiet_single_process_dcp():
        dcp.load(state, checkpoint_id=str(path), no_dist=not dist.is_initialized())
    set_state_dict(unwrap(model), opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


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
