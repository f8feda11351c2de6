"""Content-addressed stage outputs for the end-to-end pipeline. A stage's key hashes its input keys,
its parameters and its code version; its output lives at a path derived from the key, and a finished
output is recognised by its lineage file (checkpoints) or catalog row (evaluations). So a second run
with the same parameters recomputes nothing, a changed RL parameter reruns only RL and evaluation, and a
run killed midway resumes: finished stages are found, a half-trained stage resumes from its checkpoint.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from storage.checkpoints import read_lineage, recorded_checkpoint_id
from storage.keys import code_version, hash_json, short_id
from storage.store import Store

TRAINING_CODE = ("tasks.training", "tasks.grading", "tasks.generation")


def stage_key(kind: str, inputs: dict[str, Any], params: Any, code: tuple[str, ...]) -> str:
    """hash(inputs, params, code version); a dataclass's `UNKEYED` fields (how a run is watched, not what it
    computes) are left out of params."""
    if hasattr(params, "__dataclass_fields__"):
        unkeyed = getattr(params, "UNKEYED", ())
        params = {k: v for k, v in asdict(params).items() if k not in unkeyed}
    return short_id(kind, hash_json({"inputs": inputs, "params": params, "code": code_version(code)}))


def finished(path: Path) -> bool:
    """A checkpoint directory is finished when its lineage file names its own weights (the id read from
    that file unless a weight file is newer than it: storage.checkpoints.recorded_checkpoint_id)."""
    lineage = read_lineage(path) if (path / "config.json").exists() else None
    return bool(lineage) and lineage.get("id") == recorded_checkpoint_id(path)


def base_model_dir(store: str | None, preset: str, seed: int, corpus_hash: str) -> Path:
    key = stage_key("base", {"corpus": corpus_hash}, {"preset": preset, "seed": seed}, ("tasks.models",))
    return Path(Store(store).path("models", key))


def sft_dir(store: str | None, base: str, dataset: str, cfg) -> Path:
    key = stage_key("sft", {"base": recorded_checkpoint_id(base), "dataset": dataset}, cfg, TRAINING_CODE)
    return Path(Store(store).path("models", key))


def rl_dir(store: str | None, sft: str, dataset: str, cfg) -> Path:
    key = stage_key("rl", {"sft": recorded_checkpoint_id(sft), "dataset": dataset}, cfg, TRAINING_CODE)
    return Path(Store(store).path("models", key))
