"""Build (or find) the content-addressed dataset version for a curation config, in a store."""
from __future__ import annotations

from typing import Any, Callable

from storage.store import DatasetVersion, Store
from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate
from tasks.curation.versioning import curation_inputs, curation_parameters, curation_version_id


def plan_curation(config: CurateConfig) -> tuple[str, dict[str, Any]]:
    """(version id, input descriptions with content hashes) — cheap: hashes files, reads no rows."""
    inputs = curation_inputs(config)
    return curation_version_id(config, inputs), inputs


def build_curated_version(config: CurateConfig, version_id: str, inputs: dict[str, Any],
                          progress: Callable[[str], None] = lambda m: None) -> DatasetVersion:
    """Run the pipeline and write the version, unless the store already holds it (then nothing runs)."""
    store = Store(config.store)
    if store.has_version(version_id):
        return store.load_version(version_id)
    result = curate(config, progress)
    version = DatasetVersion(
        id=version_id, kind="curate", parameters=curation_parameters(config), counts=result.counts,
        rows_in=result.rows_in, parents=[],
        inputs={**inputs, "by_source": result.by_source, "source_scores": result.source_scores},
    )
    return store.write_version(version, {"problems": result.problems, "dropped": result.dropped})
