"""Prefect glue shared by the stage wrappers: progress lines into the run's log and a progress artifact, and
artifact keys named by the stage that made them."""
from __future__ import annotations

import re
from typing import Callable

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact


def artifact_key(text: str) -> str:
    """An artifact key from any text: lowercase letters, digits and dashes (Prefect's rule)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "progress"


def progress_feed(key: str, description: str) -> Callable[[str], None]:
    """A `feed` for tasks.progress.StepProgress, which calls it at most every few seconds: each line goes to
    the run log at INFO (the UI's log for the flow run) and sets the progress artifact `key` to the line's
    fraction, with the line in its description. The artifact is made at the first line, so a stage that
    finds its result already made leaves none. Make the feed inside the task run it reports on."""
    logger = get_run_logger()
    artifact = None

    def feed(line: str) -> None:
        nonlocal artifact
        logger.info("%s", line)
        fraction = getattr(line, "fraction", None)
        if fraction is None:
            return
        percent, text = round(100.0 * fraction, 1), f"{description}: {line}"
        if artifact is None:
            artifact = create_progress_artifact(progress=percent, key=artifact_key(key), description=text)
        else:
            update_progress_artifact(artifact, progress=percent, description=text)

    return feed


def run_artifact_key(what: str = "") -> str:
    """An artifact key made from the current task run's name and `what`: `rl-code` + `reward-curve` →
    `rl-code-reward-curve`. A stage task is named by its stage (the pipeline's `eval-base`, `rl-code`), so
    the pipeline's three evaluations or two RL stages leave artifacts that say which is which."""
    from prefect import runtime

    return artifact_key(f"{runtime.task_run.name or 'run'} {what}")

