"""The Prefect side of a CLI run: the API a command will use answers before any work starts, and the
temporary server a command starts lives exactly as long as the command.

- `api_problem` (flows/cli_common.check_prefect_api makes it one line): with PREFECT_API_URL set
  (environment or Prefect profile), no answer there (refused, unresolvable, timed out, not an http(s)
  URL) refuses the command before any work and before anything is created; any HTTP answer counts as
  reachable (Prefect Cloud answers /health differently).
- `tie_temporary_server`: Prefect's temporary server (SubprocessASGIServer, started when no API URL is set)
  is a plain child process: a command killed with SIGKILL leaves it running for good, and Ctrl-C reaches
  it too (the terminal signals the whole foreground process group), so it shuts down under the command
  while the command still reports its run's end to it. Each server is therefore started through this
  module's entry point, which (1) moves it into a process group of its own, so only its command stops it
  (at exit, Prefect's own `stop`), and (2) ends it within a second of its command's end however that
  came (tasks/process_lifetime.exit_with_parent: a watch on the parent pid, which, unlike Linux's
  parent-death signal, does not fire when the thread that started it ends: Prefect starts it from
  whichever thread first needs the API).

    python -m flows.cli_prefect PARENT_PID -m uvicorn ARGS...   # what the server's command becomes

- `start_temporary_server` starts that server in a thread as soon as a command knows it will run a flow, so
  its start-up (a process of its own, on another core) runs while the command imports its flow (torch,
  transformers: seconds); `wait_for_temporary_server`, before the flow runs, waits for it to answer.
"""
from __future__ import annotations

import os
import sys

PROBE_TIMEOUT_S = 5.0  # an API that takes longer to answer a health probe is not one a run can use


def api_url() -> str | None:
    """The API a flow will use: PREFECT_API_URL from the environment, else from the Prefect profile."""
    url = os.environ.get("PREFECT_API_URL", "").strip()
    if url:
        return url
    if not _profile_may_set_api():
        return None
    from prefect.settings import get_current_settings

    return (get_current_settings().api.url or "").strip() or None


def _profile_may_set_api() -> bool:
    """Whether a Prefect profile file exists (reading settings costs a Prefect import; skip it when none)."""
    from pathlib import Path

    home = os.environ.get("PREFECT_HOME") or str(Path.home() / ".prefect")
    profiles = os.environ.get("PREFECT_PROFILES_PATH") or str(Path(home) / "profiles.toml")
    return Path(profiles).is_file()


def api_problem(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing answers at `url` (in a few words), or None when something does."""
    import httpx

    if not url.lower().startswith(("http://", "https://")):
        return "not an http(s) URL"
    try:
        httpx.get(url.rstrip("/") + "/health", timeout=timeout_s)
    except httpx.TimeoutException:
        return f"no answer within {timeout_s:g} s"
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"cannot reach it ({type(e).__name__}{': ' + why if why else ''})"
    return None


def tie_temporary_server() -> None:
    """Start Prefect's temporary server through this module (module docstring). Idempotent; nothing to do
    when an API URL is configured (no temporary server starts)."""
    if api_url() is not None:
        return
    from prefect.server.api import server

    cls = getattr(server, "SubprocessASGIServer", None)
    original = getattr(cls, "_run_uvicorn_command", None)
    if original is None or not hasattr(server, "subprocess"):  # another Prefect: its server runs untied
        return
    if getattr(original, "klear_tied", False):
        return

    def run_uvicorn_command(self):
        real = server.subprocess
        server.subprocess = _TiedSubprocess(real)
        try:
            return original(self)
        finally:
            server.subprocess = real

    run_uvicorn_command.klear_tied = True
    cls._run_uvicorn_command = run_uvicorn_command


_STARTING: list = []  # the thread starting this command's temporary server, until it is waited for


def start_temporary_server() -> None:
    """Start the temporary server (tied: `tie_temporary_server`) in a thread; nothing when an API URL is
    configured or a start is already under way. Prefect's server module is imported here, in the caller's
    thread; the thread launches the process and polls its health (CPython's imports are safe across threads)."""
    if api_url() is not None or _STARTING:
        return
    import threading

    from prefect.server.api.server import SubprocessASGIServer

    tie_temporary_server()
    server = SubprocessASGIServer()  # the instance Prefect's client takes when it needs the API
    failed: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread by the wait)
            failed.append(e)

    thread = threading.Thread(target=start, name="klear-prefect-server", daemon=True)
    thread.start()
    _STARTING.append((thread, failed))


def wait_for_temporary_server() -> None:
    """Wait for a start begun by `start_temporary_server` (its error, if any, is raised here); nothing
    when none was begun."""
    while _STARTING:
        thread, failed = _STARTING.pop()
        thread.join()
        if failed:
            raise failed[0]


class _TiedSubprocess:
    """`subprocess` as Prefect's server module sees it while it starts a server: Popen of
    `python -m uvicorn …` becomes `python -m flows.cli_prefect PARENT_PID -m uvicorn …`."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def Popen(self, args, *a, **kw):  # noqa: N802 (subprocess's name)
        args = list(args)
        if args[1:3] == ["-m", "uvicorn"]:
            args = [args[0], "-m", __name__, str(os.getpid()), *args[1:]]
            # its own process group from the start: a Ctrl-C while its python starts up is not its to take
            kw.setdefault("process_group", 0)
        return self._real.Popen(args, *a, **kw)


def _serve(argv: list[str]) -> None:
    """The server side: its own process group, a watch on the parent, then `python -m MODULE ARGS`."""
    import runpy

    from tasks.process_lifetime import exit_with_parent

    parent, flag, module, *rest = argv
    if flag != "-m":
        raise SystemExit(f"usage: python -m {__name__} PARENT_PID -m MODULE ARGS...")
    os.setpgid(0, 0)  # Ctrl-C at the terminal is the command's to handle, not the server's
    exit_with_parent(int(parent))
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve(sys.argv[1:])
