"""Content address of a curation run: the dataset version id is a hash of
(every source's spec + content hash, every benchmark's content hash, the parameters, the code version),
so re-running the same command on the same inputs yields the same id and recomputes nothing, while a
changed file, parameter or curation code yields a new version.
"""
from __future__ import annotations

from typing import Any

from storage.keys import code_version, hash_file, hash_json, short_id
from tasks.curation.config import CurateConfig
from tasks.records.sources import SourceError, source_kind

CODE_PACKAGES = ("tasks.curation", "tasks.records", "tasks.grading", "storage")  # curation, its reader and grading
EXECUTION_FIELDS = ("memory_limit", "dask", "dask_workers", "work_dir")  # how a version is computed, not what


def input_hash(path: str) -> str:
    """Content hash of a file source; for hf: sources the spec itself (pin a revision for reproducibility)."""
    if source_kind(path) == "hf":
        return "hf:" + path
    try:
        return hash_file(path)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None


def curation_inputs(config: CurateConfig) -> dict[str, Any]:
    return {
        "sources": [{**s.fields_dict(), "sha256": input_hash(s.path)} for s in config.sources],
        "benchmarks": {name: {"path": p, "sha256": input_hash(p)} for name, p in sorted(config.benchmarks.items())},
    }


def curation_parameters(config: CurateConfig) -> dict[str, Any]:
    return config.fields_dict(exclude={"sources", "benchmarks", "store", *EXECUTION_FIELDS})


def curation_version_id(config: CurateConfig, inputs: dict[str, Any] | None = None) -> str:
    """Paths are not part of the key, only content: moving a file does not change the version."""
    inputs = inputs or curation_inputs(config)
    keyed = {
        "sources": [{k: v for k, v in s.items() if k != "path"} for s in inputs["sources"]],
        "benchmarks": {n: b["sha256"] for n, b in inputs["benchmarks"].items()},
        "parameters": curation_parameters(config),
        "code": code_version(CODE_PACKAGES),
    }
    return short_id("ds", hash_json(keyed))
