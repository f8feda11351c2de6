"""Make a generator: the model directory's checks first, then one engine of the resolved backend
(engine.py: vLLM when it is installed and a GPU is present, or when asked for, else transformers), or with
`nproc` > 1 a generator over that many worker processes, each with its own engine (parallel.py). One
place decides, so every stage samples the same way."""
from __future__ import annotations

from tasks.generation.engine import BACKENDS, open_engine, resolve_backend
from tasks.generation.parallel import ShardedGenerator
from tasks.models.checks import check_model_dir


def make_generator(model_dir: str, backend: str = "auto", nproc: int = 1, **kw):
    """A generator over `model_dir`, after the model directory's checks (tasks/models/checks.py, deep):
    a broken model is one ModelDirError naming the file, not an error from inside a backend. The caller
    closes it (tasks/generation/base.py "Lifecycle")."""
    check_model_dir(model_dir, deep=True)
    backend = resolve_backend(backend)
    if backend not in BACKENDS:
        raise ValueError(f"unknown generation backend {backend!r} (known: auto, {', '.join(BACKENDS)})")
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1 (got {nproc})")
    if nproc > 1:
        return ShardedGenerator(model_dir, backend, nproc, **kw)
    return open_engine(model_dir, backend, **kw)
