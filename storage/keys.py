"""Content-addressed keys: a stage's output key is a hash of its input keys, its parameters and its
code version, so the same inputs recompute nothing and a changed parameter reruns only what depends on it.

All hashes are SHA-256 hex digests; ids shown to users are a prefix plus the first 16 hex digits.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from storage.paths import open_binary

_CHUNK = 1 << 20


def hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hash_file(url: str) -> str:
    """SHA-256 of a file's bytes, read through fsspec (local path or s3://…)."""
    h = hashlib.sha256()
    with open_binary(url) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def hash_json(obj: Any) -> str:
    """SHA-256 of the canonical JSON of `obj` (sorted keys, no whitespace): equal values, equal hash."""
    return hash_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode())


def code_version(packages: Iterable[str]) -> str:
    """Hash of the source of the given importable packages/modules (every .py file, by relative path).

    Editing any of them changes the key of the stages that depend on them; nothing else does.
    """
    import importlib

    h = hashlib.sha256()
    for name in sorted(packages):
        mod = importlib.import_module(name)
        base = Path(mod.__file__).parent if mod.__file__.endswith("__init__.py") else Path(mod.__file__)
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for f in files:
            h.update(f"{name}/{f.relative_to(base) if base.is_dir() else f.name}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def short_id(prefix: str, digest: str) -> str:
    return f"{prefix}-{digest[:16]}"
