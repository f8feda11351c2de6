"""The `verify` flow: validate the code problems of the store's current dataset in Docker sandboxes on
Dask workers (reference solution against all tests; too few tests → `too_few_tests`, failing reference →
`invalid_tests`; tests that accept mutants of the reference which behave differently → `weak_tests`,
dropped or tagged as `test_strength` says) and publish the resulting version with its `verifications`
table. With no `dask_address`, $KLEAR_DASK_ADDRESS names the cluster (a worker in the compose stack
points it at its scheduler)."""
from __future__ import annotations

import os

from prefect import flow

from storage.store import Store
from tasks.curation.prefect_tasks import publish_dataset_task, report_curation_task
from tasks.verification.prefect_tasks import validate_code_task
from tasks.verification.strength import StrengthConfig


@flow(name="verify", log_prints=True)
def verify(store: str | None = None, min_tests: int = 16, workers: int = 2, dask_address: str | None = None,
           parent: str | None = None, test_strength: StrengthConfig = StrengthConfig()) -> dict:
    dask_address = dask_address or os.environ.get("KLEAR_DASK_ADDRESS") or None
    parent = parent or Store(store).current_version()
    if parent is None:
        raise ValueError(f"store {Store(store).root} has no curated dataset: run `klear curate` first")
    version = validate_code_task(store, parent, min_tests, workers, dask_address, test_strength)
    publish_dataset_task(store, version["id"])
    report_curation_task(version, store)
    return version
