"""The `tag-difficulty` flow: pass rates of a model on the store's current problems → a tagged version."""
from __future__ import annotations

from prefect import flow

from tasks.curation.prefect_tasks import publish_dataset_task
from tasks.evaluation.difficulty import DifficultyConfig
from tasks.evaluation.prefect_tasks import tag_difficulty_task


@flow(name="tag-difficulty", log_prints=True)
def tag_difficulty(model: str, store: str | None = None, config: DifficultyConfig = DifficultyConfig(),
                   parent: str | None = None) -> dict:
    version = tag_difficulty_task(store, model, config, parent)
    publish_dataset_task(store, version["id"])
    return version
