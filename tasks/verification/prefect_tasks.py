"""Thin Prefect task wrapper around the verify stage (verify_dataset.py): progress lines in the run log and
a progress artifact while the sandbox validates (tasks/prefect_tasks.py)."""
from __future__ import annotations

from dataclasses import asdict

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from tasks.prefect_tasks import progress_feed
from tasks.verification.verify import VerifyConfig
from tasks.verification.verify_dataset import build_validated_version


@task(name="validate-code", task_run_name="validate-code", cache_policy=NONE)
def validate_code_task(store_root: str | None, parent: str, min_tests: int, workers: int = 2,
                       dask_address: str | None = None, strength=None) -> dict:
    logger = get_run_logger()
    cfg = VerifyConfig(workers=workers, dask_address=dask_address)
    version = build_validated_version(store_root, parent, min_tests, cfg, strength=strength,
                                      feed=progress_feed("verify-progress", f"validating code problems of {parent}"))
    logger.info("validated %s → %s: %s", parent, version.id, version.counts)
    return asdict(version)
