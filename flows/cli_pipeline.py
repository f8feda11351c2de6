"""`klear demo` and `klear pipeline`: the end-to-end flow on the bundled data, then its summary."""
from __future__ import annotations

import os
from typing import Optional

import typer
from rich.table import Table

from flows.cli_checks import resolve_model_flag, store_root
from flows.cli_common import StoreOpt, UserError, console, fault_line, quiet_prefect_defaults, run_flow, starting
from flows.cli_curate import print_curation_summary


def demo(store: Optional[str] = StoreOpt) -> None:
    """The whole pipeline on the bundled demo data with a tiny model on CPU (minutes):
    curate → verify → SFT → difficulty → RL → evaluate base / SFT / RL."""
    _run_pipeline(store, seed=None, scale=None)


def pipeline(
    store: Optional[str] = StoreOpt,
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of every stage (default 0, or the file's)"),
    scale: Optional[float] = typer.Option(None, "--scale", help="Size of the bundled demo data (default 1)"),
    config: Optional[str] = typer.Option(None, "--config", help="A YAML or JSON file of the pipeline's settings "
                                         "(your own sources and their layouts, benchmarks, SFT and RL settings; "
                                         "--print-config writes a commented one); --store, --seed and --scale "
                                         "given beside it win"),
    print_config: bool = typer.Option(False, "--print-config", help="Print the settings as a commented YAML "
                                      "file (the demo's defaults) and exit"),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="The model SFT starts from: an HF model "
                                             "directory, a pretrained model's name (klear model list) or a Hub id, "
                                             "fetched and cached on first use (default: a tiny random-init model)"),
) -> None:
    """The end-to-end pipeline: curate → verify → SFT → difficulty → RL → evaluate, on the bundled data or on
    the sources a --config file names."""
    if print_config:
        print(pipeline_template(), end="")
        return
    _run_pipeline(store, seed, scale, config, base_model)


SOURCES_EXAMPLE = """your own data (with demo: false), each source a PATH or its layout as klear curate reads it:
sources:
  math: openr1.jsonl                                   # already canonical rows
  openr1: {path: raw/openr1.jsonl, layout: openr1-math}
  taco: {path: raw/taco.jsonl, layout: taco}
  mine: {path: mine.parquet, field_map: {question: problem}, domain: math}"""


def pipeline_template() -> str:
    """`klear pipeline --print-config`: PipelineConfig's defaults (the demo) as commented YAML."""
    from flows.config_template import template
    from tasks.pipeline.config import PipelineConfig

    return template(PipelineConfig, header=(
        "klear pipeline --config FILE: the pipeline's settings. The `pipeline` deployment's `config` parameter\n"
        "takes the same document (as JSON). Every key is optional (absent: the default shown); a key that is\n"
        "no setting is refused. These defaults are the demo: bundled data, tiny model, CPU."),
        examples={"sources": SOURCES_EXAMPLE})


def _run_pipeline(store: str | None, seed: int | None, scale: float | None, config_file: str | None = None,
                  base_model: str | None = None) -> None:
    import json

    from storage.store import Store
    from tasks.reporting import tensorboard_command

    settings = _settings_file(config_file)
    root = _store_root(store, settings, config_file)
    if base_model is not None:
        settings["base_model"] = resolve_model_flag("--base-model", base_model)
    config = _pipeline_config(root, seed, scale, settings, config_file)
    _check_sources(config, config_file)
    quiet_prefect_defaults()
    starting("pipeline", f"store {root}; each stage prints a line as it starts and ends")
    from flows.pipeline import pipeline as pipeline_flow

    state = run_flow(pipeline_flow, config, return_state=True)
    try:
        summary = state.result()  # a failed run raises its error here, as a plain call would
    except ValueError as e:  # bad input the stages name (file, row, directory): one line
        raise UserError(str(e)) from None
    except Exception as e:  # no room on the disk: one line (cli_common.fault_line); others are bugs
        if (line := fault_line(e)) is None:
            raise
        raise UserError(line) from None
    st = Store(root)
    print_curation_summary(st.load_version(summary["dataset"]).__dict__, root)
    t = Table(title=f"held-out {summary['benchmark']}: avg@{summary['k']} by stage")
    for col in ("stage", "avg@k", "checkpoint"):
        t.add_column(col)
    for stage in ("base", "sft", "rl"):
        t.add_row(stage, f"{summary[stage + '_avg_at_k']:.3f}", summary[stage])
    console.print(t)
    console.print(f"TensorBoard: {tensorboard_command(st.path('models'))}", markup=False, soft_wrap=True)
    console.print(_prefect_ui_line(state.state_details.flow_run_id))
    print(json.dumps(summary), flush=True)  # one line a script can parse (rich would wrap it at the terminal width)


PIPELINE_FLAGS = {"demo_scale": "--scale", "seed": "--seed", "store": "--store",
                  "base_model": "--base-model"}  # field → this command's flag


MAX_SEED = (1 << 63) - 1  # the stages' samplers take 63-bit seeds (tasks/generation/sampling.py); the config
#   itself has no upper bound, so a larger one would fail stages in


def _settings_file(path: str | None) -> dict:
    """The --config file's settings ({} without one); one line naming the file when it cannot be read."""
    if path is None:
        return {}
    from flows.config_template import TemplateError, read_settings

    try:
        return read_settings(path)
    except TemplateError as e:
        raise UserError(f"--config {e}") from None


def _store_root(store: str | None, settings: dict, config_file: str | None) -> str:
    """The run's store, checked (cli_checks.store_root): --store, else the --config file's `store`, named as
    `store (FILE)` in its one line (the user gave no --store), else $KLEAR_STORE or ./klear-store."""
    given = settings.get("store")
    if store is not None or given is None:
        return store_root(store)
    where = f"store ({config_file})"
    if not isinstance(given, str) or not given.strip():
        raise UserError(f"{where}: must be a store directory or URL (got {given!r})")
    return store_root(given, flag=where)


def _pipeline_config(root: str, seed: int | None, scale: float | None, settings: dict | None = None,
                     config_file: str | None = None):
    """The run's PipelineConfig, checked before any work: the --config file's settings (validated as the
    deployment's parameters are: a key that is no setting, a bad value or a missing source file is one line
    naming the file and the key), then the flags given beside it. A flag's refused value is one line naming
    the flag (`--scale`, not the field `demo_scale`). Without a file's `rl`, the demo's RL is sized to --scale."""
    from pydantic import TypeAdapter, ValidationError

    from flows.prefect_ui import validation_detail
    from tasks.config_checks import ConfigError
    from tasks.pipeline.config import PipelineConfig, demo_rl

    if seed is not None and seed > MAX_SEED:
        raise UserError(f"--seed must be at most {MAX_SEED} (got {seed})")
    values = dict(settings or {})
    values["store"] = root
    if seed is not None:
        values["seed"] = seed
    if scale is not None:
        values["demo_scale"] = scale
        if "rl" not in values:
            values["rl"] = demo_rl(scale)
    try:
        if config_file is None:
            return PipelineConfig(**values)
        return TypeAdapter(PipelineConfig).validate_python(values)
    except ConfigError as e:
        flag = PIPELINE_FLAGS.get(e.field)
        raise UserError(f"{flag} {e.detail}" if flag else e.message) from None
    except ValidationError as e:
        raise UserError(f"--config {config_file}: {validation_detail(e, PipelineConfig)}") from None


def _check_sources(config, config_file: str | None) -> None:
    """Your own sources read as `klear curate` reads them before any work (tasks/curation/source_fields.py:
    a source with no rows, a `field_map` field no row has, a file unreadable past some line), one line naming
    the --config file and the source's key, before the Prefect server starts and not at the curate stage."""
    if config.demo:
        return
    from tasks.curation.config import SourceSpec
    from tasks.curation.source_fields import EmptySource, UnmatchedMap, check_sources
    from tasks.records.sources import SourceError

    where = f"--config {config_file}: " if config_file else ""
    for spec in config.source_specs():
        try:
            check_sources([SourceSpec(**spec)])
        except EmptySource as e:
            raise UserError(f"{where}sources.{e.name}: {e.path} has no rows (nothing to curate)") from None
        except UnmatchedMap as e:
            raise UserError(f"{where}sources.{spec['name']}.field_map: {e}") from None
        except SourceError as e:
            raise UserError(f"{where}sources.{spec['name']}: {e}") from None


def _prefect_ui_line(flow_run_id) -> str:
    """Where to see the run: its page on a configured Prefect server; how to get one after a temporary server."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value() if os.environ.get("PREFECT_API_URL") else None
    if ui:
        return f"Prefect UI: {ui.rstrip('/')}/runs/flow-run/{flow_run_id}  (flows, logs and artifacts of this run)"
    return ("Prefect UI: this run used a temporary server, now stopped; run `prefect server start`, set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api and re-run to see its flows and artifacts (stages are cached)")
