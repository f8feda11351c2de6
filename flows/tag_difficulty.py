"""The `tag-difficulty` flow: pass rates of a model on the store's current problems → a tagged version.
`nproc` N samples in N worker processes with exactly the one-process tags (tasks/evaluation/difficulty.py)."""
from __future__ import annotations

from typing import Annotated

from prefect import flow

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures, short_name
from tasks.curation.prefect_tasks import publish_dataset_task
from tasks.evaluation.difficulty import DifficultyConfig
from tasks.evaluation.prefect_tasks import tag_difficulty_task


@flow(name="tag-difficulty", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("tag-difficulty", lambda param: short_name(param("model"))))
@one_line_failures
def tag_difficulty(model: str, store: str | None = None,
                   config: Annotated[DifficultyConfig, ConfigForm(DifficultyConfig)] = DifficultyConfig(),
                   parent: str | None = None, nproc: int = 1) -> dict:
    """Tag each problem of dataset version `parent` easy / medium / hard / unsolved by the pass rate of
    `model`'s samples, as a new version published as the store's current one.

    Args:
        model: HF model directory whose samples are graded (the paper: the SFT model)
        store: store directory (default: $KLEAR_STORE or ./klear-store)
        config: samples per problem, the tag thresholds and sampling settings (`klear tag-difficulty`'s flags)
        parent: the dataset version to tag (default: the store's current one)
        nproc: worker processes that share the problems (one GPU each, or a share of the CPU cores)
    """
    version = tag_difficulty_task(store, model, config, parent, nproc)
    publish_dataset_task(store, version["id"])
    return version
