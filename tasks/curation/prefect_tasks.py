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


@task(name="plan-curation", task_run_name="plan-curation", cache_policy=NONE)
def plan_curation_task(config: CurateConfig) -> tuple[str, dict]:
    return plan_curation(config)


def _version_key(context, parameters) -> str:
    # The version id already hashes input content, parameters and code; the store root is added so a
    # cached result is never reused for a different store.
    return f"curate-{parameters['version_id']}-{Store(parameters['config'].store).root}"


@task(name="curate-dataset", task_run_name="curate-dataset", cache_key_fn=_version_key, persist_result=True, retries=0)
def curate_dataset_task(config: CurateConfig, version_id: str, inputs: dict) -> dict:
    feed = progress_feed("curation-progress", f"curating {version_id}")  # lines of every step, throttled
    return asdict(build_curated_version(config, version_id, inputs, feed=feed))


@task(name="publish-dataset", task_run_name="publish-{version_id}", cache_policy=NONE)
def publish_dataset_task(store_root: str | None, version_id: str) -> bool:
    return Store(store_root).publish(version_id)


@task(name="report-curation", task_run_name="report-{label}", cache_policy=NONE)
def report_curation_task(version: dict, store_root: str | None, label: str = "curation") -> None:
    curation_artifacts(version, store_root, label)


def curation_artifacts(version: dict, store_root: str | None, label: str = "curation") -> None:
    """The version's count table (`LABEL-counts`) and report (`LABEL-report`) as artifacts of the current
    run: the curate flow's (label `curation`), the verify flow's (`verification`), and the pipeline's own
    (so its run page shows them, not only its subflows')."""
    v = DatasetVersion(**version)
    create_table_artifact(key=f"{label}-counts", table=count_rows(v),
                          description=f"Rows in = kept + dropped, by source and drop reason: {label} `{v.id}`")
    store = Store(store_root)
    create_markdown_artifact(key=f"{label}-report", description=f"Totals and where the rows are: {label} `{v.id}`",
                             markdown=(
        f"# {label.capitalize()} `{v.id}`\n\n"
        f"- rows in: **{v.rows_in}**, kept: **{v.rows_kept}**, dropped: **{v.rows_dropped}**\n"
        + "".join(f"- {k}: {v.counts[k]}\n" for k in reasons_of(v.counts))
        + f"\nCatalog: `{store.catalog_path}` (views `problems`, `dropped`; table `datasets`)\n"
    ))


def reasons_of(counts: dict) -> list[str]:
    """The drop reasons counted, in `klear curate`'s column order (the pipeline's order, then others by name)."""
    from tasks.curation.pipeline import ALL_REASONS

    return [r for r in ALL_REASONS if r in counts] + sorted(k for k in counts if k != "kept" and k not in ALL_REASONS)


def count_rows(v: DatasetVersion) -> list[dict]:
    """One row per source and a TOTAL, columns as `klear curate` prints them (source, score, rows in, kept,
    then each reason that dropped a row: a column of zeros would only push the others out of the UI's
    window), a count the source never had as 0, not a blank cell."""
    reasons = [r for r in reasons_of(v.counts) if v.counts[r]]
    scores = v.inputs.get("source_scores", {})

    def row(source: str, score, rows_in: int, counts: dict) -> dict:
        return {"source": source, "score": score, "rows_in": rows_in, "kept": counts.get("kept", 0),
                **{r: counts.get(r, 0) for r in reasons}}

    by_source = v.inputs.get("by_source", {})
    return ([row(s, round(scores.get(s, 0.0), 3), c.get("rows_in", 0), c) for s, c in by_source.items()]
            + [row("TOTAL", None, v.rows_in, v.counts)])
