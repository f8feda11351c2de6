"""Shared CLI plumbing: user errors are one line on stderr and exit 2, never a traceback — a store fault or
a full disk met anywhere too (`fault_line`); Ctrl-C ends a command with the one line `klear: interrupted`
and exit 130, its worker processes' tracebacks dropped; the Prefect environment of a CLI run; the console
and options every command shares."""
from __future__ import annotations

import atexit
import logging
import os
import re
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

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
        name, value = name.strip(), value.strip()
        if not ok or not name or not value:
            raise UserError(f"{flag} {v!r}: expected NAME{sep}VALUE")
        if name in out:  # " m=B" names the same `m` as "m=A": it is stored stripped
            raise UserError(f"{flag} {v!r}: {name!r} given twice")
        out[name] = value
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
    """Before a command's flow: Prefect's settings for a CLI run (`prefect_env_defaults`), a configured
    Prefect API that answers (else one line), and a temporary server that lives no longer than this
    command, starting from here while the command imports its flow (flows/cli_prefect.py; `run_flow`
    waits for it)."""
    from flows.cli_prefect import start_temporary_server

    check_prefect_api()
    start_temporary_server()


def prefect_env_defaults() -> None:
    """Keep a CLI run's Prefect noise down unless the user configured Prefect themselves. Environment only,
    and before anything imports Prefect: its settings are read once, when it is imported."""
    early_defaults()
    if "PREFECT_LOGGING_LEVEL" not in os.environ:
        os.environ.update(quiet_terminal_logging())
    os.environ.setdefault("DASK_DISTRIBUTED__LOGGING__DISTRIBUTED", "warning")
    # the ephemeral server needs longer than Prefect's 20 s default on a loaded 2-core machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


_API_CHECKED: set[str] = set()


def check_prefect_api() -> None:
    """UserError (one line naming the URL) when a configured Prefect API does not answer (flows/cli_prefect
    .api_problem), before any work and before anything is created; nothing when none is configured (a
    temporary server starts then). Probed once per process; sets `prefect_env_defaults` first."""
    from flows.cli_prefect import api_problem, api_url

    prefect_env_defaults()
    url = api_url()
    if url is None or url in _API_CHECKED:
        return
    if why := api_problem(url):
        raise UserError(f"PREFECT_API_URL {url}: {why}; start the server (prefect server start) or unset "
                        "PREFECT_API_URL to use a temporary one")
    _API_CHECKED.add(url)


# -- Ctrl-C: one line, the work stopped --------------------------------------------------------------------

INTERRUPTED = threading.Event()  # set by the first Ctrl-C (SIGINT) of this command
_TEARDOWN_HOOKED = threading.Event()  # `_after_teardown` is registered (once a process)


def note_interrupts() -> None:
    """Ctrl-C, wherever it comes, ends the command with the line `klear: interrupted` and exit 130, or —
    once the command is over — not at all; never by the signal itself (status −2) and never a traceback:

    - while the command runs (main() has not returned): noted (INTERRUPTED), then KeyboardInterrupt as
      before: typer turns it into a silent exit 130 and Prefect logs its run's crash, so main() and the
      console filter need to know it was the user's Ctrl-C to print one line instead;
    - while it tears down (the program's code has finished, `_tearing_down`: the interpreter runs the thread
      pools' exit hooks, which join their workers, joins the other threads, then runs the exit hooks: the
      temporary Prefect server stopped, claims released), a KeyboardInterrupt would only be printed as an
      ignored exception, with its traceback, and the exit status kept: instead the line is printed (unless
      main() already did) and the process ends at once, 130 (`_end_interrupted`); what the teardown left
      undone the command's processes undo themselves (the server exits with its command:
      flows/cli_prefect.py; a stale claim is taken over: storage/claims.py);
    - after the last exit hook (this one's, registered first so it runs last: `_after_teardown`), Ctrl-C
      is ignored: Python restores SIGINT's default action before it frees its modules, and a Ctrl-C then
      would kill the finished command by the signal. It exits with the status main() chose.

    Left alone when SIGINT is not Python's default handler (ignored, or someone else's)."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def on_sigint(signum, frame):
        if _tearing_down(frame):
            _end_interrupted(line=not INTERRUPTED.is_set())
        INTERRUPTED.set()
        raise KeyboardInterrupt

    if not _TEARDOWN_HOOKED.is_set():
        _TEARDOWN_HOOKED.set()
        atexit.register(_after_teardown)
    signal.signal(signal.SIGINT, on_sigint)


def _tearing_down(frame) -> bool:
    """Whether the program's code has finished and the interpreter is tearing down, seen from the frame a
    signal interrupted (the main thread's): while the program runs, its top-level code — the `<module>`
    frame of `__main__` (`python -m flows.cli`, the `klear` script), which calls main() — is on that stack;
    the thread pools' exit hooks, the thread joins and the exit hooks run after it has returned or raised
    SystemExit, with no frame of it left. (Threading marks the main thread stopped only after the pools'
    hooks, so `main_thread().is_alive()` would miss them.)"""
    program = getattr(sys.modules.get("__main__"), "__dict__", None)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is program:
            return False
        frame = frame.f_back
    return True


def _end_interrupted(line: bool) -> None:
    """Ctrl-C during the teardown: what the command printed flushed, `klear: interrupted` (when `line`: not
    when main() has printed it for an earlier Ctrl-C), exit 130 now. From a signal handler: the line is
    written to the descriptor, not through sys.stderr, which the interrupted code may be writing."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe, or a flush the signal interrupted: nothing more to show
            pass
    if line:
        _write_all(2, b"klear: interrupted\n")
    os._exit(130)


def _after_teardown() -> None:
    """The last exit hook (note_interrupts): from here on Ctrl-C is ignored, and the command exits with the
    status main() chose — not killed by SIGINT, whose default action Python restores next."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def quiet_children_after_interrupt() -> Iterator[None]:
    """For a block that starts worker processes writing to this terminal (torchrun and its ranks): their
    stderr — file descriptor 2, which they inherit — goes through a pipe that a thread copies to the real
    stderr as it comes, until Ctrl-C. The terminal's Ctrl-C reaches every process of the foreground
    group: torchrun prints its SignalException traceback and each rank its KeyboardInterrupt traceback
    while they stop, and those are dropped, so the command ends with its one line. Everything they print
    before (a failing rank's error included) is shown as it comes. This process's own sys.stderr keeps
    the real stderr (its progress lines and the final line are not delayed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    saved_stderr = sys.stderr
    sys.stderr = os.fdopen(os.dup(real), "w", buffering=1, encoding=getattr(saved_stderr, "encoding", None),
                           errors=getattr(saved_stderr, "errors", None))
    stop = threading.Event()
    relay = threading.Thread(target=_relay, args=(read_end, real, stop), name="klear-stderr-relay", daemon=True)
    relay.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        own, sys.stderr = sys.stderr, saved_stderr
        stop.set()
        relay.join(timeout=RELAY_DRAIN_S * 10)
        own.close()
        os.close(real)
        if not relay.is_alive():
            os.close(read_end)


RELAY_DRAIN_S = 0.2  # once the block is over, what the pipe still holds is copied until it is quiet this long


def _relay(read_end: int, out: int, stop: threading.Event) -> None:
    """Copy the pipe to `out` until the block ends and the pipe is drained (or closed); drop after Ctrl-C."""
    import select

    while True:
        ready, _, _ = select.select([read_end], [], [], RELAY_DRAIN_S)
        if not ready:
            if stop.is_set():
                return
            continue
        data = os.read(read_end, 1 << 16)
        if not data:
            return
        if not INTERRUPTED.is_set():
            _write_all(out, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except OSError:  # the terminal is gone: nothing to show it on
            return


# -- user errors raised inside a flow: one line, not a Prefect traceback followed by the line ----------------

def store_faults() -> tuple[type[BaseException], ...]:
    """What the store raises for a fault the user can act on (storage/errors.py): always one line."""
    from storage.errors import DiskFull, StoreError

    return StoreError, DiskFull


def fault_line(exc: BaseException) -> str | None:
    """The one line for an exception that is the user's to act on wherever it is raised — a store fault, or
    no room on the disk (any OSError saying so, the file it names) — else None (a bug keeps its traceback)."""
    from storage.errors import is_disk_full

    if isinstance(exc, store_faults()):
        return str(exc)
    if is_disk_full(exc):
        where = getattr(exc, "filename", None)
        why = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:200]
        return f"{str(where) + ': ' if where else ''}no room left on the device ({type(exc).__name__}: {why}); " \
               "free space and rerun"
    return None


class _DropUserErrors(logging.Filter):
    """Console filter: drops Prefect's report of a user error (the record carrying the exception, then the
    "Finished in state Failed(...)" lines that repeat its message). The API handler keeps them, so the
    Prefect UI still shows the failed run in full."""

    def __init__(self, types: tuple[type[BaseException], ...]):
        super().__init__()
        self.types, self.seen = types, []

    def filter(self, record: logging.LogRecord) -> bool:
        if INTERRUPTED.is_set() and record.levelno >= logging.ERROR:
            return False  # Prefect's "Crash detected! ... interrupt signal": the CLI says "interrupted"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and (isinstance(exc, self.types) or fault_line(exc)):
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
    tasks raise ValueError naming file, row or directory) or a store fault (a store or catalog it cannot
    use, no room on the disk: `fault_line`) becomes a UserError, the one line the user sees, and Prefect's
    console report of it is dropped. Other exceptions keep Prefect's report (a bug)."""
    from flows.cli_prefect import wait_for_temporary_server
    from tasks.config_checks import error_line

    try:
        wait_for_temporary_server()  # begun by quiet_prefect_defaults, if it was called
    except Exception as e:  # its start timed out or failed: one line, no traceback
        raise UserError(f"Prefect's temporary server did not start: {error_line(e)}") from None
    user_errors = (*user_errors, *store_faults())
    flt = _DropUserErrors(user_errors)
    handlers = _console_handlers()
    for h in handlers:
        h.addFilter(flt)
    try:
        return flow(*args, **kwargs)
    except user_errors as e:
        raise UserError(str(e)) from None
    except Exception as e:  # no room on the disk, whatever library met it (an OSError, safetensors' error)
        if line := fault_line(e):
            raise UserError(line) from None
        raise
    finally:
        for h in handlers:
            h.removeFilter(flt)
