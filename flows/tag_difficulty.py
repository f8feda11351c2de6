"""The `tag-difficulty` flow: pass rates of a model on the store's current problems → a tagged version.
`nproc` N samples in N worker processes with exactly the one-process tags (tasks/evaluation/difficulty.py)."""
from __future__ import annotations

from prefect import flow

from tasks.curation.prefect_tasks import publish_dataset_task
from tasks.evaluation.difficulty import DifficultyConfig
from tasks.evaluation.prefect_tasks import tag_difficulty_task


@flow(name="tag-difficulty", log_prints=True)
def tag_difficulty(model: str, store: str | None = None, config: DifficultyConfig = DifficultyConfig(),
                   parent: str | None = None, nproc: int = 1) -> dict:
    version = tag_difficulty_task(store, model, config, parent, nproc)
    publish_dataset_task(store, version["id"])
    return version
