"""The rollout engine of an RL run, one per rank, and how the policy's new weights reach it after each update.

backend (RLConfig.backend, resolved by tasks/generation/engine.py `resolve_backend`):
- "hf", one process or DDP, fp32 update: the policy module itself generates (transformers); nothing to sync.
- "hf" with a bf16 update (the GPU default): a bf16 inference copy of the policy generates — half the
  weights' memory traffic per decode step, and the precision the update's forwards run in — refreshed in
  place after each update (every parameter copied into it, cast to bf16).
- "hf" on a GPU: a step's rows decode together as far as the engine's share of the GPU holds them
  (`hf_memory_budget`, tasks/generation/decode_memory.py), in fixed-shape steps replayed as CUDA graphs
  (tasks/generation/static_decode.py).
- "hf", FSDP: the policy is sharded, and every forward of a sharded module is a collective, while ranks
  generate different prompts for different lengths. Each rank that generates holds an unsharded copy in the
  update's forward precision: bf16 with a bf16 update (the GPU default), fp32 without one (the CPU default,
  so CPU runs keep their numbers: bf16 sampling would change every CPU rollout). Over several ranks the
  policy is a skeleton until it is sharded (tasks/training/model_loading.py), so the copy is made empty in
  that dtype and filled by the first weight sync: no rank makes the whole fp32 model for it. After each
  update every parameter is gathered whole, one at a time, and copied into the copy in place (no new
  allocation). A rank that never generates (no prompt group of its own and not rank 0, which runs the
  held-out evaluations: `generates_here`) holds no copy and only takes part in each sync's gathers.
  (A whole copy per generating rank: the transformers path is for small models; large ones use vLLM.)
- "vllm": a vLLM engine per rank (in this process: VLLM_ENABLE_V1_MULTIPROCESSING=0 unless set), loaded
  from the model directory. After an update the parameters are gathered whole one at a time
  (`distributed.full_parameters`) as the engine's loader consumes them, in one push
  (VLLMGenerator.sync_weights), so no rank holds more than one gathered parameter beyond its shard.
  On a GPU the engine sleeps (frees its weights and KV cache) while the trainer updates, and wakes to
  take the new weights and generate (VLLMGenerator.sleep / wake; a no-op on CPU).
  The engines are built inside the trainer's process group (torchrun); closing one leaves that group to the
  trainer (vllm_backend.keep_default_process_group), which still gathers the final checkpoint after it.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import torch

from tasks.generation.decode_memory import engine_memory_budget
from tasks.generation.hf_backend import HFGenerator
from tasks.generation.vllm_backend import VLLMGenerator
from tasks.training.distributed import full_parameters
from tasks.training.model_loading import empty_copy


def make_rollout_engine(model, tok, model_dir: str, backend: str, batch_size: int, sharded: bool,
                        tensor_parallel: int = 1, world_size: int = 1, dtype: torch.dtype = torch.float32,
                        device: torch.device | None = None, generates: bool = True):
    """The rank's engine; call before the model is sharded or compiled (`sharded`: it will be, under FSDP, or
    compiled: the engine generates from a copy either way). `dtype`: the
    update's forward precision (bf16 with autocast): the transformers engine generates in it, from a copy
    when it is not the policy's own (fp32). With
    `tensor_parallel` tp > 1 (vllm), each group of tp consecutive ranks builds one engine over its GPUs
    (vLLM's external launcher: every rank of the group runs the same requests on its shard of the model,
    `rollout_share` gives them the same prompts and seed), world_size / tp such groups side by side. A policy
    built as a skeleton (model_loading.build_model under FSDP) gets an empty copy in `dtype` on `device`,
    which the run's first weight sync fills: the whole model is never made in fp32 for it. `generates` False
    (`generates_here`) with a sharded transformers engine: no copy, the rank only joins the syncs' gathers."""
    if backend == "vllm":
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # streamed sync, no host copy
        kw = {}
        if tensor_parallel > 1:
            kw = {"tensor_parallel_size": tensor_parallel, "data_parallel_size": world_size // tensor_parallel,
                  "distributed_executor_backend": "external_launcher"}
        return _VLLMRolloutEngine(VLLMGenerator(model_dir, sleep_mode=True, **kw))
    if sharded and not generates:
        return _GatherOnlyEngine()
    if any(p.is_meta for p in model.parameters()):  # a skeleton to shard (model_loading): an empty copy,
        own = empty_copy(model, dtype, device)          # filled by the first sync
    elif sharded or dtype != model.dtype:
        own = copy.deepcopy(model).to(dtype).eval()
    else:
        return _PolicyEngine(model, tok, batch_size=batch_size, memory_budget_bytes=hf_memory_budget(model, False))
    return _PolicyCopyEngine(own, tok, batch_size=batch_size, memory_budget_bytes=hf_memory_budget(own, True))


def hf_memory_budget(engine_model, own_copy: bool) -> int | None:
    """The transformers engine's decode budget on its GPU (tasks/generation/decode_memory.py: the engine's share
    of the GPU less the weights of `engine_model` when it is the engine's own copy, not the policy itself);
    None off a GPU (CPU batches keep their row count, so CPU samples do not move)."""
    dev = next(engine_model.parameters()).device
    if dev.type != "cuda":
        return None
    copy_bytes = sum(p.numel() * p.element_size() for p in engine_model.parameters()) if own_copy else 0
    return engine_memory_budget(torch.cuda.get_device_properties(dev).total_memory, copy_bytes)


def generates_here(rank: int, world: int, tensor_parallel: int, prompts: int) -> bool:
    """Whether rank's engine ever generates: rank 0 (it runs the held-out evaluations), every rank of
    tensor-parallel engines (they step together), else a rank that `rollout_share` gives a prompt group of the
    `prompts` a step generates (all of them unless prompts < world)."""
    if rank == 0 or tensor_parallel > 1:
        return True
    return bool(rollout_share(prompts, rank, world, tensor_parallel).generate)


def rollout_batch_rows(device: torch.device, prompts: int, rollouts_per_prompt: int) -> int:
    """Rows (prompts × samples) the transformers engine decodes at once: on a GPU a whole step's `prompts`
    (each decode step's fixed cost is shared by every row; the KV cache of prompts × n rows is what the memory
    must hold), on CPU max(64, 8·n) as before (an RL step's samples depend on how the rows are batched: the
    batch seeds its generator, hf_backend.py)."""
    if device.type == "cuda":
        return prompts * rollouts_per_prompt
    return max(64, rollouts_per_prompt * 8)


def engine_layout_problem(world: int, tensor_parallel: int, prompts: int, flags: str | None = None) -> str | None:
    """Why `world` ranks cannot share vLLM engines of `tensor_parallel` ranks each, or None.

    - tensor_parallel must divide world: each group of tensor_parallel consecutive ranks shares one engine.
    - With tensor_parallel > 1 the world / tensor_parallel engines run as one vLLM data-parallel world (the
      external launcher), whose engines step together: an engine given no prompt group in a step would leave
      the others waiting on it forever, so the prompts a step generates (`prompts`, set by `flags`: the
      flags and their values, for the message) must be at least the number of engines."""
    if world % tensor_parallel:
        return (f"--tensor-parallel {tensor_parallel}: must divide --nproc {world} (each group of "
                f"{tensor_parallel} ranks shares one vLLM engine)")
    engines = world // tensor_parallel
    if tensor_parallel > 1 and prompts < engines:
        return (f"{flags or f'--prompts-per-step {prompts}'}: fewer than the {engines} vLLM engines "
                f"(--nproc {world} / --tensor-parallel {tensor_parallel}); tensor-parallel engines step together, "
                "each needs a prompt group every step")
    return None


@dataclass(frozen=True)
class RolloutShare:
    """One rank's part of a step's prompt groups (`rollout_share`)."""

    generate: list[int]   # the groups its engine generates (the same on every rank of a tp group)
    grade: list[int]      # positions in `generate` this rank grades and keeps (each group on one rank)
    seed_slot: int        # the engine group's index and count, for rollout_seed: one seed per engine
    seed_slots: int


def rollout_share(groups: int, rank: int, world: int, tensor_parallel: int = 1) -> RolloutShare:
    """Engine group e = rank // tp of E = world / tp generates groups e, e + E, … (a group stays whole),
    seeded as slot e of E; its tp ranks split them for grading and the update: rank-in-group j keeps
    positions j, j + tp, … So every group is generated once and kept by exactly one rank, and tp = 1 is
    the plain rule (rank r: groups r, r + world, …)."""
    engines = world // tensor_parallel
    e, j = divmod(rank, tensor_parallel)
    mine = list(range(e, groups, engines))
    return RolloutShare(mine, list(range(j, len(mine), tensor_parallel)), e, engines)


class _PolicyEngine(HFGenerator):
    def generate(self, prompts, params, **kw):
        self.model.eval()  # the trainer left it in train mode
        return super().generate(prompts, params, **kw)

    def sync_weights(self, _model) -> None:  # the policy itself generates: nothing to push
        pass

    def sleep(self) -> None:  # the engine is the trainer's own memory: nothing to free for the update
        pass


class _PolicyCopyEngine(_PolicyEngine):
    def sync_weights(self, model) -> None:
        """The policy's parameters copied in place (cast to the copy's dtype). Every rank must call it (each
        gather is a collective)."""
        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, full in full_parameters(model):
                own[name].copy_(full)


class _GatherOnlyEngine:
    """A rank of a sharded policy that never generates (`generates_here`): no weights of its own, but each
    sync gathers every parameter, a collective the generating ranks wait on, so it takes part and drops them."""

    def generate(self, prompts, params, **kw):
        raise RuntimeError("this rank's engine holds no weights: generates_here said it never generates")

    def sync_weights(self, model) -> None:
        for _name, _full in full_parameters(model):
            pass

    def sleep(self) -> None:
        pass

    def close(self) -> None:
        pass


class _VLLMRolloutEngine:
    """A VLLMGenerator fed parameter by parameter from the (possibly sharded) policy, asleep during updates
    on a GPU."""

    def __init__(self, gen) -> None:
        self.gen = gen
        self.generate = gen.generate  # its own signature (evaluate looks for `on_batch`)

    def __getattr__(self, name: str):  # tok, context_length, … of the wrapped engine
        return getattr(self.__dict__["gen"], name)

    def sync_weights(self, model) -> None:
        """Every rank must call it (each gather is a collective)."""
        self.gen.wake(("weights",))
        self.gen.sync_weights(full_parameters(model))
        self.gen.wake(("kv_cache",))

    def sleep(self) -> None:
        self.gen.sleep()

    def close(self) -> None:
        self.gen.close()
