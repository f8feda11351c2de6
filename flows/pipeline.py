"""The end-to-end `pipeline` flow: curate → verify → SFT → tag difficulty → RL → evaluate (base, SFT and
RL on the same held-out benchmark). Every stage's output is content-addressed (tasks/pipeline/stages.py):
a second run with the same parameters recomputes nothing, a changed RL parameter reruns only RL and the
evaluations, and a killed run resumes from the finished stages (and from a stage's last checkpoint).
Each stage prints a line when it starts and when it ends (tasks/progress.py: StageLog)."""
from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_image_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from flows.curate import curate
from flows.verify import verify
from storage.keys import hash_file, hash_json
from storage.refs import DatasetRef
from storage.store import Store, resolve_store
from tasks.curation.config import CurateConfig
from tasks.curation.prefect_tasks import publish_dataset_task
from tasks.evaluation.difficulty import DifficultyConfig
from tasks.evaluation.evaluate import EvalConfig
from tasks.evaluation.prefect_tasks import evaluate_task, tag_difficulty_task
from tasks.pipeline.config import PipelineConfig
from tasks.pipeline.stages import base_model_dir, finished, rl_dir, sft_dir
from tasks.progress import StageLog
from tasks.training.prefect_tasks import png_data_url, rl_train_task, sft_train_task


@task(name="demo-data", cache_policy=NONE)
def demo_data_task(store: str, seed: int, scale: float = 1.0) -> tuple[dict, dict]:
    from tasks.curation.demo_data import write_demo_sources

    files = write_demo_sources(Path(Store(store).path("demo-data")), seed=seed, scale=scale)
    return ({k: str(v) for k, v in files.sources().items()}, {k: str(v) for k, v in files.benchmarks().items()})


def _base_dir(store: str, preset: str, seed: int, sources: dict[str, str]) -> Path:
    return base_model_dir(store, preset, seed, hash_json({n: hash_file(p) for n, p in sorted(sources.items())}))


@task(name="base-model", cache_policy=NONE)
def base_model_task(store: str, preset: str, seed: int, sources: dict[str, str]) -> str:
    """A random-init model whose tokenizer is trained on the sources' text; content-addressed."""
    from storage.checkpoints import describe_checkpoint
    from tasks.models.corpus import source_texts
    from tasks.models.factory import init_model

    out = _base_dir(store, preset, seed, sources)
    if finished(out):
        return str(out)
    init_model(out, source_texts(sources.values()), preset=preset, seed=seed)
    row = describe_checkpoint(out, "base", None, None, {"preset": preset, "seed": seed})
    Store(store).catalog.insert_once("checkpoints", row)
    return str(out)


def planned_stages(config: PipelineConfig) -> int:
    """How many stages `pipeline` reports (for "stage i/n"): [demo-data] curate verify [base-model] sft
    [tag-difficulty] rl eval-base eval-sft eval-rl."""
    return 7 + int(config.demo) + int(not config.base_model) + int(bool(config.difficulty_k))


@flow(name="pipeline", log_prints=True)
def pipeline(config: PipelineConfig = PipelineConfig(), store: str | None = None) -> dict:
    """curate → verify → SFT → difficulty tags → RL → evaluate base/SFT/RL, each stage content-addressed.
    Each stage prints a line as it starts and one as it ends: cached or computed, seconds, headline figure.

    `store` overrides `config.store`, so a deployment run takes `--param store=DIR` alone."""
    log = get_run_logger()
    store = resolve_store(store or config.store)
    stages = StageLog(planned_stages(config), also=log.info)
    if config.demo:
        with stages.stage("demo-data") as st:
            sources, benchmarks = demo_data_task(store, config.seed, config.demo_scale)
            st.figure = f"{len(sources)} sources, {len(benchmarks)} benchmarks"
    else:
        sources, benchmarks = config.sources, config.benchmarks
    if not sources:
        raise ValueError("pipeline: no sources (set demo=True or give sources)")

    with stages.stage("curate") as st:
        since = _now()
        curated = curate(CurateConfig(sources=[{"name": n, "path": p} for n, p in sources.items()],
                                      benchmarks=benchmarks, store=store, seed=config.seed))
        st.cached, st.figure = _made_before(curated, since), _rows_kept(curated)
    with stages.stage("verify") as st:
        since = _now()
        verified = verify(store=store, min_tests=config.min_tests, parent=curated["id"])
        st.cached = _made_before(verified, since)
        st.figure = (f"{_rows_kept(verified)}, {curated['counts'].get('kept', 0) - verified['counts'].get('kept', 0)}"
                     " code problems dropped")
    dataset = verified["id"]

    base = config.base_model
    if not base:
        with stages.stage("base-model") as st:
            st.cached = finished(_base_dir(store, config.model_preset, config.seed, sources))
            base = base_model_task(store, config.model_preset, config.seed, sources)
            st.figure = f"{config.model_preset} preset"
    sft_out = sft_dir(store, base, dataset, config.sft)
    with stages.stage("sft") as st:
        st.cached = finished(sft_out)
        if not st.cached:
            sft_train_task(base, str(DatasetRef(store, dataset)), str(sft_out), config.sft, True, store,
                           config.sft_nproc)
        st.figure = _last_metric(sft_out, "loss", "final loss {:.4f}")
    log.info("SFT checkpoint: %s", sft_out)

    rl_data = dataset
    if config.difficulty_k:
        with stages.stage("tag-difficulty") as st:
            since = _now()
            tagged = tag_difficulty_task(store, str(sft_out), DifficultyConfig(k=config.difficulty_k, seed=config.seed,
                                                                               max_tokens=config.eval_max_tokens),
                                         parent=dataset)
            publish_dataset_task(store, tagged["id"])
            st.cached, st.figure = _made_before(tagged, since), _difficulty_counts(store, tagged["id"])
        rl_data = tagged["id"]
    rl_out = rl_dir(store, str(sft_out), rl_data, config.rl)
    with stages.stage("rl") as st:
        st.cached = finished(rl_out)
        if not st.cached:
            rl_train_task(str(sft_out), str(DatasetRef(store, rl_data)), str(rl_out), config.rl, True, store)
        st.figure = _last_metric(rl_out, "reward_mean", "final reward {:.3f}")
    log.info("RL checkpoint: %s", rl_out)

    if config.eval_benchmark not in benchmarks:
        raise ValueError(f"pipeline: eval_benchmark {config.eval_benchmark!r} is not one of {sorted(benchmarks)}")
    ecfg = EvalConfig(k=config.eval_k, seed=config.seed, max_tokens=config.eval_max_tokens, backend="auto")
    bench = benchmarks[config.eval_benchmark]
    results = {}
    for stage, path in (("base", base), ("sft", sft_out), ("rl", rl_out)):
        with stages.stage(f"eval-{stage}") as st:
            results[stage], st.cached = evaluate_cached(str(path), config.eval_benchmark, bench, ecfg, store)
            st.figure = f"{config.eval_benchmark} avg@{config.eval_k} {results[stage]['avg_at_k']:.3f}"
    summary = {"store": store, "dataset": dataset, "rl_dataset": rl_data, "base": str(base), "sft": str(sft_out),
               "rl": str(rl_out), "benchmark": config.eval_benchmark, "k": config.eval_k,
               **{f"{s}_avg_at_k": r["avg_at_k"] for s, r in results.items()}}
    report_pipeline(summary, results)
    return summary


def evaluate_cached(model: str, name: str, path: str, cfg: EvalConfig, store: str) -> tuple[dict, bool]:
    """The evaluation's catalog row, and whether it was found there (True) or computed now (False)."""
    from tasks.evaluation.record import evaluation_id, find_evaluation

    row = find_evaluation(store, evaluation_id(model, path, cfg))
    return (row, True) if row else (evaluate_task(model, name, path, cfg, store), False)


# -- headline figures of the stages ------------------------------------------------------------

def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _made_before(version: dict, since: datetime) -> bool:
    """A dataset version created before the stage started was found, not computed (`created` has
    whole seconds, so `since` is truncated to the second too)."""
    try:
        return datetime.fromisoformat(version["created"]) < since
    except (KeyError, TypeError, ValueError):
        return False


def _rows_kept(version: dict) -> str:
    return f"{version['counts'].get('kept', 0)} of {version['rows_in']} rows kept"


def _last_metric(out: Path, key: str, fmt: str) -> str:
    from tasks.training.metrics import read_metrics

    try:
        rows = [r for r in read_metrics(Path(out)) if key in r]
    except ValueError:  # an unreadable metrics file never fails the pipeline: it only loses the figure
        return ""
    return f"{rows[-1]['step']} steps, " + fmt.format(rows[-1][key]) if rows else ""


def _difficulty_counts(store: str, version_id: str) -> str:
    tags = Store(store).read_table(version_id, "problems").column("difficulty").to_pylist()
    order = ("easy", "medium", "hard", "unsolved")
    counts = {t: tags.count(t) for t in order + tuple(sorted({t for t in tags if t not in order}, key=str))}
    return ", ".join(f"{t} {n}" for t, n in counts.items() if n)


def report_pipeline(summary: dict, results: dict) -> None:
    from tasks.training.metrics import plot_bars

    table = [{"stage": s, "checkpoint": r["checkpoint"], "avg_at_k": round(r["avg_at_k"], 4),
              "pass_at_k": round(r["pass_at_k"], 4), "n_problems": r["n_problems"]} for s, r in results.items()]
    create_table_artifact(key="pipeline-comparison", table=table,
                          description=f"{summary['benchmark']}: avg@{summary['k']} of base / SFT / RL")
    png = plot_bars({s: r["avg_at_k"] for s, r in results.items()}, Path(tempfile.mkdtemp()) / "cmp.png",
                    f"{summary['benchmark']} avg@{summary['k']}")
    create_image_artifact(image_url=png_data_url(png), key="pipeline-comparison-chart",
                          description="held-out avg@k by stage")
    create_markdown_artifact(key="pipeline-report", markdown=(
        "# Pipeline\n\n" + "".join(f"- {k}: `{v}`\n" for k, v in summary.items()) +
        f"\nCatalog: `{Store(summary['store']).catalog_path}`\n"))
