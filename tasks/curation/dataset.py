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
    if config.memory_limit or config.dask:
        return _build_out_of_core(config, version_id, inputs, progress)
    result = curate(config, progress)
    return store.write_version(_version(config, version_id, inputs, result),
                               {"problems": result.problems, "dropped": result.dropped})


def _version(config: CurateConfig, version_id: str, inputs: dict[str, Any], result) -> DatasetVersion:
    """The manifest of a curation result (in memory or out of core: the same fields)."""
    return DatasetVersion(
        id=version_id, kind="curate", parameters=curation_parameters(config), counts=result.counts,
        rows_in=result.rows_in, parents=[],
        inputs={**inputs, "by_source": result.by_source, "source_scores": result.source_scores,
                **({} if result.undated_kept is None else {"undated_kept": result.undated_kept})},
    )


def _build_out_of_core(config: CurateConfig, version_id: str, inputs: dict[str, Any],
                       progress: Callable[[str], None]) -> DatasetVersion:
    """The same version, computed with rows on disk (and per-part work on Dask with `config.dask`)."""
    from tasks.curation import out_of_core as oc
    from tasks.curation.pipeline_out_of_core import curate_out_of_core

    ooc = oc.OutOfCoreConfig(memory_limit=config.memory_limit or oc.OutOfCoreConfig.memory_limit,
                             work_dir=config.work_dir)
    with oc.part_runner(config.dask, config.dask_workers) as runner, oc.Workspace(ooc) as ws:
        result = curate_out_of_core(config, ws, runner, progress)
        return Store(config.store).write_version(_version(config, version_id, inputs, result),
                                                 {"problems": result.problems, "dropped": result.dropped})
