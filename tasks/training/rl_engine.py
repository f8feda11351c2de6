"""The rollout engine of an RL run, one per rank, and how the policy's new weights reach it after each update.

backend (RLConfig.backend, resolved by `resolve_backend`):
- "hf", one process or DDP: the policy module itself generates (transformers); nothing to sync.
- "hf", FSDP: the policy is sharded, and every forward of a sharded module is a collective, while ranks
  generate different prompts for different lengths. Each rank generates with an unsharded copy made before
  sharding; after an update every parameter is gathered whole, one at a time, and copied into it (a full
  copy per rank: the transformers path is for small models; large ones use vLLM).
- "vllm": a vLLM engine per rank (in this process: VLLM_ENABLE_V1_MULTIPROCESSING=0 unless set), loaded
  from the model directory. After an update the parameters are gathered whole one at a time
  (`distributed.full_parameters`) as the engine's loader consumes them, in one push
  (VLLMGenerator.sync_weights), so no rank holds more than one gathered parameter beyond its shard.
  On a GPU the engine sleeps (frees its weights and KV cache) while the trainer updates, and wakes to
  take the new weights and generate (VLLMGenerator.sleep / wake; a no-op on CPU).
"""
from __future__ import annotations

import torch

from tasks.generation.hf_backend import HFGenerator


def resolve_backend(backend: str) -> str:
    """"auto" → "vllm" when vLLM is installed and a GPU is present, else "hf"."""
    if backend != "auto":
        return backend
    from tasks.generation.select import vllm_available

    return "vllm" if vllm_available() and torch.cuda.is_available() else "hf"


def make_rollout_engine(model, tok, model_dir: str, backend: str, batch_size: int, sharded: bool):
    """The rank's engine; call before the model is sharded (`sharded`: it will be, under FSDP)."""
    if backend == "vllm":
        import os

        from tasks.generation.vllm_backend import VLLMGenerator

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # streamed sync, no host copy
        return _VLLMRolloutEngine(VLLMGenerator(model_dir, sleep_mode=True))
    if sharded:
        import copy

        return _PolicyCopyEngine(copy.deepcopy(model).eval(), tok, batch_size=batch_size)
    return _PolicyEngine(model, tok, batch_size=batch_size)


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
        """Every rank must call it (each gather is a collective)."""
        from tasks.training.distributed import full_parameters

        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, full in full_parameters(model):
                own[name].copy_(full)


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
        from tasks.training.distributed import full_parameters

        self.gen.wake(("weights",))
        self.gen.sync_weights(full_parameters(model))
        self.gen.wake(("kv_cache",))

    def sleep(self) -> None:
        self.gen.sleep()

    def close(self) -> None:
        self.gen.close()
