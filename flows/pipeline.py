"""The end-to-end `pipeline` flow: curate → verify → SFT → tag difficulty → RL → evaluate (base, SFT and
RL on the same held-out benchmark). Every stage's output is content-addressed (tasks/pipeline/stages.py):
a second run with the same parameters recomputes nothing, a changed RL parameter reruns only RL and the
evaluations, and a killed run resumes from the finished stages (and from a stage's last checkpoint).
Each stage prints a line when it starts and when it ends (tasks/progress.py: StageLog).

With `config.gpu_pool` the training and generation stages (SFT, difficulty tags, RL, the evaluations) run
as deployment runs (`run_deployment`, prefect.yaml's `*/default` on the klear-gpu work pool) that show as
child runs of the pipeline run; curation, verification and the base model run where the pipeline runs.
Only store references cross: dataset versions (`STORE#VERSION`) and checkpoint directories in the store.
The pipeline computes each stage's content address itself and looks for the finished output first, so
a rerun starts no child run at all; a child that ends other than Completed fails the pipeline with one
line naming the stage and the child run."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Iterator

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from flows.curate import curate
from flows.prefect_ui import WHERE_NOTE, ConfigForm, flow_run_namer, one_line_failures
from flows.verify import verify
from storage.checkpoints import recorded_checkpoint_id
from storage.refs import DatasetRef
from storage.store import Store, resolve_store
from tasks.curation.config import CurateConfig
from tasks.curation.prefect_tasks import curation_artifacts, publish_dataset_task
from tasks.evaluation.difficulty import DifficultyConfig, difficulty_version_id
from tasks.evaluation.evaluate import EvalConfig
from tasks.evaluation.prefect_tasks import evaluate_task, tag_difficulty_task
from tasks.pipeline.config import PipelineConfig, source_spec
from tasks.pipeline.data_alarms import (layout_alarms, lost_source_alarms, math_answers_by_source,
                                        unanswered_math_alarms)
from tasks.models.pretrained import fetchable, fetched_path
from tasks.pipeline.stages import base_model_dir, finished, rl_dir, sft_dir
from tasks.progress import Stage, StageLog
from tasks.reporting import chart_markdown
from tasks.training.prefect_tasks import rl_train_task, sft_train_task


@task(name="demo-data", task_run_name="demo-data", cache_policy=NONE)
def demo_data_task(store: str, seed: int, scale: float = 1.0) -> tuple[dict, dict]:
    from tasks.curation.demo_data import write_demo_sources

    files = write_demo_sources(Path(Store(store).path("demo-data")), seed=seed, scale=scale)
    return ({k: str(v) for k, v in files.sources().items()}, {k: str(v) for k, v in files.benchmarks().items()})


def _base_dir(store: str, preset: str, seed: int, dataset: str) -> Path:
    return base_model_dir(store, preset, seed, dataset)  # a dataset version's id is the hash of its content


@task(name="base-model", task_run_name="base-model", cache_policy=NONE)
def base_model_task(store: str, preset: str, seed: int, dataset: str) -> str:
    """A random-init model whose tokenizer is trained on the text of the dataset SFT and RL train on (the rows
    curation and verification kept: tasks/models/corpus.dataset_texts); content-addressed."""
    from storage.checkpoints import describe_checkpoint
    from tasks.models.corpus import dataset_texts
    from tasks.models.factory import init_model

    out = _base_dir(store, preset, seed, dataset)
    if finished(out):
        return str(out)
    init_model(out, dataset_texts(store, dataset), preset=preset, seed=seed)
    row = describe_checkpoint(out, "base", None, None, {"preset": preset, "seed": seed})
    Store(store).catalog.insert_once("checkpoints", row)
    return str(out)


@task(name="fetch-base-model", task_run_name="fetch-base-model", cache_policy=NONE)
def fetch_model_task(name: str) -> str:
    """The model a pretrained name or Hub id names, as a folder in the model cache (converted once)."""
    from tasks.models.pretrained import resolve_model

    return str(resolve_model(name, log=get_run_logger().info))


def planned_stages(config: PipelineConfig) -> int:
    """How many stages `pipeline` reports (for "stage i/n"): [demo-data] curate verify [base-model] sft
    [tag-difficulty] rl [rl-code] eval-base eval-sft eval-rl [eval-rl-code]."""
    return (7 + int(config.demo) + int(not config.base_model or fetchable(config.base_model))
            + int(bool(config.difficulty_k))
            + 2 * int(config.rl_code is not None))


def _run_name(param) -> str:
    """`demo`, `demo-0.05` (its scale), `demo-seed1`; with real data the sources' names."""
    if not param("config.demo", True):
        return "+".join(sorted(param("config.sources", {}) or {}))
    scale, seed = param("config.demo_scale", 1.0), param("config.seed", 0)
    return "demo" + (f"-{scale:g}" if scale != 1 else "") + (f"-seed{seed}" if seed else "")


# The run form of a deployment (prefect.yaml's pipeline/demo): the settings a run usually changes as fields,
# the nested configs a run rarely changes folded to one JSON box each, `store` left to the flow's own
# parameter (which wins).
PIPELINE_FORM = ConfigForm(PipelineConfig, folded=("sources", "test_strength", "sft", "rl", "rl_code"), hidden=("store",))


@flow(name="pipeline", log_prints=True, validate_parameters=False, flow_run_name=flow_run_namer("pipeline", _run_name))
@one_line_failures
def pipeline(config: Annotated[PipelineConfig, PIPELINE_FORM] = PipelineConfig(), store: str | None = None) -> dict:
    """curate → verify → SFT → difficulty tags → RL → evaluate base/SFT/RL, each stage content-addressed.
    Each stage prints a line as it starts and one as it ends: cached or computed, seconds, headline figure.
    A failed stage ends the run with one line naming it (`pipeline: stage rl failed: …`).

    Args:
        config: the pipeline's settings; the defaults are the demo (bundled data, tiny model, CPU)
        store: store directory for every stage's output (overrides config.store; default: $KLEAR_STORE
            or ./klear-store)
    """
    log = get_run_logger()
    store = resolve_store(store or config.store)
    if config.gpu_pool:  # child runs get the same absolute paths (the store is shared by the pools)
        store = shared_path(store)
    stages = NamedStages(planned_stages(config), also=log.info)
    if note := config.scale_note():
        log.warning(note)
    if config.demo:
        with stages.stage("demo-data") as st:
            sources, benchmarks = demo_data_task(store, config.seed, config.demo_scale)
            st.figure = f"{len(sources)} sources, {len(benchmarks)} benchmarks"
        specs = [source_spec(name, path) for name, path in sources.items()]
    else:
        specs, sources, benchmarks = config.source_specs(), config.source_paths(), config.benchmarks
    if not sources:
        raise ValueError("pipeline: no sources (set demo=True or give sources)")
    if config.reported_benchmark not in benchmarks:
        raise ValueError(f"pipeline: eval_benchmark {config.reported_benchmark!r} is not one of {sorted(benchmarks)}")
    ecfg = EvalConfig(k=config.eval_k, seed=config.seed, max_tokens=config.eval_max_tokens, backend="auto")
    bench = shared_path(benchmarks[config.reported_benchmark]) if config.gpu_pool else benchmarks[config.reported_benchmark]
    alarms = _alarm(config, log, layout_alarms({s["name"]: _first_row(s["path"]) for s in specs},
                                               {s["name"]: s.get("layout", "canonical") for s in specs}))

    # `curated` and `verified` are the subflows' own results, kept for the whole run; only unlinked copies of
    # their values go on to tasks and subflows (`unlinked`)
    with stages.stage("curate") as st:
        since = _now()
        curated = curate(CurateConfig(sources=specs,
                                      benchmarks=benchmarks, store=store, seed=config.seed))
        st.cached, st.figure = _made_before(curated, since), _rows_kept(curated)
    with stages.stage("verify") as st:
        since = _now()
        verified = verify(store=store, min_tests=config.min_tests, parent=unlinked(curated["id"]),
                          test_strength=config.test_strength)
        st.cached = _made_before(verified, since)
        st.figure = (f"{_rows_kept(verified)}, {curated['counts'].get('kept', 0) - verified['counts'].get('kept', 0)}"
                     " code problems dropped")
    dataset = unlinked(verified["id"])
    curation_artifacts(unlinked(verified), store, "dataset")  # the dataset SFT and RL train on, on this run's page
    alarms += _alarm(config, log, lost_source_alarms(Store(store).load_version(dataset).inputs.get("by_source", {})))
    kept = Store(store).read_table(dataset, "problems", columns=["source", "domain", "answer"])
    alarms += _alarm(config, log, unanswered_math_alarms(math_answers_by_source(kept)))
    if alarms:
        create_markdown_artifact(key="data-alarms", description="Data this run lost or misread whole (warnings; "
                                 "strict: true fails the run instead)", markdown="\n".join(f"- {a}" for a in alarms))

    base = config.base_model
    if base and fetchable(base):  # a pretrained model's name or a Hub id: fetched once into the model cache
        with stages.stage("base-model") as st:
            st.cached = fetched_path(base) is not None
            base = fetch_model_task(base)
            st.figure = f"{config.base_model} ({base})"
    if not base:
        with stages.stage("base-model") as st:
            st.cached = finished(_base_dir(store, config.model_preset, config.seed, dataset))
            base = base_model_task(store, config.model_preset, config.seed, dataset)
            st.figure = f"{config.model_preset} preset"
    if config.gpu_pool:
        base = shared_path(base)
    sft_out = sft_dir(store, base, dataset, config.sft)
    with stages.stage("sft") as st:
        st.cached = finished(sft_out)
        if not st.cached:
            train_sft(config, store, str(base), dataset, sft_out)
        st.figure = _last_metric(sft_out, "loss", "final loss {:.4f}")
    log.info("SFT checkpoint: %s", sft_out)

    rl_data = dataset
    if config.difficulty_k:
        with stages.stage("tag-difficulty") as st:
            rl_data, st.cached = tag_difficulty_stage(config, store, str(sft_out), dataset)
            st.figure = _difficulty_counts(store, rl_data)
    rl_stages = [("rl", config.rl)] + ([("rl-code", config.rl_code)] if config.rl_code is not None else [])
    rl_outs, parent = {}, sft_out
    for name, rl_cfg in rl_stages:  # each stage starts from the one before (content key: its parent)
        rl_out = rl_dir(store, str(parent), rl_data, rl_cfg)
        with stages.stage(name) as st:
            st.cached = finished(rl_out)
            if not st.cached:
                train_rl(config, store, str(parent), rl_data, rl_out, rl_cfg, name)
            st.figure = _last_metric(rl_out, "reward_mean", "final reward {:.3f}")
        log.info("%s checkpoint: %s", name, rl_out)
        rl_outs[name], parent = rl_out, rl_out

    results = {}
    for stage, path in (("base", base), ("sft", sft_out), *rl_outs.items()):
        with stages.stage(f"eval-{stage}") as st:
            results[stage], st.cached = evaluate_stage(config, f"eval-{stage}", str(path), bench, ecfg, store)
            st.figure = f"{config.reported_benchmark} avg@{config.eval_k} {results[stage]['avg_at_k']:.3f}"
    summary = {"store": store, "dataset": dataset, "rl_dataset": rl_data, "base": str(base), "sft": str(sft_out),
               **{name.replace("-", "_"): str(out) for name, out in rl_outs.items()},
               "benchmark": config.reported_benchmark, "k": config.eval_k,
               **{f"{s.replace('-', '_')}_avg_at_k": r["avg_at_k"] for s, r in results.items()}}
    report_pipeline(summary, results)
    return summary


class NamedStages(StageLog):
    """StageLog whose failed stage is named on the exception (a note), so the run's one failure line says
    where: `pipeline: stage rl failed: …` (flows/prefect_ui.py failure_line)."""

    @contextmanager
    def stage(self, name: str) -> Iterator[Stage]:
        try:
            with super().stage(name) as st:
                yield st
        except Exception as e:
            if not any(n.startswith(WHERE_NOTE) for n in getattr(e, "__notes__", [])):
                e.add_note(f"{WHERE_NOTE}stage {name} failed")
            raise


def unlinked(value: Any) -> Any:
    """A subflow's result (or a value in it) as new objects. Prefect links a subflow's return value, and each
    value one level inside it, to the subflow run by object identity (link_state_to_result), and records it
    as a `flow_run` input of any task, subflow or deployment run it is passed to; the Prefect 3.9 UI cannot
    render that input kind (blank task-run pages, "Invalid TaskInputResponse", an empty Task Runs tab).
    `quote` would keep tasks from recording it but reaches a subflow's parameters as a list, and run_deployment
    takes JSON, so the pipeline passes JSON copies on. The originals stay referenced by the pipeline for the
    whole run: Prefect looks a plain str or dict up by its id, which a freed object would hand to a new one."""
    return json.loads(json.dumps(value))


# -- stages that run in this process, or as deployment runs on the GPU pool (config.gpu_pool) --------

CHILD_POLL_S = 3  # seconds between reads of a child run's state (a stage takes minutes to hours)


class StageRunFailed(RuntimeError):
    """A stage's deployment run (a child of the pipeline run) did not complete, or left no output."""


def shared_path(path: str) -> str:
    """A store, model or benchmark path as both pools must name it: absolute (a URL stays as it is)."""
    return path if "://" in path else os.path.abspath(path)


def run_stage_deployment(config: PipelineConfig, stage: str, kind: str, parameters: dict) -> None:
    """Run deployment `config.deployment_for(kind)` as a child flow run of this pipeline run (linked
    under a task run of the pipeline, so the UI nests it) and wait for its final state. Anything but
    Completed raises StageRunFailed with one line naming the stage and the child run."""
    from prefect import runtime
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    name = config.deployment_for(kind)
    try:
        child = run_deployment(name, parameters=parameters, flow_run_name=f"{runtime.flow_run.name}-{stage}",
                               poll_interval=CHILD_POLL_S)
    except ObjectNotFound:
        raise StageRunFailed(f"pipeline: stage {stage}: no deployment {name!r} on the Prefect server "
                             f"(gpu_pool needs prefect.yaml's deployments: `prefect deploy --all`)") from None
    get_run_logger().info("stage %s: child flow run %s (%s) of %s on pool %s: %s", stage, child.name, child.id,
                          name, child.work_pool_name, child.state.name if child.state else "no state")
    if child.state is None or not child.state.is_completed():
        raise StageRunFailed(child_failure(stage, name, child))


def child_failure(stage: str, deployment: str, child) -> str:
    """One line: the stage, the child run (name, id, deployment) and how it ended, with the first 300
    characters of its state message (whitespace collapsed)."""
    state = child.state
    how = state.name if state else "without a state"
    why = " ".join((state.message or "").split()) if state else ""
    return (f"pipeline: stage {stage} failed: child flow run {child.name} ({child.id}) of {deployment} "
            f"ended {how}" + (f": {why[:300]}" if why else ""))


def _require_output(present: bool, stage: str, what: str, store: str) -> None:
    if not present:
        raise StageRunFailed(f"pipeline: stage {stage}: its child run completed but {what} is missing from "
                             f"{store}: both work pools must see that store and run the same code")


def train_sft(config: PipelineConfig, store: str, base: str, dataset: str, out: Path) -> None:
    data = str(DatasetRef(store, dataset))
    if not config.gpu_pool:
        sft_train_task(base, data, str(out), config.sft, True, store, config.sft_nproc)
        return
    run_stage_deployment(config, "sft", "sft", {"model": base, "data": data, "out": str(out),
                                                "config": asdict(config.sft), "resume": True,
                                                "nproc": config.sft_nproc, "store": store})
    _require_output(finished(out), "sft", f"a finished checkpoint in {out}", store)


def tag_difficulty_stage(config: PipelineConfig, store: str, model: str, parent: str) -> tuple[str, bool]:
    """The tagged dataset version (published as the store's current one) and whether it was found.
    Its id is content-addressed (parent version, model weights, config, code), so the pipeline finds
    it in the store before starting a deployment run, and the tag-difficulty flow makes the same id."""
    cfg = DifficultyConfig(k=config.difficulty_k, seed=config.seed, max_tokens=config.eval_max_tokens)
    if not config.gpu_pool:
        since = _now()
        tagged = tag_difficulty_task(store, model, cfg, parent=parent)
        publish_dataset_task(store, tagged["id"])
        return tagged["id"], _made_before(tagged, since)
    version = difficulty_version_id(parent, recorded_checkpoint_id(model), cfg)
    found = Store(store).has_version(version)
    if found:
        publish_dataset_task(store, version)  # as the tag-difficulty flow does after tagging
    else:
        run_stage_deployment(config, "tag-difficulty", "tag-difficulty",
                             {"model": model, "store": store, "config": asdict(cfg), "parent": parent})
        _require_output(Store(store).has_version(version), "tag-difficulty", f"dataset version {version}", store)
    return version, found


def train_rl(config: PipelineConfig, store: str, parent: str, dataset: str, out: Path, rl_cfg, stage: str) -> None:
    data = str(DatasetRef(store, dataset))
    if not config.gpu_pool:  # the task run (and its artifacts) named by the stage: rl, rl-code
        rl_train_task.with_options(task_run_name=stage)(parent, data, str(out), rl_cfg, True, store, config.rl_nproc)
        return
    run_stage_deployment(config, stage, "rl", {"model": parent, "data": data, "out": str(out),
                                               "config": asdict(rl_cfg), "resume": True, "store": store,
                                               "nproc": config.rl_nproc})
    _require_output(finished(out), stage, f"a finished checkpoint in {out}", store)


def evaluate_stage(config: PipelineConfig, stage: str, model: str, bench_path: str, cfg: EvalConfig,
                   store: str) -> tuple[dict, bool]:
    """The evaluation's catalog row, and whether it was found there (True) or computed now (False).
    Its id hashes the checkpoint's weights, the benchmark's content and `cfg`, so it is found whichever
    pool computed it."""
    from tasks.evaluation.record import evaluation_id, find_evaluation

    eval_id = evaluation_id(model, bench_path, cfg)
    row = find_evaluation(store, eval_id)
    if row:
        return row, True
    name = config.reported_benchmark
    if not config.gpu_pool:  # the task run (and its artifacts) named by the stage: eval-base, eval-sft, eval-rl
        return evaluate_task.with_options(task_run_name=stage)(model, name, bench_path, cfg, store), False
    run_stage_deployment(config, stage, "evaluate", {"model": model, "benchmarks": {name: bench_path},
                                                     "config": asdict(cfg), "store": store})
    row = find_evaluation(store, eval_id)
    _require_output(row is not None, stage, f"evaluation {eval_id} in {Store(store).catalog_path}", store)
    return row, False


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


def _alarm(config: PipelineConfig, log, lines: list[str]) -> list[str]:
    """Data alarms (tasks/pipeline/data_alarms.py): each a warning in the run's log, or with `strict` the
    run's one failure line."""
    if lines and config.strict:
        raise ValueError(f"pipeline (strict): {lines[0]}" + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""))
    for line in lines:
        log.warning(line)
    return lines


def _first_row(path: str) -> dict | None:
    """The first readable row of a source (a layout hint reads its fields), None when there is none."""
    from tasks.records.reader import read_records

    if str(path).startswith("hf:"):  # read when curated, not twice
        return None
    try:
        for record in read_records(path, on_bad=lambda bad: None):
            return record.value if isinstance(record.value, dict) else None
    except Exception:  # curation reports unreadable sources itself, in its own words
        return None
    return None


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
    """The base / SFT / RL comparison as a table, a chart and a report on the pipeline run's page."""
    from tasks.reporting import plot_bars

    bench, k = summary["benchmark"], summary["k"]
    table = [{"stage": s, "checkpoint": r["checkpoint"], "avg_at_k": round(r["avg_at_k"], 4),
              "pass_at_k": round(r["pass_at_k"], 4), "n_problems": r["n_problems"]} for s, r in results.items()]
    create_table_artifact(key="pipeline-comparison", table=table,
                          description=f"{bench}: avg@{k} and pass@{k} of the base, SFT and RL checkpoints")
    png = plot_bars({s: r["avg_at_k"] for s, r in results.items()}, Path(tempfile.mkdtemp()) / "cmp.png",
                    f"{bench} avg@{k}")
    alt = f"{bench} avg@{k} by stage: " + ", ".join(f"{s} {r['avg_at_k']:.3f}" for s, r in results.items())
    create_markdown_artifact(key="pipeline-comparison-chart", markdown=chart_markdown(png, alt),
                             description=f"Held-out {bench} avg@{k} by stage")
    create_markdown_artifact(key="pipeline-report", description="Where the run's dataset, checkpoints and "
                             "catalog are, and the held-out figures", markdown=(
        "# Pipeline\n\n" + "".join(f"- {name}: `{value}`\n" for name, value in summary.items()) +
        f"\nCatalog: `{Store(summary['store']).catalog_path}`\n"))
