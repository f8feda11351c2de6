"""Which backend samples, and one engine of it in this process. `resolve_backend` is the one place that
decides ("auto": vLLM when it is installed and a GPU is present, else transformers); `open_engine` builds
the engine. select.make_generator (model checks, `nproc`) and the workers of parallel.py both open
engines here. torch and the backends are imported when first needed, not with this module: a generation
worker sets its devices and threads before torch loads."""
from __future__ import annotations

import importlib.util

BACKENDS = ("hf", "vllm")


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_backend(backend: str) -> str:
    """"auto" → "vllm" when vLLM is installed and a GPU is present, else "hf"; others unchanged."""
    if backend != "auto":
        return backend
    import torch  # late: see the module docstring

    return "vllm" if vllm_available() and torch.cuda.is_available() else "hf"


def open_engine(model_dir: str, backend: str, **kw):
    """One engine of a resolved backend ("hf" or "vllm") over `model_dir`, in this process; the caller
    closes it (base.py "Lifecycle")."""
    if backend == "hf":
        from tasks.generation.hf_backend import HFGenerator  # late: imports torch

        return HFGenerator.from_pretrained(model_dir, **kw)
    if backend == "vllm":
        from tasks.generation.vllm_backend import VLLMGenerator  # late: imports torch

        return VLLMGenerator(model_dir, **kw)
    raise ValueError(f"unknown generation backend {backend!r} (known: auto, {', '.join(BACKENDS)})")
