"""`klear` — the command line. Each command validates its input, then runs the stage's Prefect flow
(an ephemeral Prefect server when PREFECT_API_URL is unset, else the configured one)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from flows import verify_cli
from flows.cli_config_options import build_config, given_on_command_line, under_preset, with_config_options
from flows.cli_defaults import default_of
from flows.cli_common import (UserError, check_benchmark, check_model, check_training_rows, claim_out,
                              click_exceptions, early_defaults, parse_pairs, prepare_out, quiet_prefect_defaults,
                              run_flow, store_root)
from tasks.curation.config import CurateConfig
from tasks.curation.layouts import LAYOUTS
from tasks.evaluation.config import DifficultyConfig, EvalConfig
from tasks.training.config import RL_NESTED, RLConfig, SFTConfig
from tasks.training.plan import SHAPES
from tasks.training.rl_presets import RL_PRESETS
from tasks.verification.strength import StrengthConfig

app = typer.Typer(name="klear", help="Klear-Reasoner post-training pipeline: curate, verify, SFT, RL, evaluate.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)

StoreOpt = typer.Option(None, "--store", help="Store directory (default $KLEAR_STORE or ./klear-store)")


def _check_source_path(flag: str, name: str, path: str) -> None:
    """A source or benchmark PATH: a known format, an existing file (not a directory), a readable Parquet."""
    from tasks.curation.sources import SourceError, check_source_file
    from storage import paths

    try:
        kind = check_source_file(path)
    except SourceError as e:
        raise UserError(f"{flag} {name}={path}: {str(e).removeprefix(path + ': ')}") from None
    if kind == "parquet":
        import pyarrow.parquet as pq
        try:
            with paths.open_binary(path) as f:
                pq.read_metadata(f)
        except Exception as e:
            raise UserError(f"{flag} {name}={path}: not a readable Parquet file ({type(e).__name__})") from None


CURATE_FLAGS = {"near_dup_threshold": "--near-threshold", "near_dup_num_perm": "--num-perm",
                "memory_limit": "--memory-limit", "dask_workers": "--workers", "work_dir": "--work-dir",
                "near_dup_shingle": "--shingle", "ngram": "--ngram", "test_overlap": "--test-overlap",
                "cutoff_date": "--cutoff-date", "undated": "--undated", "top_sources": "--top-sources",
                "seed": "--seed"}  # CurateConfig field → the `klear curate` flag that sets it


def build_curate_config(sources: dict[str, str], benchmarks: dict[str, str], layouts: dict[str, str],
                        maps: list[str], domains: dict[str, str], **params):
    field_maps: dict[str, dict[str, str]] = {}
    for m in maps:
        lhs, ok, canon = m.partition("=")
        src, dot, field = lhs.partition(".")
        if not (ok and dot and src and field and canon):
            raise UserError(f"--map {m!r}: expected SOURCE.FIELD=CANONICAL_FIELD")
        field_maps.setdefault(src, {})[field] = canon
    for flag, d in (("--layout", layouts), ("--map", field_maps), ("--domain", domains)):
        for src in d:
            if src not in sources:
                raise UserError(f"{flag} names source {src!r}, which no --source defines")
    for name, path in sources.items():
        _check_source_path("--source", name, path)
    for name, path in benchmarks.items():
        _check_source_path("--benchmark", name, path)
    try:
        return CurateConfig(
            sources=[{"name": n, "path": p, "layout": layouts.get(n, "canonical"),
                      "field_map": field_maps.get(n, {}), "domain": domains.get(n)} for n, p in sources.items()],
            benchmarks=benchmarks, **params)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        flag = CURATE_FLAGS.get(where)
        if flag:
            raise UserError(f"{flag} {params[where]}: {err['msg'].removeprefix('Value error, ')}") from None
        msg = err["msg"].removeprefix("Value error, ")
        raise UserError(f"{where}: {msg}" if where else msg) from None  # no field: a rule across fields


def print_curation_summary(version: dict, store_root: str) -> None:
    from storage.store import Store

    counts, by_source = version["counts"], version["inputs"].get("by_source", {})
    scores = version["inputs"].get("source_scores", {})
    from tasks.curation.pipeline import ALL_REASONS

    reasons = [r for r in ALL_REASONS if r in counts] + sorted(k for k in counts if k != "kept" and k not in ALL_REASONS)
    table = Table(title=f"dataset {version['id']}: rows in = kept + dropped")
    for col in ["source", "score", "rows in", "kept", *reasons]:
        table.add_column(col, justify="left" if col == "source" else "right")
    for src, c in by_source.items():
        table.add_row(src, f"{scores.get(src, 0):.2f}", str(c["rows_in"]), str(c["kept"]), *(str(c.get(r, 0)) for r in reasons))
    table.add_row("TOTAL", "", str(version["rows_in"]), str(counts["kept"]), *(str(counts[r]) for r in reasons), style="bold")
    console.print(table)
    if version["inputs"].get("undated_kept") is not None:
        console.print(f"undated rows kept under the cutoff date: {version['inputs']['undated_kept']}")
    console.print(f"catalog: {Store(store_root).catalog_path}  (views: problems, dropped; table: datasets)")


@app.command()
def curate(
    source: list[str] = typer.Option(..., "--source", help="NAME=PATH (.jsonl, .parquet or hf:DATASET[:SPLIT]); repeat"),
    benchmark: Optional[list[str]] = typer.Option(None, "--benchmark", help="NAME=PATH of a benchmark to decontaminate against; repeat"),
    store: Optional[str] = StoreOpt,
    layout: Optional[list[str]] = typer.Option(None, "--layout", help="NAME=LAYOUT field layout of a source (one of: " + ", ".join(sorted(LAYOUTS)) + ")"),
    map_: Optional[list[str]] = typer.Option(None, "--map", help="SOURCE.FIELD=CANONICAL rename a source field, e.g. mydata.question=problem"),
    domain: Optional[list[str]] = typer.Option(None, "--domain", help="NAME=math|code default domain of a source's rows"),
    near_threshold: float = typer.Option(default_of(CurateConfig, "near_dup_threshold"), help="Jaccard threshold for near duplicates"),
    num_perm: int = typer.Option(default_of(CurateConfig, "near_dup_num_perm"), help="MinHash permutations"),
    shingle: int = typer.Option(default_of(CurateConfig, "near_dup_shingle"), help="Words per near-duplicate shingle"),
    ngram: int = typer.Option(default_of(CurateConfig, "ngram"), help="Contamination n-gram length in words (paper: 9)"),
    test_overlap: float = typer.Option(default_of(CurateConfig, "test_overlap"), "--test-overlap", help="Code rows whose tests share at least this fraction of a benchmark problem's test cases (of the smaller set, trivial cases left out) are contaminated"),
    cutoff_date: Optional[str] = typer.Option(None, "--cutoff-date", help="YYYY-MM-DD: drop rows dated on or after it (after_cutoff)"),
    undated: str = typer.Option(default_of(CurateConfig, "undated"), "--undated", help="With --cutoff-date, rows without a date: keep (counted in the summary) or drop"),
    top_sources: Optional[int] = typer.Option(None, "--top-sources", help="Keep only the K best-scoring sources"),
    seed: int = typer.Option(default_of(CurateConfig, "seed"), help="Seed for MinHash permutations"),
    verify_code: bool = typer.Option(False, "--verify-code", help="Then run code references against their tests in the sandbox"),
    min_tests: int = typer.Option(16, "--min-tests", help="With --verify-code: code problems with fewer tests are dropped (paper: 16)"),
    workers: int = typer.Option(2, "--workers", help="Workers of the local Dask cluster (--dask local; with --verify-code: sandbox containers)"),
    dask: Optional[str] = typer.Option(None, "--dask", help="ADDRESS of a Dask scheduler, or 'local' for a LocalCluster of --workers: curation's per-part work (signatures, n-gram scans) runs there, out of core (and with --verify-code the sandboxes)"),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="Curate out of core within about this much memory (e.g. 4GB): rows on disk, grouping in DuckDB; the same dataset version as in memory"),
    work_dir: Optional[str] = typer.Option(None, "--work-dir", help="Out of core: directory for parts and spill files (default: a temporary one; on a Dask cluster a path every worker reaches)"),
    mutants: int = typer.Option(default_of(StrengthConfig, "mutants"), "--mutants", help="With --verify-code: mutants of each passing reference run against its tests, to find tests that accept wrong programs (0: off)"),
    max_survival: float = typer.Option(default_of(StrengthConfig, "max_survival"), "--max-survival", help="With --verify-code: weak_tests when the tests accept more than this fraction of the mutants shown to behave differently"),
    weak_tests: str = typer.Option(default_of(StrengthConfig, "weak_tests"), "--weak-tests", help="With --verify-code: drop problems with weak tests, or tag them (kept, flagged in verifications)"),
    mutant_seed: int = typer.Option(default_of(StrengthConfig, "mutant_seed"), "--mutant-seed", help="With --verify-code: seed for the mutants, probe inputs and screening tests"),
) -> None:
    """Ingest sources into one schema; drop malformed, duplicate, near-duplicate and contaminated rows (a
    benchmark's statement or, for code, its tests), rows dated on/after --cutoff-date (and, with
    --verify-code, code problems with too few tests, a failing reference or weak tests)."""
    strength = _checked(lambda: StrengthConfig(mutants=mutants, max_survival=max_survival, weak_tests=weak_tests,
                                               mutant_seed=mutant_seed))
    config = build_curate_config(
        parse_pairs(source, "--source"), parse_pairs(benchmark, "--benchmark"), parse_pairs(layout, "--layout"),
        list(map_ or []), parse_pairs(domain, "--domain"),
        near_dup_threshold=near_threshold, near_dup_num_perm=num_perm, near_dup_shingle=shingle, ngram=ngram,
        test_overlap=test_overlap, cutoff_date=cutoff_date, undated=undated,
        top_sources=top_sources, seed=seed, store=store_root(store), memory_limit=memory_limit, dask=dask,
        dask_workers=workers, work_dir=work_dir)
    if dask not in (None, "local"):  # before Prefect starts: a refused address fails in a second, not twenty
        from tasks.dask_client import refusal

        if why := refusal(dask):
            raise UserError(f"--dask {dask}: cannot reach the scheduler ({why})")
    quiet_prefect_defaults()
    from flows.curate import curate as curate_flow
    from tasks.curation.sources import SourceError

    from tasks.curation.out_of_core import DaskError

    version = run_flow(curate_flow, config, user_errors=(SourceError, DaskError))
    if verify_code:
        version = _run_verify(config.store, min_tests, workers, None if dask == "local" else dask, strength)
    print_curation_summary(version, config.store)


def _run_verify(store: str, min_tests: int, workers: int, dask: str | None, strength: StrengthConfig) -> dict:
    from flows.verify import verify as verify_flow
    from tasks.curation.validate_code import SandboxFault

    try:
        return verify_flow(store=store, min_tests=min_tests, workers=workers, dask_address=dask,
                           test_strength=strength)
    except SandboxFault as e:
        raise UserError(f"--verify-code: {e} (is the Docker engine running? see scripts/ensure-docker.sh)") from None


@app.command()
def demo(store: Optional[str] = StoreOpt) -> None:
    """The whole pipeline on the bundled demo data with a tiny model on CPU (minutes):
    curate → verify → SFT → difficulty → RL → evaluate base / SFT / RL."""
    _run_pipeline(store, seed=0, scale=1.0)


model_app = typer.Typer(help="Models: create a tiny random-init model for CPU runs.", no_args_is_help=True)
app.add_typer(model_app, name="model")


def _corpus_texts(corpus: str | None) -> list[str]:
    """Tokenizer training text: the given canonical file/store rows, else the bundled demo data."""
    import tempfile

    if corpus is None:
        from tasks.curation.demo_data import write_demo_sources

        from tasks.models.corpus import source_texts

        return source_texts(write_demo_sources(Path(tempfile.mkdtemp(prefix="klear-corpus-"))).sources().values())
    from tasks.models.corpus import corpus_texts

    try:  # a bad row is skipped and named on stderr; the rest trains the tokenizer
        return corpus_texts(corpus, on_bad=lambda line: print(f"klear: --corpus: skipped {line}", file=sys.stderr))
    except (ValueError, OSError) as e:
        raise UserError(f"--corpus {corpus}: {str(e).removeprefix(corpus + ': ')}") from None


@model_app.command("init")
def model_init(
    out: Path = typer.Option(..., "--out", help="Directory for the new HF model"),
    preset: str = typer.Option("tiny", "--preset", help="tiny (~0.5M params) or small (~4M)"),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Canonical .jsonl/.parquet or store to train the tokenizer on (default: bundled demo data)"),
    seed: int = typer.Option(0, "--seed"),
    force: bool = typer.Option(False, "--force", help="Overwrite a model or run output already in --out"),
) -> None:
    """Create a random-init Qwen2-architecture model and a locally trained tokenizer. An --out that
    already holds a model or a run's output (a trained checkpoint, say) is refused unless --force."""
    from tasks.models.checks import existing_model
    from tasks.models.presets import PRESETS

    if preset not in PRESETS:
        raise UserError(f"--preset {preset!r}: unknown (known: {', '.join(PRESETS)})")
    claim_out(str(out))
    found = existing_model(out)
    if found and not force:
        raise UserError(f"--out {out}: already holds a model or run output ({found}); pass --force to overwrite it")
    from tasks.models.factory import MODEL_CARD, init_model  # torch and transformers: after the checks

    path = init_model(out, _corpus_texts(corpus), preset=preset, seed=seed)
    console.print(f"model: {path}  {(path / MODEL_CARD).read_text()}")


def _starting(what: str, detail: str) -> None:
    """One line on stderr before a long command goes quiet for Prefect's start-up (progress follows)."""
    if os.environ.get("KLEAR_PROGRESS", "").strip().lower() == "off":
        return
    where = f"Prefect at {os.environ['PREFECT_API_URL']}" if os.environ.get("PREFECT_API_URL") else \
        "a temporary local Prefect server starts first"
    print(f"klear {what}: {detail} ({where})", file=sys.stderr, flush=True)


def _checked(build):
    """Build a config; it checks itself (as it does for a deployment's parameters): its message, one line."""
    from tasks.config_checks import ConfigError

    try:
        return build()
    except ConfigError as e:
        raise UserError(e.message) from None


def _print_rl_plan(model: str, data: str | None, cfg: RLConfig, nproc: int, gpu_memory: float | None,
                   preset) -> None:
    """`klear rl --dry-run`: the plan of tasks/training/dry_run.py on this run's GPUs; a plan that cannot
    fit ends the command with exit 1 and its one-line reason."""
    from dataclasses import replace

    import torch

    from tasks.training.dry_run import dry_run
    from tasks.training.plan import Hardware

    hw = replace(preset.hardware if preset else Hardware(), nproc=nproc)
    if gpu_memory is None and torch.cuda.is_available():
        gpu_memory = torch.cuda.get_device_properties(0).total_memory / (1 << 30)
    if gpu_memory is not None:
        if gpu_memory <= 0:
            raise UserError(f"--gpu-memory must be positive (got {gpu_memory})")
        hw = replace(hw, gpu_memory_gib=gpu_memory)
    prompt_tokens = _longest_prompt(model, data, cfg) if data else None
    try:
        plan = dry_run(model, cfg, hw, prompt_tokens)
    except ValueError as e:
        raise UserError(f"--dry-run: {e}") from None
    print(plan.render(), flush=True)
    if plan.refusal:
        raise typer.Exit(1)


def _longest_prompt(model: str, data: str, cfg: RLConfig) -> int | None:
    """The data's longest chat prompt in tokens, when --model is a directory with a tokenizer; else None."""
    from tasks.training.rl_data import load_rl_rows

    if not (Path(model) / "config.json").is_file():
        return None
    _check_data(data)
    from transformers import AutoTokenizer

    from tasks.generation.base import chat_prompt

    tok = AutoTokenizer.from_pretrained(model)
    rows, _, _ = load_rl_rows(data, tuple(cfg.domains), cfg.selection)
    return max((len(tok(chat_prompt(tok, r["problem"]), add_special_tokens=False)["input_ids"]) for r in rows),
               default=None)


def _check_nproc(nproc: int) -> None:
    """One rule for every command's --nproc: at least 1, at most one process per visible GPU."""
    from tasks.generation.parallel import nproc_problem

    if why := nproc_problem(nproc):
        raise UserError(f"--nproc {why}")


def _check_model_dir(flag: str, path: str) -> None:
    p = Path(path)
    if not (p / "config.json").exists():
        raise UserError(f"{flag} {path}: not a Hugging Face model directory (no config.json)")


@app.command()
@with_config_options(SFTConfig)
def sft(
    model: str = typer.Option(..., "--model", help="HF model directory to start from"),
    data: str = typer.Option(..., "--data", help="A store (its curated problems) or a canonical .jsonl/.parquet"),
    out: str = typer.Option(..., "--out", help="Output directory (HF checkpoint + checkpoints/ + metrics)"),
    nproc: int = typer.Option(1, "--nproc", help="Processes (GPUs) for torchrun; 1 trains in this process"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in --out"),
    force: bool = typer.Option(False, "--force", help="Start over in an --out holding another run's checkpoints"),
    store: Optional[str] = typer.Option(None, "--store", help="Store whose catalog records the checkpoint "
                                        "(default: the store --data names, else $KLEAR_STORE or ./klear-store)"),
    **settings,
) -> None:
    """Long-CoT supervised fine-tuning (loss on response tokens, packing, cosine schedule)."""
    _check_model_dir("--model", model)
    _check_data(data)
    _check_nproc(nproc)
    cfg = _checked(lambda: build_config(SFTConfig, settings))
    check_training_rows(data, "sft")
    check_model(model)
    if store is not None:
        store = store_root(store)
    prepare_out(out, resume, force)
    quiet_prefect_defaults()
    _starting("sft", f"training into {out}")
    from flows.sft import sft as sft_flow
    from tasks.training.launch import RanksFailed

    res = run_flow(sft_flow, model=model, data=data, out=out, config=cfg, resume=resume, nproc=nproc, store=store,
                   user_errors=(ValueError, RanksFailed))
    console.print(f"checkpoint {res['checkpoint']}: {out}  ({res['steps']} steps, loss "
                  f"{res['first_loss']:.4f} → {res['last_loss']:.4f}; metrics: {out}/metrics.jsonl, TensorBoard: {out}/tb)")


@app.command("eval")
@with_config_options(EvalConfig)
def eval_(
    model: str = typer.Option(..., "--model", help="HF model directory"),
    benchmark: list[str] = typer.Option(..., "--benchmark", help="NAME=PATH (.jsonl/.parquet canonical rows); repeat"),
    nproc: int = typer.Option(1, "--nproc", help="Worker processes, each with its own engine (one GPU each, "
                              "or a share of the CPU cores); the numbers equal one process's"),
    store: Optional[str] = StoreOpt,
    **settings,
) -> None:
    """avg@k and pass@k on benchmarks; prints one JSON summary line per benchmark."""
    import json

    from tasks.evaluation.evaluate import load_benchmark

    _check_nproc(nproc)
    _check_model_dir("--model", model)
    benches = parse_pairs(benchmark, "--benchmark")
    for name, path in benches.items():
        _check_source_path("--benchmark", name, path)
        try:
            load_benchmark(path)
        except ValueError as e:
            raise UserError(f"--benchmark {name}={path}: {e}") from None
    cfg = _checked(lambda: build_config(EvalConfig, settings))
    if store is not None:
        store = store_root(store)
    check_model(model, max_tokens=cfg.max_tokens)
    for name, path in benches.items():  # every prompt within the context (tasks/evaluation/evaluate.py)
        check_benchmark(f"--benchmark {name}={path}", path, model, cfg.max_tokens)
    quiet_prefect_defaults()
    from flows.evaluate import evaluate as eval_flow

    rows = run_flow(eval_flow, model=model, benchmarks=benches, store=store, config=cfg, nproc=nproc)
    for row in rows:
        print(json.dumps(row), flush=True)


@app.command("tag-difficulty")
@with_config_options(DifficultyConfig)
def tag_difficulty(
    model: str = typer.Option(..., "--model", help="HF model directory that samples the answers"),
    nproc: int = typer.Option(1, "--nproc", help="Worker processes, each with its own engine (one GPU each, "
                              "or a share of the CPU cores); the tags equal one process's"),
    store: Optional[str] = StoreOpt,
    **settings,
) -> None:
    """Tag every problem of the current dataset with the model's pass rate and a difficulty."""
    from storage.store import Store

    _check_nproc(nproc)
    _check_model_dir("--model", model)
    root = store_root(store)
    if Store(root).current_version() is None:
        raise UserError(f"--store {root}: no curated dataset (run klear curate first)")
    cfg = _checked(lambda: build_config(DifficultyConfig, settings))
    check_model(model, max_tokens=cfg.max_tokens)
    quiet_prefect_defaults()
    from flows.tag_difficulty import tag_difficulty as tag_flow

    v = run_flow(tag_flow, model=model, store=root, config=cfg, nproc=nproc)
    console.print(f"dataset {v['id']} (difficulty by {v['parameters']['model']}, k={cfg.k}) is now current in {Store(root).catalog_path}")


def _check_data(data: str) -> None:
    """DATA is a file, a store directory, or `STORE#VERSION` (a store's pinned dataset version)."""
    from storage.refs import data_ref

    try:
        ref = data_ref(data)
    except ValueError as e:
        raise UserError(f"--data {e}") from None
    if ref is not None and ref.version is not None:
        from storage.store import Store

        if not Store(ref.store).has_version(ref.version):
            raise UserError(f"--data {data}: store {ref.store} has no dataset version {ref.version!r}")
        return
    if not Path(data).exists():
        raise UserError(f"--data {data}: no such file or store")
    if ref is not None:  # a directory: a store with a curated dataset, or a mistake (`data/` for `data/x.jsonl`)
        from storage.store import Store

        try:
            current = Store(ref.store).current_version()
        except Exception as e:  # a catalog file that is not DuckDB, unreadable, ...
            raise UserError(f"--data {data}: not a readable store ({type(e).__name__})") from None
        if current is None:
            raise UserError(f"--data {data}: a directory that is not a store with a curated dataset "
                            "(expected a .jsonl/.parquet file or a store; run klear curate first)")
        return
    if Path(data).is_file():  # a bad row is the user's to fix: one line now, not a flow's traceback later
        from tasks.training.sft_data import read_problems

        try:
            read_problems(data)
        except (ValueError, OSError) as e:
            raise UserError(f"--data {e}") from None


@app.command()
@with_config_options(RLConfig, nested=RL_NESTED)
def rl(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", help="HF model directory (usually the SFT checkpoint); with "
                              "--dry-run also a model shape (" + ", ".join(SHAPES) + ")"),
    data: Optional[str] = typer.Option(None, "--data", help="A store (its current problems) or a canonical "
                                       ".jsonl/.parquet (required unless --dry-run)"),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (HF checkpoint + checkpoints/ + "
                                      "metrics; required unless --dry-run)"),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Processes (GPUs) for torchrun (--strategy "
                                        "ddp|fsdp); default 1 (in this process), or the preset's"),
    preset: Optional[str] = typer.Option(None, "--preset", help="Start from a named run: " + "; ".join(
        f"{k}: {p.description}" for k, p in RL_PRESETS.items()) + ". Flags left at their defaults take the "
        "preset's values"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the per-GPU memory plan (parameters, gradients, "
                                 "optimizer, activations, the engine's KV cache, tokens per step) without "
                                 "loading weights, and exit; exit 1 when it cannot fit"),
    gpu_memory: Optional[float] = typer.Option(None, "--gpu-memory", help="GiB per GPU for --dry-run (default: "
                                               "this machine's GPU, else the preset's, else 80)"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in --out"),
    force: bool = typer.Option(False, "--force", help="Start over in an --out holding another run's checkpoints"),
    store: Optional[str] = typer.Option(None, "--store", help="Store whose catalog records the checkpoint "
                                        "(default: the store --data names, else $KLEAR_STORE or ./klear-store)"),
    **settings,
) -> None:
    """GPPO reinforcement learning with group rollouts (math-verify and sandbox rewards)."""
    if preset is not None and preset not in RL_PRESETS:
        raise UserError(f"--preset {preset!r}: unknown (known: {', '.join(RL_PRESETS)})")
    chosen = RL_PRESETS[preset] if preset else None
    if chosen:
        settings = under_preset(settings, chosen.config, given_on_command_line(ctx))
    nproc = nproc if nproc is not None else (chosen.hardware.nproc if chosen else 1)
    _check_nproc(nproc)
    cfg = _checked(lambda: build_config(RLConfig, settings, nested=RL_NESTED))
    from tasks.training.rl_engine import engine_layout_problem

    if problem := engine_layout_problem(nproc, cfg.tensor_parallel, cfg.prompts_per_step):
        raise UserError(problem)
    if dry_run:
        _print_rl_plan(model, data, cfg, nproc, gpu_memory, chosen)
        return
    for flag, value in (("--data", data), ("--out", out)):
        if value is None:
            raise UserError(f"{flag} is required (only --dry-run runs without it)")
    _check_model_dir("--model", model)
    _check_data(data)
    check_training_rows(data, "rl", cfg)
    check_model(model, max_tokens=cfg.max_tokens)
    if cfg.eval_benchmark:
        check_benchmark(f"--eval-benchmark {cfg.eval_benchmark}", cfg.eval_benchmark, model, cfg.max_tokens)
    if store is not None:
        store = store_root(store)
    prepare_out(out, resume, force)
    quiet_prefect_defaults()
    _starting(f"rl ({cfg.loss})", f"training into {out}")
    from flows.rl import rl as rl_flow
    from tasks.training.launch import RanksFailed

    res = run_flow(rl_flow, model=model, data=data, out=out, config=cfg, resume=resume, store=store, nproc=nproc,
                   user_errors=(ValueError, RanksFailed))
    console.print(f"checkpoint {res['checkpoint']}: {out}  ({res['steps']} steps, final reward {res['final_reward']:.3f}; "
                  f"metrics: {out}/metrics.jsonl, TensorBoard: {out}/tb)")


@app.command()
@with_config_options(RLConfig, skip=("seed", "eval_benchmark"), nested=RL_NESTED)
def ablate(
    model: str = typer.Option(..., "--model", help="HF model directory every run starts from"),
    data: str = typer.Option(..., "--data", help="A store (its current problems) or a canonical .jsonl/.parquet"),
    out: str = typer.Option(..., "--out", help="Directory of the runs (one content-addressed directory each)"),
    benchmark: str = typer.Option(..., "--benchmark", help="Held-out canonical file (NAME=PATH or PATH)"),
    vary: Optional[list[str]] = typer.Option(None, "--vary", help="FIELD=V1,V2: an RL setting and its values "
                                             "(nested: reward.code_mode=soft,hard; a tuple's items joined by |); "
                                             "repeat: every combination is an arm"),
    losses: Optional[str] = typer.Option(None, "--losses", help="Shorthand for --vary loss=...; with neither, "
                                         "the arms are gppo,grpo,cispo"),
    seeds: str = typer.Option("1,2", "--seeds", help="Comma-separated seeds; each arm runs once per seed"),
    nproc: int = typer.Option(1, "--nproc", help="Processes (GPUs) for each run's torchrun; 1: in this process"),
    store: Optional[str] = StoreOpt,
    **settings,
) -> None:
    """Compare RL settings on equal data and seeds: per arm, mean final held-out avg@k with its 95% interval
    and mean best avg@k. Runs are cached: a rerun trains nothing, an added seed trains only that seed."""
    from tasks.training.ablation import arm_config, arms, parse_value

    _check_model_dir("--model", model)
    _check_data(data)
    _check_nproc(nproc)
    bench = benchmark.split("=", 1)[-1]
    check_benchmark(f"--benchmark {benchmark}", bench)
    try:
        seed_list = [int(x) for x in seeds.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--seeds {seeds!r}: expected comma-separated integers") from None
    if not seed_list:
        raise UserError("--seeds: expected at least one seed")
    axes = _vary_axes(vary or [], losses)
    base = _checked(lambda: build_config(RLConfig, settings, nested=RL_NESTED))
    axes = _checked(lambda: {name: [parse_value(RLConfig, name, v) for v in values] for name, values in axes.items()})
    _checked(lambda: [arm_config(base, arm, s) for arm in arms(axes) for s in seed_list])
    check_model(model, max_tokens=base.max_tokens)
    check_benchmark(f"--benchmark {benchmark}", bench, model, base.max_tokens)
    if store is not None:
        store = store_root(store)
    claim_out(out)
    quiet_prefect_defaults()
    _starting("ablate", f"{len(arms(axes))} arms × {len(seed_list)} seeds into {out}")
    from flows.rl import ablate as ablate_flow
    from tasks.training.launch import RanksFailed

    table = run_flow(ablate_flow, model=model, data=data, out=out, benchmark=bench, vary=axes, seeds=seed_list,
                     config=base, store=store, nproc=nproc, user_errors=(ValueError, RanksFailed))
    t = Table(title=f"held-out avg@{base.eval_k}: mean over seeds {seed_list} (± 95% interval)")
    for col in ("arm", "final avg@k", "best avg@k", "low-clip tokens", "high-clip tokens", "entropy"):
        t.add_column(col)

    def fig(value, ci=None, fmt=".3f"):
        return "—" if value is None else f"{value:{fmt}}" + (f" ± {ci:.3f}" if ci is not None else "")

    for r in table:
        t.add_row(r["arm"], fig(r["final_avg_at_k"], r["final_ci95"]), fig(r["best_avg_at_k"], r["best_ci95"]),
                  fig(r["clip_frac_low"], fmt=".4f"), fig(r["clip_frac_high"], fmt=".4f"), fig(r["entropy"]))
    console.print(t)


def _vary_axes(vary: list[str], losses: str | None) -> dict[str, list[str]]:
    """`--vary FIELD=V1,V2` (repeatable) and `--losses` as {field: [value text]}; default: the three losses."""
    axes: dict[str, list[str]] = {}
    for item in vary:
        name, eq, values = item.partition("=")
        name = name.strip().replace("-", "_")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not (eq and name and items):
            raise UserError(f"--vary {item!r}: expected FIELD=VALUE1,VALUE2")
        if name in axes:
            raise UserError(f"--vary {name}: given twice")
        axes[name] = items
    if losses is not None:
        if "loss" in axes:
            raise UserError("--losses and --vary loss=... both given: use one")
        axes = {"loss": [v.strip() for v in losses.split(",") if v.strip()], **axes}
        if not axes["loss"]:
            raise UserError("--losses: expected a comma-separated list of policy losses")
    return axes or {"loss": ["gppo", "grpo", "cispo"]}


@app.command()
def pipeline(
    store: Optional[str] = StoreOpt,
    seed: int = typer.Option(0, "--seed"),
    scale: float = typer.Option(1.0, "--scale", help="Size of the bundled demo data"),
) -> None:
    """The end-to-end pipeline on the bundled data: curate → verify → SFT → difficulty → RL → evaluate."""
    if scale <= 0:
        raise UserError("--scale must be positive")
    _run_pipeline(store, seed, scale)


def _run_pipeline(store: str | None, seed: int, scale: float) -> None:
    import json

    from storage.store import Store
    from tasks.pipeline.config import PipelineConfig

    root = store_root(store)
    quiet_prefect_defaults()
    _starting("pipeline", f"store {root}; each stage prints a line as it starts and ends")
    from flows.pipeline import pipeline as pipeline_flow

    state = run_flow(pipeline_flow, PipelineConfig(store=root, seed=seed, demo_scale=scale), return_state=True)
    try:
        summary = state.result()  # a failed run raises its error here, as a plain call would
    except ValueError as e:  # bad input the stages name (file, row, directory): one line
        raise UserError(str(e)) from None
    st = Store(root)
    print_curation_summary(st.load_version(summary["dataset"]).__dict__, root)
    t = Table(title=f"held-out {summary['benchmark']}: avg@{summary['k']} by stage")
    for col in ("stage", "avg@k", "checkpoint"):
        t.add_column(col)
    for stage in ("base", "sft", "rl"):
        t.add_row(stage, f"{summary[stage + '_avg_at_k']:.3f}", summary[stage])
    console.print(t)
    console.print("catalog tables: datasets, checkpoints, evaluations; views: problems, dropped, verifications")
    console.print(f"TensorBoard: .venv/bin/tensorboard --logdir {st.path('models')}")
    console.print(_prefect_ui_line(state.state_details.flow_run_id))
    console.print(json.dumps(summary))


def _prefect_ui_line(flow_run_id) -> str:
    """Where to see the run: its page on a configured Prefect server; how to get one after a temporary server."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value() if os.environ.get("PREFECT_API_URL") else None
    if ui:
        return f"Prefect UI: {ui.rstrip('/')}/runs/flow-run/{flow_run_id}  (flows, logs and artifacts of this run)"
    return ("Prefect UI: this run used a temporary server, now stopped; run `prefect server start`, set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api and re-run to see its flows and artifacts (stages are cached)")


verify_cli.register(app)


def main() -> None:
    early_defaults()  # every command (`klear verify`, `klear sandbox` too), before Prefect or transformers load
    try:
        rv = app(standalone_mode=False)
    except UserError as e:
        e.show()
        sys.exit(2)
    except click_exceptions.NoArgsIsHelpError:
        sys.exit(0)  # typer has already printed the help
    except click_exceptions.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "klear"
        print(f"{cmd}: error: {e.format_message()}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("klear: aborted", file=sys.stderr)
        sys.exit(130)
    except click_exceptions.ClickException as e:
        print(f"klear: error: {e.format_message()}", file=sys.stderr)
        sys.exit(e.exit_code)
    except TimeoutError as e:  # a store's catalog lock held past the bound (storage/file_lock.py)
        print(f"klear: error: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
