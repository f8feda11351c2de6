"""The rollout engine of an RL run, one per rank, and how the policy's new weights reach it after each update.

backend (RLConfig.backend, resolved by `resolve_backend`):
- "hf", one process or DDP: the policy module itself generates (transformers); nothing to sync.
- "hf", FSDP: the policy is sharded, and every forward of a sharded module is a collective, while ranks
  generate different prompts for different lengths. Each rank generates with an unsharded copy made before
  sharding; after an update every parameter is gathered whole, one at a time, and copied into it (a full
  copy per rank: the transformers path is for small models; large ones use vLLM).
- "vllm": a vLLM engine per rank, loaded from the model directory. After an update the parameters are
  gathered whole one at a time (`distributed.full_parameters`) and pushed in buckets of at most
  `SYNC_BUCKET_BYTES`, so no rank ever holds more than one bucket of gathered weights beyond its shard.
  On a GPU the engine sleeps (frees its weights and KV cache) while the trainer updates, and wakes to
  take the new weights and generate (`Engine.sleep` / `Engine.wake`, when the engine has them).
"""
from __future__ import annotations

from typing import Iterable, Iterator

import torch

from tasks.generation.hf_backend import HFGenerator

SYNC_BUCKET_BYTES = 1 << 30   # 1 GiB of gathered weights per push: few pushes for an 8B model, bounded memory


def resolve_backend(backend: str) -> str:
    """"auto" → "vllm" when vLLM is installed and a GPU is present, else "hf"."""
    if backend != "auto":
        return backend
    from tasks.generation.select import vllm_available

    return "vllm" if vllm_available() and torch.cuda.is_available() else "hf"


def buckets(named: Iterable[tuple[str, torch.Tensor]], max_bytes: int) -> Iterator[dict[str, torch.Tensor]]:
    """Consecutive (name, tensor) pairs grouped into dicts of at most `max_bytes` (a larger tensor alone)."""
    bucket: dict[str, torch.Tensor] = {}
    size = 0
    for name, t in named:
        n = t.numel() * t.element_size()
        if bucket and size + n > max_bytes:
            yield bucket
            bucket, size = {}, 0
        bucket[name] = t
        size += n
    if bucket:
        yield bucket


def make_rollout_engine(model, tok, model_dir: str, backend: str, batch_size: int, sharded: bool):
    """The rank's engine; call before the model is sharded (`sharded`: it will be, under FSDP)."""
    if backend == "vllm":
        from tasks.generation.vllm_backend import VLLMGenerator

        return _VLLMRolloutEngine(VLLMGenerator(model_dir))
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


class _PolicyCopyEngine(HFGenerator):
    def sync_weights(self, model) -> None:
        """Every rank must call it (each gather is a collective)."""
        from tasks.training.distributed import full_parameters

        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, full in full_parameters(model):
                own[name].copy_(full)


class _VLLMRolloutEngine:
    """A VLLMGenerator fed from the (possibly sharded) policy in buckets, asleep during updates on a GPU."""

    def __init__(self, gen) -> None:
        self.gen = gen
        self.generate = gen.generate  # its own signature (evaluate looks for `on_batch`)

    def __getattr__(self, name: str):  # tok, context_length, … of the wrapped engine
        return getattr(self.__dict__["gen"], name)

    def sync_weights(self, model) -> None:
        """Every rank must call it (each gather is a collective)."""
        from tasks.training.distributed import full_parameters

        wake = getattr(self.gen, "wake", None)
        if wake:
            wake(("weights",))
        for bucket in buckets(full_parameters(model), SYNC_BUCKET_BYTES):
            self.gen.sync_weights(bucket)
        if wake:
            wake(("kv_cache",))

    def sleep(self) -> None:
        sleep = getattr(self.gen, "sleep", None)
        if sleep:
            sleep()

    def close(self) -> None:
        self.gen.close()
