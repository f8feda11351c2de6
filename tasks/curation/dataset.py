"""Build (or find) the content-addressed dataset version for a curation config, in a store."""
from __future__ import annotations

from typing import Any

from storage.store import DatasetVersion, Store
from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import open_run, run_pipeline
from tasks.curation.versioning import curation_inputs, curation_parameters, curation_version_id
from tasks.progress import Feed


def plan_curation(config: CurateConfig) -> tuple[str, dict[str, Any]]:
    """(version id, input descriptions with content hashes) — cheap: hashes files, reads no rows."""
    inputs = curation_inputs(config)
    return curation_version_id(config, inputs), inputs


def build_curated_version(config: CurateConfig, version_id: str, inputs: dict[str, Any],
                          feed: Feed | None = None) -> DatasetVersion:
    """Run the pipeline and write the version, unless the store already holds it (then nothing runs). The
    run stays within `config.memory_limit`, or, when that is None, a limit chosen from the machine's memory
    (memory.py); the tables go from the run's directory to the store without passing through memory.
    `feed` gets the run's progress lines (a Prefect run log)."""
    store = Store(config.store)
    if store.has_version(version_id):
        return store.load_version(version_id)
    with open_run(config, feed) as (ws, runner):
        result = run_pipeline(config, ws, runner, feed)
        return store.write_version(_version(config, version_id, inputs, result),
                                   {"problems": result.problems, "dropped": result.dropped})


def _version(config: CurateConfig, version_id: str, inputs: dict[str, Any], result) -> DatasetVersion:
    """The manifest of a curation result."""
    return DatasetVersion(
        id=version_id, kind="curate", parameters=curation_parameters(config), counts=result.counts,
        rows_in=result.rows_in, parents=[],
        inputs={**inputs, "by_source": result.by_source, "source_scores": result.source_scores,
                **({} if result.undated_kept is None else {"undated_kept": result.undated_kept})},
    )
