"""Content address of a curation run: the dataset version id is a hash of
(every source's spec + content hash, every benchmark's content hash, the parameters, CURATION_RULES),
so re-running the same command on the same inputs yields the same id and recomputes nothing, while a
changed file, parameter or rule yields a new version.

Why a declared rules version rather than a hash of the code: a refactor that keeps every row's fate and
content keeps every version id, so the stages keyed on a version (verify, SFT, RL) stay cached, while a
change of output must say so by bumping CURATION_RULES. tests/curation/test_rules_version.py curates the
demo data and a fixture that exercises every drop reason and pins the version id and a hash of the output:
a change in output without a bump fails there.
"""
from __future__ import annotations

from typing import Any

from storage.keys import hash_file, hash_json, short_id
from tasks.curation.config import CurateConfig
from tasks.records.sources import SourceError, hf_content_hash, source_kind

# Bump when a change to curation, its reader (tasks.records), the math grading it validates answers with
# or the store changes which rows are kept, their content, order or drop reasons (module docstring).
CURATION_RULES = "2026-12-06.1"
EXECUTION_FIELDS = ("memory_limit", "dask", "dask_workers", "work_dir")  # how a version is computed, not what


def input_hash(path: str) -> str:
    """Content hash of a source: its file's bytes; for hf: sources the loaded data's (sources.hf_content_hash),
    since the same name can hold other data tomorrow."""
    if source_kind(path) == "hf":
        return hf_content_hash(path)
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
        "rules": CURATION_RULES,
    }
    return short_id("ds", hash_json(keyed))
