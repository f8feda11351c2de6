"""The `verify` flow: validate the code problems of the store's current dataset in Docker sandboxes on
Dask workers (reference solution against all tests; too few tests → `too_few_tests`, failing reference →
`invalid_tests`) and publish the resulting version with its `verifications` table."""
from __future__ import annotations

from prefect import flow

from storage.store import Store
from tasks.curation.prefect_tasks import publish_dataset_task, report_curation_task, validate_code_task


@flow(name="verify", log_prints=True)
def verify(store: str | None = None, min_tests: int = 16, workers: int = 2, dask_address: str | None = None,
           parent: str | None = None) -> dict:
    parent = parent or Store(store).current_version()
    if parent is None:
        raise ValueError(f"store {Store(store).root} has no curated dataset: run `klear curate` first")
    version = validate_code_task(store, parent, min_tests, workers, dask_address)
    publish_dataset_task(store, version["id"])
    report_curation_task(version, store)
    return version
