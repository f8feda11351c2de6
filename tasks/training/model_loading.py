"""The trained model built where its weights will live, so that under FSDP no rank ever holds the whole fp32
model: not on its GPU, not in its host memory.

Two steps around the sharding (distributed.wrap), because what changes a module's structure (gradient
checkpointing, compiled blocks) comes before `fully_shard`:

1. `build_model`: in one process or under DDP, `from_pretrained` onto the device as before (every rank holds
   the whole model there anyway). Under FSDP over several ranks, a skeleton: every parameter on the meta
   device (shapes only, no memory), every buffer real (made on the CPU by the modules themselves: rotary
   frequencies and the like, a few kB), the weights not read.
2. `load_weights` after the sharding: the parameters made real on the device, empty (`to_empty`), the
   buffers put back, then each parameter read from the model's safetensors files one tensor at a time and
   its shard kept: a rank reads only its own rows of each tensor from the file (`own_rows`: FSDP2 shards the
   first dimension, torch.chunk's rule); for any other placement it reads the tensor and cuts its part
   (`distribute_tensor` with no source rank: no communication, each rank cuts the same full tensor by the
   same placements). The most any rank holds beyond its shards is one tensor being read.

A parameter the files lack is an error naming it; a tied output layer (`tie_word_embeddings`) that the files
hold only as the embedding is read from the embedding's tensor. Weights stored in another dtype (bf16 files) are cast to
the parameter's.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from tasks.training.distributed import DistContext


def shards_on_load(ctx: DistContext, strategy: str) -> bool:
    """Whether the model is built as a skeleton and loaded into its shards (FSDP over several ranks)."""
    return strategy == "fsdp" and ctx.world_size > 1


def build_model(model_dir: str | Path, ctx: DistContext, strategy: str, attn_implementation: str | None = None):
    """The model to train (step 1 of the module docstring): whole on the device, or a skeleton to shard."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if not shards_on_load(ctx, strategy):
        return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32,
                                                    attn_implementation=attn_implementation).to(ctx.device)
    from accelerate import init_empty_weights

    config = AutoConfig.from_pretrained(str(model_dir))
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn_implementation)
    model.tie_weights()  # from_config leaves a tied output layer apart (from_pretrained ties it): one parameter
    model.generation_config = _generation_config(model_dir, model.generation_config)
    return model.eval()  # as from_pretrained leaves it (the trainers switch modes themselves)


def _generation_config(model_dir: str | Path, default):
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(str(model_dir))
    except OSError:  # a model folder without generation_config.json
        return default


def load_weights(model: torch.nn.Module, model_dir: str | Path, device: torch.device) -> None:
    """Step 2 of the module docstring, after `distributed.wrap`; nothing to do for a model `build_model` made
    whole."""
    if not any(p.is_meta for p in model.parameters()):
        return
    from safetensors import safe_open
    from torch.distributed.tensor import DTensor, distribute_tensor

    materialize(model, device)
    where = weight_files(model_dir)
    tied = tied_output_name(model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            stored = tied[1] if tied and name == tied[0] and name not in where else name
            if stored not in where:
                raise ValueError(f"{model_dir}: its weights have no {name}")
            # a file is opened (memory-mapped) per tensor on purpose: a mapping kept open for the whole load
            # keeps every page read resident, 315 MB of a 227 MB model's peak instead of 120 (test_model_loading)
            with safe_open(str(where[stored]), framework="pt", device="cpu") as f:
                rows = own_rows(p) if isinstance(p, DTensor) else None
                if rows is not None:  # only this rank's rows are read from the file
                    p.to_local().copy_(f.get_slice(stored)[rows.start:rows.stop].to(device=device, dtype=p.dtype))
                    continue
                full = f.get_tensor(stored).to(device=device, dtype=p.dtype)
            if isinstance(p, DTensor):  # another placement: cut from the whole tensor, no communication
                part = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None)
                p.to_local().copy_(part.to_local())
            else:
                p.copy_(full)
            del full


def materialize(model: torch.nn.Module, device: torch.device) -> None:
    """A skeleton's parameters made real on `device`, uninitialised (`to_empty`), its buffers kept: to_empty
    empties them too, so they are copied out first and back after."""
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    model.to_empty(device=device)
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])


def empty_copy(model: torch.nn.Module, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    """A copy of a skeleton (`build_model` under FSDP) made real in `dtype` on `device`, its parameters
    uninitialised and its buffers the skeleton's: for an engine whose first act is to copy the policy's
    weights in (rl_engine's weight sync), so the whole model exists once, in the engine's dtype."""
    import copy

    twin = copy.deepcopy(model).to(dtype=dtype) if dtype != torch.float32 else copy.deepcopy(model)
    materialize(twin, device)
    twin.tie_weights()  # to_empty makes each parameter anew: a tied output layer is the embedding again
    return twin.eval()


def own_rows(p) -> slice | None:
    """The rows of the whole tensor a DTensor parameter holds on this rank, when it is sharded on its first
    dimension over one mesh dimension (FSDP2's Shard(0), replicated over any other: HSDP): torch.chunk's rule,
    rows ⌈n/k⌉ per rank in mesh order, the last ones short or empty. None for any other placement (or when
    the rule does not give the local shape: then the whole tensor is cut instead)."""
    shards = [(i, pl.dim) for i, pl in enumerate(p.placements) if pl.is_shard()]
    if len(shards) != 1 or shards[0][1] != 0:
        return None
    mesh_dim = shards[0][0]
    n, k = p.shape[0], p.device_mesh.size(mesh_dim)
    size = -(-n // k)
    start = min(p.device_mesh.get_coordinate()[mesh_dim] * size, n)
    rows = slice(start, min(start + size, n))
    return rows if rows.stop - rows.start == p.to_local().shape[0] else None


def tied_output_name(model: torch.nn.Module) -> tuple[str, str] | None:
    """(output layer's weight, input embedding's weight) by parameter name when the config ties them: a
    save writes the embedding only, and the sharding may list the output layer's parameter apart."""
    if not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return None
    names = {id(m): n for n, m in model.named_modules()}
    out, emb = model.get_output_embeddings(), model.get_input_embeddings()
    if out is None or emb is None:
        return None
    return f"{names[id(out)]}.weight", f"{names[id(emb)]}.weight"


def weight_files(model_dir: str | Path) -> dict[str, Path]:
    """Each tensor name → the safetensors file holding it (the index of a sharded save, else the one file)."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        return {name: model_dir / file for name, file in json.loads(index.read_text())["weight_map"].items()}
    from safetensors import safe_open

    single = model_dir / "model.safetensors"
    if not single.is_file():
        raise ValueError(f"{model_dir}: no model.safetensors (or its index) to load the shards from")
    with safe_open(str(single), framework="pt", device="cpu") as f:
        return {name: single for name in f.keys()}
