"""The `verify` flow: validate the code problems of the store's current dataset in Docker sandboxes on
Dask workers (reference solution against all tests; too few tests → `too_few_tests`, failing reference →
`invalid_tests`; tests that accept mutants of the reference which behave differently → `weak_tests`,
dropped or tagged as `test_strength` says) and publish the resulting version with its `verifications`
table. With no `dask_address`, $KLEAR_DASK_ADDRESS names the cluster (a worker in the compose stack
points it at its scheduler)."""
from __future__ import annotations

import os
from typing import Annotated

from prefect import flow

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures
from storage.store import Store
from tasks.curation.prefect_tasks import publish_dataset_task, report_curation_task
from tasks.verification.prefect_tasks import validate_code_task
from tasks.verification.strength import StrengthConfig


@flow(name="verify", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("verify", lambda param: param("parent") or "current"))
@one_line_failures
def verify(store: str | None = None, min_tests: int = 16, workers: int = 2, dask_address: str | None = None,
           parent: str | None = None,
           test_strength: Annotated[StrengthConfig, ConfigForm(StrengthConfig)] = StrengthConfig()) -> dict:
    """Verify the code problems of dataset version `parent` and publish the verified version.

    Args:
        store: store directory (default: $KLEAR_STORE or ./klear-store)
        min_tests: code problems with fewer tests are dropped (`too_few_tests`; paper: 16)
        workers: sandbox workers of the local Dask cluster (without `dask_address`)
        dask_address: a Dask scheduler to run the sandboxes on (default: $KLEAR_DASK_ADDRESS, else local)
        parent: the dataset version to verify (default: the store's current one)
        test_strength: mutants of each passing reference; problems whose tests accept wrong programs are
            dropped or tagged (`weak_tests`)
    """
    dask_address = dask_address or os.environ.get("KLEAR_DASK_ADDRESS") or None
    parent = parent or Store(store).current_version()
    if parent is None:
        raise ValueError(f"store {Store(store).root} has no curated dataset: run `klear curate` first")
    version = validate_code_task(store, parent, min_tests, workers, dask_address, test_strength)
    publish_dataset_task(store, version["id"])
    report_curation_task(version, store, "verification")
    return version
