"""Choose a generation backend: vLLM when it is installed and a GPU is present (or when asked for),
else transformers. One place decides, so every stage samples the same way. `nproc` > 1 gives a
generator over that many worker processes, each with its own engine (tasks/generation/parallel.py)."""
from __future__ import annotations

import importlib.util

import torch


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_backend(backend: str) -> str:
    """"auto" → "vllm" when vLLM is installed and a GPU is present, else "hf"; others unchanged."""
    if backend == "auto":
        return "vllm" if vllm_available() and torch.cuda.is_available() else "hf"
    return backend


def make_generator(model_dir: str, backend: str = "auto", nproc: int = 1, **kw):
    """A generator over `model_dir`, after the model directory's checks (tasks/models/checks.py, deep):
    a broken model is one ModelDirError naming the file, not an error from inside a backend. The caller
    closes it (tasks/generation/base.py "Lifecycle")."""
    from tasks.models.checks import check_model_dir

    check_model_dir(model_dir, deep=True)
    backend = resolve_backend(backend)
    if backend not in ("hf", "vllm"):
        raise ValueError(f"unknown generation backend {backend!r} (known: auto, hf, vllm)")
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1 (got {nproc})")
    if nproc > 1:
        from tasks.generation.parallel import ShardedGenerator

        return ShardedGenerator(model_dir, backend, nproc, **kw)
    if backend == "hf":
        from tasks.generation.hf_backend import HFGenerator

        return HFGenerator.from_pretrained(model_dir, **kw)
    from tasks.generation.vllm_backend import VLLMGenerator

    return VLLMGenerator(model_dir, **kw)
