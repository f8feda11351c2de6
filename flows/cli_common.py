"""Shared CLI plumbing: user errors are one line on stderr and exit 2, never a traceback."""
from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

try:  # typer >= 0.29 vendors its own click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions


class UserError(Exception):
    """A bad invocation or bad input file: printed as one line on stderr, exit code 2."""
    exit_code = 2

    def show(self) -> None:
        """One line, whatever the message holds (an exception text from a library may span several)."""
        print("klear: error: " + re.sub(r"\s*[\r\n]+\s*", " ", str(self).strip()), file=sys.stderr)


def parse_pairs(values: list[str] | None, flag: str, sep: str = "=") -> dict[str, str]:
    """`NAME=VALUE` options → dict, in the order given; a malformed or repeated NAME is a UserError."""
    out: dict[str, str] = {}
    for v in values or []:
        name, ok, value = v.partition(sep)
        if not ok or not name.strip() or not value.strip():
            raise UserError(f"{flag} {v!r}: expected NAME{sep}VALUE")
        if name in out:
            raise UserError(f"{flag} {v!r}: {name!r} given twice")
        out[name.strip()] = value.strip()
    return out


def no_prefect_telemetry() -> None:
    """Analytics off, and so no telemetry notice, unless the user turned analytics on. Prefect 3.9 prints
    its first-run notice ("Prefect collects anonymous usage data…") on a terminal when it is imported and
    sends client events unless DO_NOT_TRACK is set; PREFECT_SERVER_ANALYTICS_ENABLED=false only quiets the
    (ephemeral) server. So both are set, before anything imports Prefect."""
    if os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED", "").strip().lower() not in ("true", "1", "yes"):
        os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def early_defaults() -> None:
    """Set before any command imports Prefect or Hugging Face libraries (which read them at import):
    no telemetry, and off a terminal no tqdm bars (a log gets klear's plain progress lines, no redraws)."""
    no_prefect_telemetry()
    if not _isatty(sys.stderr):
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def quiet_terminal_logging() -> dict[str, str]:
    """Prefect logging for a CLI run: the terminal gets warnings and errors only (klear's own progress
    lines and bars are on stderr already), while a run's log records at INFO — progress every few seconds,
    stage lines, Prefect's state changes — still go to the API, so the flow run's log in the UI is not
    empty. Prefect's run loggers (prefect.flow_runs, prefect.task_runs) send to the API handler and also
    propagate to the console handler on the root logger, so INFO is let through on those two loggers and
    held back on the console handler."""
    return {"PREFECT_LOGGING_LEVEL": "WARNING",                       # prefect.* (client, engine internals)
            "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "INFO",  # run logs → API handler
            "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "INFO",
            "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING"}       # ... but not the terminal


def quiet_prefect_defaults() -> None:
    """Keep a CLI run's Prefect noise down unless the user configured Prefect themselves."""
    early_defaults()
    if "PREFECT_LOGGING_LEVEL" not in os.environ:
        os.environ.update(quiet_terminal_logging())
    os.environ.setdefault("DASK_DISTRIBUTED__LOGGING__DISTRIBUTED", "warning")
    # the ephemeral server needs longer than Prefect's 20 s default on a loaded 2-core machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


# -- user errors raised inside a flow: one line, not a Prefect traceback followed by the line ----------------

class _DropUserErrors(logging.Filter):
    """Console filter: drops Prefect's report of a user error (the record carrying the exception, then the
    "Finished in state Failed(...)" lines that repeat its message). The API handler keeps them, so the
    Prefect UI still shows the failed run in full."""

    def __init__(self, types: tuple[type[BaseException], ...]):
        super().__init__()
        self.types, self.seen = types, []

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, self.types):
            self.seen.append(re.split(r"['\"\\\n]", str(exc), maxsplit=1)[0][:60])
            return False
        if record.levelno >= logging.ERROR and any(m and m in record.getMessage() for m in self.seen):
            return False
        return True


def _console_handlers() -> list[logging.Handler]:
    loggers = [logging.getLogger()] + [lg for lg in logging.root.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    return [h for lg in loggers for h in lg.handlers if type(h).__name__ == "PrefectConsoleHandler"]


def run_flow(flow, *args, user_errors: tuple[type[BaseException], ...] = (ValueError,), **kwargs):
    """Run a Prefect flow; an exception of `user_errors` (the stage's way of saying the input is bad:
    tasks raise ValueError naming file, row or directory) becomes a UserError, the one line the user sees,
    and Prefect's console report of it is dropped. Other exceptions keep Prefect's report (a bug)."""
    flt = _DropUserErrors(user_errors)
    handlers = _console_handlers()
    for h in handlers:
        h.addFilter(flt)
    try:
        return flow(*args, **kwargs)
    except user_errors as e:
        raise UserError(str(e)) from None
    finally:
        for h in handlers:
            h.removeFilter(flt)


# -- stores and output directories ------------------------------------------------------------------------

def check_store(root: str, flag: str = "--store") -> None:
    """A local store must be a directory this process can write (created if missing): one line otherwise
    (a file given as --store, a parent that is a file, a read-only or forbidden place)."""
    from storage import paths
    from storage.claims import ClaimError, writable_dir

    if not paths.is_local(root):
        return
    try:
        writable_dir(root.removeprefix("file://"))
    except ClaimError as e:
        raise UserError(f"{flag} {e}") from None


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


def prepare_out(out: str, resume: bool, force: bool, flag: str = "--out") -> None:
    """A trainer's --out before any flow: claimed for this command (`claim_out`); with --resume its newest
    complete checkpoint must be readable; without, it must not hold another run's checkpoints or metrics
    unless --force, which clears them (tasks/training/checkpoint.py). One line otherwise."""
    from tasks.training.checkpoint import CheckpointError, clear_previous_run, previous_run, resume_checkpoint

    if resume and force:
        raise UserError("--resume and --force contradict each other: --resume continues the run in "
                        f"{flag} {out}, --force discards it")
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
    if found:
        clear_previous_run(Path(out))


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


def store_root(store: str | None) -> str:
    """The store a command writes (--store, else $KLEAR_STORE, else ./klear-store), checked by
    `check_store` and named by where it came from."""
    from storage.store import resolve_store

    root = resolve_store(store)
    check_store(root, "--store" if store else "$KLEAR_STORE" if os.environ.get("KLEAR_STORE") else "store (default)")
    return root


def _without_path(message: str, path: str) -> str:
    """`PATH: why` → `why`, so a message that already names the file does not name it twice."""
    return message[len(path):].lstrip(": ") if message.startswith(path) else message


def check_benchmark(label: str, path: str, model: str | None = None, max_tokens: int | None = None) -> None:
    """A benchmark file before any flow: a .jsonl/.parquet file (not a directory), every row canonical, and,
    with `model`, every prompt within its context minus max_tokens (tasks/evaluation/evaluate.py:
    require_fit). One line `LABEL: why` otherwise."""
    from tasks.curation.sources import check_source_file
    from tasks.evaluation.evaluate import check_benchmark_fits, load_benchmark
    from tasks.models.checks import ModelDirError, check_model_dir

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


def check_training_rows(data: str, stage: str, cfg=None) -> None:
    """The rows a trainer will use exist, before Prefect starts (the trainer would say the same after it):
    sft needs a row with a response; rl a rewardable problem of cfg's domains and pass-rate window."""
    try:
        if stage == "sft":
            from tasks.training.sft_data import load_sft_rows

            if not load_sft_rows(data).rows:
                raise ValueError(f"{data}: no rows with a response to train on")
        else:
            from tasks.training.rl_data import load_rl_rows

            load_rl_rows(data, tuple(cfg.domains), cfg.selection)
    except ValueError as e:
        raise UserError(f"--data {e}") from None
