"""The `curate` flow: sources → canonical rows → cutoff date → dedup → near-dedup → decontamination
(statements and code tests) → dataset version. Every parameter travels in the one CurateConfig."""
from __future__ import annotations

from typing import Annotated

from prefect import flow

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures
from storage.store import Store
from tasks.curation.config import CurateConfig
from tasks.curation.prefect_tasks import (curate_dataset_task, plan_curation_task, publish_dataset_task,
                                          report_curation_task)
from tasks.curation.source_fields import check_sources


def _sources(param) -> str:
    """`math_chain+math_qa+code`: the sources' names, in their priority order."""
    return "+".join(s["name"] if isinstance(s, dict) else s.name for s in param("config.sources", []))


@flow(name="curate", log_prints=True, validate_parameters=False, flow_run_name=flow_run_namer("curate", _sources))
@one_line_failures
def curate(config: Annotated[CurateConfig, ConfigForm(CurateConfig)]) -> dict:
    """Curate the sources into a content-addressed dataset version and publish it in the catalog.

    Re-running with the same inputs and parameters finds the version (Prefect cache, then the store)
    and changes nothing.

    Args:
        config: the sources (in priority order), the benchmarks to decontaminate against, and each step's
            setting (`klear curate`'s flags)
    """
    version_id, inputs = plan_curation_task(config)
    missing = not Store(config.store).has_version(version_id)
    if missing:  # an empty source, a field map no row matches: one line, before any work (a stored version passed)
        check_sources(config.sources)
    version = curate_dataset_task.with_options(refresh_cache=missing)(config, version_id, inputs)
    publish_dataset_task(config.store, version_id)
    report_curation_task(version, config.store)
    return version
