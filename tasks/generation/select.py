"""Choose a generation backend: vLLM when it is installed and a GPU is present (or when asked for),
else transformers. One place decides, so every stage samples the same way."""
from __future__ import annotations

import importlib.util

import torch


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def make_generator(model_dir: str, backend: str = "auto", **kw):
    """A generator over `model_dir`, after the model directory's checks (tasks/models/checks.py, deep):
    a broken model is one ModelDirError naming the file, not an error from inside a backend."""
    from tasks.models.checks import check_model_dir

    check_model_dir(model_dir, deep=True)
    if backend == "auto":
        backend = "vllm" if vllm_available() and torch.cuda.is_available() else "hf"
    if backend == "hf":
        from tasks.generation.hf_backend import HFGenerator

        return HFGenerator.from_pretrained(model_dir, **kw)
    if backend == "vllm":
        from tasks.generation.vllm_backend import VLLMGenerator

        return VLLMGenerator(model_dir, **kw)
    raise ValueError(f"unknown generation backend {backend!r} (known: auto, hf, vllm)")
