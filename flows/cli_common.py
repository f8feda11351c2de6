"""Shared CLI plumbing: user errors are one line on stderr and exit 2, never a traceback; the Prefect
environment of a CLI run; the console and options every command shares."""
from __future__ import annotations

import logging
import os
import re
import sys

import typer
from rich.console import Console

try:  # typer >= 0.29 vendors its own click
    from typer._click import exceptions as click_exceptions  # noqa: F401 (flows/cli.py uses it)
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # noqa: F401


class UserError(Exception):
    """A bad invocation or bad input file: printed as one line on stderr, exit code 2."""
    exit_code = 2

    def show(self) -> None:
        """One line, whatever the message holds (an exception text from a library may span several)."""
        print("klear: error: " + re.sub(r"\s*[\r\n]+\s*", " ", str(self).strip()), file=sys.stderr)


console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)

StoreOpt = typer.Option(None, "--store", help="Store directory (default $KLEAR_STORE or ./klear-store)")


def checked(build):
    """Build a config; it checks itself (as it does for a deployment's parameters): its message, one line."""
    from tasks.config_checks import ConfigError

    try:
        return build()
    except ConfigError as e:
        raise UserError(e.message) from None


def starting(what: str, detail: str) -> None:
    """One line on stderr before a long command goes quiet for Prefect's start-up (progress follows)."""
    if os.environ.get("KLEAR_PROGRESS", "").strip().lower() == "off":
        return
    where = f"Prefect at {os.environ['PREFECT_API_URL']}" if os.environ.get("PREFECT_API_URL") else \
        "a temporary local Prefect server starts first"
    print(f"klear {what}: {detail} ({where})", file=sys.stderr, flush=True)


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
