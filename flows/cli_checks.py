"""Input checks shared by the commands, run before any flow starts: stores, output directories, model
directories, data, sources and benchmarks. Each failure is one UserError line naming the flag or file."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from flows.cli_common import UserError, console
from tasks.config_checks import error_line


def check_store(root: str, flag: str = "--store") -> None:
    """A store root must be one a store can live at (storage/store.check_root: a URL this machine can open,
    a remote root with its local $KLEAR_CATALOG, no character DuckDB reads as a pattern); a local one a
    directory this process can write, or could create (it is created when the first stage writes, so a
    refused invocation leaves nothing); and a catalog already there must be DuckDB files. One line
    otherwise (a file given as --store, a parent that is a file, a read-only or forbidden place)."""
    from storage import paths
    from storage.catalog import Catalog
    from storage.claims import ClaimError, could_create_dir
    from storage.errors import StoreError
    from storage.store import Store, check_root

    try:
        check_root(root)
    except StoreError as e:
        raise UserError(f"{flag} {e}") from None
    if paths.is_local(root):
        try:
            could_create_dir(root.removeprefix("file://"))
        except ClaimError as e:
            raise UserError(f"{flag} {e}") from None
    try:
        Catalog(Store(root).catalog_path).check()
    except StoreError as e:
        raise UserError(f"{flag} {root}: {e}") from None


def check_work_dir(path: str, flag: str = "--work-dir") -> None:
    """A scratch directory (curation's parts and spill files) must be a directory this process can write,
    or could create: one line otherwise (a file, a parent that is a file, a read-only place). Creates nothing."""
    from storage.claims import ClaimError, could_create_dir

    try:
        could_create_dir(path)
    except ClaimError as e:
        raise UserError(f"{flag} {e}") from None


def check_backend(backend: str, flag: str = "--backend") -> None:
    """`--backend vllm` needs a vLLM that imports: one line before any work, not an ImportError in a flow.
    It is imported here (the engine imports it anyway, in this process when it runs here); `auto` picks
    vLLM only when it is there (tasks/generation/engine.py), so it needs no check."""
    if backend != "vllm":
        return
    import importlib
    import importlib.util

    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a vllm module entry of None, a broken parent package
        found = False
    if not found:
        raise UserError(f"{flag} vllm: vLLM is not installed in this environment (scripts/install-vllm.sh, "
                        "or --backend hf)")
    try:
        importlib.import_module("vllm")
    except Exception as e:  # an install built for another torch or CUDA fails in several ways
        raise UserError(f"{flag} vllm: vLLM cannot be imported ({error_line(e)}); reinstall it "
                        "(scripts/install-vllm.sh) or use --backend hf") from None


def check_dask(address: str, flag: str = "--dask") -> None:
    """An existing Dask scheduler's address, before any work starts: a port that refuses the connection
    (tasks/dask_client.refusal) is one line in a second, not a failure after progress has begun. An address
    that does not answer at all is left to Dask's connect and its timeout."""
    from tasks.dask_client import refusal

    if why := refusal(address):
        raise UserError(f"{flag} {address}: cannot reach the scheduler ({why})")


def check_input_file(label: str, path: str) -> None:
    """A file the command will read, before any work: a URL this machine can open (a known protocol whose
    library is installed), and locally not a FIFO, socket or device (a source is read more than once:
    hashed, then ingested; a pipe would block or give its rows once). `label` names the flag: one line
    `LABEL: why`. A missing file or a directory is left to the format's own check, which says so."""
    import stat

    from storage import paths

    if why := paths.url_problem(path):
        raise UserError(f"{label}: {why}")
    if not paths.is_local(path) or path.startswith("hf:"):
        return
    try:
        mode = os.stat(path.removeprefix("file://")).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else \
            "a device"
        raise UserError(f"{label}: is {kind}, not a regular file (it is read more than once: save it to a "
                        "file first)")


def claim_out(out: str, flag: str = "--out") -> None:
    """Claim `out` for this command until it exits (storage/claims.py): a file given as --out, an
    unwritable place, or a directory another live run holds is one line. The claim is released at exit;
    a trainer running in this process (or ranks it launches) shares it."""
    import atexit

    from storage.claims import ClaimError, acquire, release

    try:
        created = acquire(out)
    except ClaimError as e:
        raise UserError(f"{flag} {e}") from None
    if created:
        atexit.register(release, out)


def prepare_out(out: str, resume: bool, force: bool, flag: str = "--out", main_node: bool = True) -> None:
    """A trainer's --out before any flow: claimed for this command (`claim_out`); with --resume its newest
    complete checkpoint must be readable; without, it must not hold another run's checkpoints or metrics
    unless --force, which clears them (tasks/training/checkpoint.py). One line otherwise.
    On a node other than 0 of a run over several machines (`main_node` False; flows/cli_nodes.py) nothing
    is claimed or cleared — node 0's launcher does both on the shared --out — and with --force this
    launcher waits until node 0 has cleared it (`wait_until_cleared`), since its ranks refuse such an --out."""
    from tasks.training.checkpoint import CheckpointError, clear_previous_run, previous_run, resume_checkpoint

    if resume and force:
        raise UserError("--resume and --force contradict each other: --resume continues the run in "
                        f"{flag} {out}, --force discards it")
    if main_node:
        claim_out(out, flag)
    if resume:
        try:
            resume_checkpoint(Path(out))
        except CheckpointError as e:
            raise UserError(f"--resume: {e}") from None
        return
    found = previous_run(Path(out), models=True)
    if found and not force:
        raise UserError(f"{flag} {out}: holds {found}; pass --resume to continue it or --force to start over")
    if found and main_node:
        clear_previous_run(Path(out))
    elif found:
        wait_until_cleared(out, flag)


# how long a node other than 0, given --force, waits for node 0 to clear --out before starting its ranks:
# torchrun's static rendezvous waits as long for node 0
CLEAR_WAIT_S = 600.0


def wait_until_cleared(out: str, flag: str = "--out", wait_s: float = CLEAR_WAIT_S) -> None:
    """Return once `out` holds no previous run's checkpoints or metrics (node 0's --force cleared them);
    one line after `wait_s` seconds."""
    import time

    from tasks.training.checkpoint import previous_run

    deadline = time.monotonic() + wait_s
    while (found := previous_run(Path(out))) and time.monotonic() < deadline:
        time.sleep(1.0)
    if found:
        raise UserError(f"--force: node 0 did not clear {flag} {out} of {found} within {wait_s:.0f} s (is it on "
                        "storage every node shares?)")


def check_model(model: str, flag: str = "--model", max_tokens: int | None = None) -> None:
    """The model directory loads (tasks/models/factory.check_model_dir), and `max_tokens` leaves room for
    a prompt in its context: one line naming the file or flag otherwise."""
    from tasks.models.checks import ModelDirError, check_model_dir, context_length

    try:
        check_model_dir(model)
    except ModelDirError as e:
        raise UserError(f"{flag} {e}") from None
    ctx = context_length(model)
    if max_tokens is not None and ctx is not None and max_tokens >= ctx:
        raise UserError(f"--max-tokens {max_tokens}: must be below the model's context of {ctx} tokens "
                        f"({model}/config.json max_position_embeddings)")


def store_root(store: str | None, flag: str = "--store") -> str:
    """The store a command writes (--store, else $KLEAR_STORE, else ./klear-store), checked by
    `check_store` and named by where it came from (`flag`: what gave `store`, when not --store)."""
    from storage.store import resolve_store

    root = resolve_store(store)
    check_store(root, flag if store else "$KLEAR_STORE" if os.environ.get("KLEAR_STORE") else "store (default)")
    return root


def recording_store_root(store: str, what: str) -> str:
    """A --store that a trainer or `klear eval` only records `what` in (store_root's checks), and one
    `klear: warning:` line when no store is there yet: a misspelt path would otherwise become a new store in
    silence, holding a record whose dataset is in another."""
    from storage import paths
    from storage.store import Store

    root = store_root(store)
    if not paths.exists(Store(root).catalog_path):
        print(f"klear: warning: --store {store}: no store there yet; this run creates one to record {what}",
              file=sys.stderr, flush=True)
    return root


def check_record_store(data: str) -> None:
    """Without --store, a trainer records its checkpoint in the store --data names (check_data checked it),
    else in the default store ($KLEAR_STORE or ./klear-store): that one is checked like a --store."""
    from storage.store import store_of

    if store_of(data) is None:
        store_root(None)


def _without_path(message: str, path: str) -> str:
    """`PATH: why` → `why`, so a message that already names the file does not name it twice."""
    return message[len(path):].lstrip(": ") if message.startswith(path) else message


def check_benchmark(label: str, path: str, model: str | None = None, max_tokens: int | None = None) -> None:
    """A benchmark file before any flow: a .jsonl/.parquet file (not a directory), every row canonical, and,
    with `model`, every prompt within its context minus max_tokens (tasks/evaluation/evaluate.py:
    require_fit). One line `LABEL: why` otherwise."""
    from tasks.records.sources import check_source_file
    from tasks.evaluation.evaluate import check_benchmark_fits, load_benchmark
    from tasks.models.checks import ModelDirError, check_model_dir

    check_input_file(label, path)
    try:
        check_source_file(path)
        load_benchmark(path)
    except ValueError as e:
        raise UserError(f"{label}: {_without_path(str(e), path)}") from None
    if model is None:
        return
    try:  # transformers loads the tokenizer here anyway: the model's deep check first costs no more
        check_model_dir(model, deep=True)
    except ModelDirError as e:
        raise UserError(f"--model {e}") from None
    try:
        check_benchmark_fits(model, path, max_tokens)
    except ValueError as e:
        raise UserError(f"{label}: {_without_path(str(e), path)}") from None


def check_training_rows(data: str, stage: str, cfg=None) -> str:
    """The rows a trainer will use exist, before Prefect starts (the trainer would say the same after it):
    sft needs a row with a response; rl a rewardable problem of cfg's domains and pass-rate window. Returns
    the dataset version `data` resolves to now."""
    try:
        if stage == "sft":
            from tasks.training.sft_data import load_sft_rows

            rows = load_sft_rows(data)
            if not rows.rows:
                raise ValueError(f"{data}: no rows with a response to train on")
            return rows.dataset
        from tasks.training.rl_data import load_rl_rows

        return load_rl_rows(data, tuple(cfg.domains), cfg.selection)[1]
    except ValueError as e:
        raise UserError(f"--data {e}") from None


def already_trained(out: str, stage: str, model: str, data: str, dataset: str, cfg, resume: bool,
                    force: bool) -> bool:
    """Whether `out` already holds this very run, finished (tasks/training/finished.py): then the command
    says so and does nothing. A finished run of other settings is one line saying what differs (--force
    trains anew in `out`); without --resume or --force only."""
    from dataclasses import asdict

    from tasks.training.finished import finished_run

    if resume or force:
        return False
    done = finished_run(out, stage, model, data, dataset, asdict(cfg))
    if done is None:
        return False
    if done.differences:
        raise UserError(f"--out {out}: holds a finished {stage} run of other settings ("
                        f"{'; '.join(done.differences[:4])}{'; …' if len(done.differences) > 4 else ''}); "
                        "pass --force to train anew there, or another --out")
    console.print(f"{out}: already holds this {stage} run, finished at step {done.steps} (same model, data "
                  f"{done.dataset} and settings); nothing to do (--force trains it again)")
    return True


def check_source_path(flag: str, name: str, path: str) -> None:
    """A source or benchmark PATH: a known format, an existing file (not a directory), a readable Parquet."""
    from storage import paths
    from tasks.records.sources import SourceError, check_source_file

    check_input_file(f"{flag} {name}={path}", path)
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


def check_nproc(nproc: int) -> None:
    """One rule for every command's --nproc: at least 1, at most one process per visible GPU."""
    from tasks.generation.parallel import nproc_problem

    if why := nproc_problem(nproc):
        raise UserError(f"--nproc {why}")


def resolve_model_flag(flag: str, value: str) -> str:
    """A model flag's value as a model directory: a directory as it is, a pretrained model's name or a Hub id
    fetched once into the model cache (tasks/models/pretrained.resolve_model; progress on stderr). One line
    naming the flag when it names no model to be had. (`check_model` then loads what it names.)"""
    import sys

    from tasks.models.pretrained import FetchError, resolve_model

    try:
        return str(resolve_model(value, log=lambda line: print(f"klear: {line}", file=sys.stderr)))
    except FetchError as e:
        raise UserError(f"{flag} {e}") from None


def check_data(data: str) -> None:
    """DATA is a file, a store directory, or `STORE#VERSION` (a store's pinned dataset version)."""
    from storage.refs import data_ref

    check_input_file(f"--data {data}", data)
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
        except ValueError as e:  # a catalog file that is not DuckDB (StoreError: its one line), ...
            raise UserError(f"--data {data}: not a readable store ({e})") from None
        except Exception as e:  # unreadable, ...
            raise UserError(f"--data {data}: not a readable store ({type(e).__name__})") from None
        if current is None:
            raise UserError(f"--data {data}: a directory that is not a store with a curated dataset "
                            "(expected a .jsonl/.parquet file or a store; run klear curate first)")
        return
    if Path(data).is_file():  # a bad row is the user's to fix: one line now, not a flow's traceback later
        from tasks.curation.problems import read_problems

        try:
            read_problems(data)
        except (ValueError, OSError) as e:
            raise UserError(f"--data {e}") from None
