"""Thin Prefect task wrappers around the pure curation steps (the only Prefect code in tasks/curation)."""
from __future__ import annotations

from dataclasses import asdict

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from storage.store import DatasetVersion, Store
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.prefect_tasks import progress_feed


@task(name="plan-curation", cache_policy=NONE)
def plan_curation_task(config: CurateConfig) -> tuple[str, dict]:
    return plan_curation(config)


def _version_key(context, parameters) -> str:
    # The version id already hashes input content, parameters and code; the store root is added so a
    # cached result is never reused for a different store.
    return f"curate-{parameters['version_id']}-{Store(parameters['config'].store).root}"


@task(name="curate-dataset", cache_key_fn=_version_key, persist_result=True, retries=0)
def curate_dataset_task(config: CurateConfig, version_id: str, inputs: dict) -> dict:
    feed = progress_feed("curation-progress", f"curating {version_id}")  # lines of every step, throttled
    return asdict(build_curated_version(config, version_id, inputs, feed=feed))


@task(name="publish-dataset", cache_policy=NONE)
def publish_dataset_task(store_root: str | None, version_id: str) -> bool:
    return Store(store_root).publish(version_id)


@task(name="report-curation", cache_policy=NONE)
def report_curation_task(version: dict, store_root: str | None) -> None:
    v = DatasetVersion(**version)
    by_source = v.inputs.get("by_source", {})
    scores = v.inputs.get("source_scores", {})
    rows = [{"source": s, "score": round(scores.get(s, 0.0), 3), **c} for s, c in by_source.items()]
    rows.append({"source": "TOTAL", "score": None, "rows_in": v.rows_in, **v.counts})
    create_table_artifact(key="curation-counts", table=rows,
                          description=f"Curation {v.id}: rows in = kept + dropped, by source and reason")
    store = Store(store_root)
    create_markdown_artifact(key="curation-report", markdown=(
        f"# Curated dataset `{v.id}`\n\n"
        f"- rows in: **{v.rows_in}**, kept: **{v.rows_kept}**, dropped: **{v.rows_dropped}**\n"
        + "".join(f"- {k}: {n}\n" for k, n in v.counts.items() if k != "kept")
        + f"\nCatalog: `{store.catalog_path}` (views `problems`, `dropped`; table `datasets`)\n"
    ))
