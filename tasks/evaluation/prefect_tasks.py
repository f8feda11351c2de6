"""Thin Prefect wrappers for evaluation and difficulty tags: progress lines in the run log and a progress
artifact while they sample (tasks/prefect_tasks.py), then the catalog record and table/image artifacts."""
from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from storage.store import Store
from tasks.evaluation.difficulty import build_difficulty_version
from tasks.evaluation.evaluate import EvalConfig, evaluate
from tasks.evaluation.record import record_evaluation
from tasks.prefect_tasks import progress_feed, run_artifact_key
from tasks.reporting import chart_markdown, plot_bars

EVAL_COLUMNS = ("model", "checkpoint", "benchmark", "k", "avg_at_k", "pass_at_k", "n_problems", "infra")


@task(name="evaluate", task_run_name="eval-{name}", cache_policy=NONE)
def evaluate_task(model: str, name: str, path: str, config: EvalConfig, store: str | None, nproc: int = 1) -> dict:
    """Sample and grade `model` on benchmark `name`; its catalog row. Its artifacts are keyed by the task
    run's name: `eval-NAME` here, the stage's (`eval-base`, `eval-sft`, `eval-rl`) in the pipeline."""
    feed = progress_feed(run_artifact_key("progress"), f"{name}: {config.k} samples per problem of {model}"
                         + (f" in {nproc} processes" if nproc > 1 else ""))
    result = evaluate(model, name, path, config, feed=feed, nproc=nproc)
    row = record_evaluation(model, result, config, store)
    shown = {"model": Path(model).name, **row}  # the directory says which (base-…, sft-…, rl-…); the id does not
    create_table_artifact(key=run_artifact_key(), table=[{c: shown.get(c) for c in EVAL_COLUMNS}],
                          description=f"{name}: avg@{config.k} and pass@{config.k} of `{Path(model).name}` "
                                      f"(checkpoint `{row['checkpoint']}`), {row['n_problems']} problems")
    return row


@task(name="tag-difficulty", task_run_name="tag-difficulty", cache_policy=NONE)
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
    alt = "problems by difficulty: " + ", ".join(f"{t} {counts[t]}" for t in order)
    create_markdown_artifact(key="difficulty-histogram", markdown=chart_markdown(png, alt),
                             description=f"Difficulty tags of `{version.id}` by {config.k} samples per problem")
    create_table_artifact(key="difficulty-counts", table=[{"difficulty": t, "problems": counts[t]} for t in order],
                          description=f"Problems of `{version.id}` by difficulty tag (pass rate of {config.k} "
                                      f"samples: hard below {config.hard_below}, easy from {config.easy_from})")
    return asdict(version)
