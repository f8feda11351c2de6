"""Thin Prefect wrappers for evaluation and difficulty tags: progress lines in the run log and a progress
artifact while they sample (tasks/prefect_tasks.py), then the catalog record and table/image artifacts."""
from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from prefect import task
from prefect.artifacts import create_image_artifact, create_table_artifact
from prefect.cache_policies import NONE

from storage.store import Store
from tasks.evaluation.difficulty import build_difficulty_version
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.evaluation.record import record_evaluation
from tasks.prefect_tasks import progress_feed
from tasks.reporting import plot_bars, png_data_url


@task(name="evaluate", cache_policy=NONE)
def evaluate_task(model: str, name: str, path: str, config: EvalConfig, store: str | None, nproc: int = 1) -> dict:
    feed = progress_feed(f"eval-{name}-progress", f"{name}: {config.k} samples per problem of {model}"
                         + (f" in {nproc} processes" if nproc > 1 else ""))
    result = evaluate(model, name, path, config, feed=feed, nproc=nproc)
    row = record_evaluation(model, result, config, store)
    create_table_artifact(key=f"eval-{name.lower().replace('_', '-')}", table=[row],
                          description=f"{name}: avg@{config.k} and pass@{config.k}")
    return row


@task(name="tag-difficulty", cache_policy=NONE)
def tag_difficulty_task(store: str | None, model: str, config, parent: str | None = None, nproc: int = 1) -> dict:
    feed = progress_feed("difficulty-progress", f"difficulty tags by {config.k} samples of {model}"
                         + (f" in {nproc} processes" if nproc > 1 else ""))
    version = build_difficulty_version(store, model, config, parent, feed=feed, nproc=nproc)
    table = Store(store).read_table(version.id, "problems")
    counts: dict[str, int] = {}
    for d in table.column("difficulty").to_pylist():
        counts[d] = counts.get(d, 0) + 1
    order = [t for t in ("easy", "medium", "hard", "unsolved", "unknown") if t in counts]
    png = plot_bars({t: counts[t] for t in order}, Path(tempfile.mkdtemp()) / "difficulty.png",
                    f"difficulty by {config.k} samples of {version.parameters['model']}")
    create_image_artifact(image_url=png_data_url(png), key="difficulty-histogram",
                          description=f"Difficulty tags of {version.id}")
    create_table_artifact(key="difficulty-counts", table=[{"difficulty": t, "problems": counts[t]} for t in order])
    return asdict(version)
