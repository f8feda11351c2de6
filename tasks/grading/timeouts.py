"""CPU-time deadlines for calls that may hang (sympy inside math-verify), in worker processes that any
caller can start: a thread, a Dask worker, or a plain script without a `__main__` guard.

    pool.call(fn, *args, timeout=T)    fn(*args) in a worker; TimedOut past T CPU seconds of the worker
    pool.stream(gen, *args, timeout=T) the values of generator gen(*args), T CPU seconds for each value

The deadline counts the worker's CPU time (user + system, read with psutil every `poll_s` while waiting),
not wall time: on a loaded machine a worker gets a fraction of a core, and a wall deadline failed honest
work there that passes on an idle one. A step past its CPU budget gets `TimedOut` and its worker is
killed (a hung sympy cannot be interrupted any other way) and replaced on the next call. A generous wall
backstop (`wall_factor` × T, at least `min_wall_s`) ends a step whose worker makes no progress without
using CPU (a stopped or starved machine): `WorkerFault("stalled")`, a fault outside the input.

Workers are `python -m tasks.grading.worker` subprocesses speaking pickled frames over pipes (worker.py),
not multiprocessing children, so nothing re-imports the caller's `__main__`. `fn` must be importable by
module and name. A new worker's start-up (Python, the module's imports and its `warm_up()` if it has one)
is waited for apart from any deadline, up to `startup_timeout` seconds of wall time: on a loaded machine
start-up alone exceeds a 5 s deadline. A worker ends by itself when this process is gone (worker.py says
how, a worker stuck in C code included).
"""
from __future__ import annotations

import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from tasks.grading.worker import HEADER

ROOT = Path(__file__).resolve().parents[2]  # the directory holding `tasks`, on the worker's import path


class TimedOut(Exception):
    """A step of the call used more than its CPU budget; `received` values had come before it."""

    def __init__(self, message: str, received: int = 0):
        super().__init__(message)
        self.received = received


class WorkerFault(Exception):
    """The worker failed on its own account: `kind` "startup" (did not start), "died" (ended mid-call),
    "stalled" (no progress and no CPU budget spent within the wall backstop); `received` as TimedOut."""

    def __init__(self, kind: str, message: str, received: int = 0):
        super().__init__(message)
        self.kind, self.received = kind, received


class RemoteError(Exception):
    """The called function raised; the message is the worker's traceback. The worker stays usable."""


def _where(fn: Callable) -> tuple[str, str]:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or module == "__main__" or not name or "<" in name:
        raise ValueError(f"{fn!r} cannot run in a worker process: it must be a module-level function of an "
                         f"importable module")
    return module, name


class _Worker:
    def __init__(self, memory_mb: int | None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        cmd = [sys.executable, "-m", "tasks.grading.worker"] + (["--memory-mb", str(memory_mb)] if memory_mb else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.ps = psutil.Process(self.proc.pid)
        self.fd = self.proc.stdout.fileno()
        self.buf = bytearray()
        self.warmed: set[str] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, obj: Any) -> None:
        body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise WorkerFault("died", f"worker {self.pid} is gone (exit {self.proc.poll()})") from None

    def cpu(self) -> float:
        try:
            t = self.ps.cpu_times()
        except psutil.Error:
            return 0.0  # gone: the next read sees end of file
        return t.user + t.system

    def _frame(self) -> Any:
        if len(self.buf) < HEADER.size:
            return None
        size, = HEADER.unpack_from(self.buf)
        if len(self.buf) < HEADER.size + size:
            return None
        body = bytes(self.buf[HEADER.size:HEADER.size + size])
        del self.buf[:HEADER.size + size]
        return pickle.loads(body)

    def receive(self, cpu_s: float | None, wall_s: float, poll_s: float, received: int = 0) -> Any:
        """The next reply; TimedOut once the worker spent `cpu_s` CPU seconds on it, WorkerFault when it
        ends first or `wall_s` seconds pass."""
        cpu0, t0 = self.cpu(), time.monotonic()
        while (msg := self._frame()) is None:
            ready, _, _ = select.select([self.fd], [], [], poll_s)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise WorkerFault("died", f"worker {self.pid} ended mid-call (exit {self.proc.wait()})", received)
                self.buf += chunk
            elif cpu_s is not None and self.cpu() - cpu0 > cpu_s:
                raise TimedOut(f"past its {cpu_s:g} s CPU budget", received)
            elif time.monotonic() - t0 > wall_s:
                raise WorkerFault("stalled", f"worker {self.pid}: no reply within {wall_s:g} s of wall time "
                                             f"and {self.cpu() - cpu0:.1f} s of CPU", received)
        return msg

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


class ProcessTimeoutPool:
    """Up to `workers` worker processes, started on first use; calls from several threads share them."""

    def __init__(self, workers: int = 1, startup_timeout: float = 120.0, wall_factor: float = 20.0,
                 min_wall_s: float = 60.0, memory_mb: int | None = None, poll_s: float = 0.02):
        self.startup_timeout = startup_timeout  # Python + imports + warm_up of a new worker; no call's deadline
        self.wall_factor, self.min_wall_s = wall_factor, min_wall_s  # backstop: a step's wall time, however loaded
        self.memory_mb = memory_mb  # address-space limit of a worker (None: none)
        self.poll_s = poll_s  # CPU time is read this often while waiting (one /proc read: cheap)
        self._slots: queue.Queue[_Worker | None] = queue.Queue()
        for _ in range(max(1, workers)):
            self._slots.put(None)
        self._lock = threading.Lock()
        self._started: list[_Worker] = []

    def _start(self, module: str) -> _Worker:
        w = _Worker(self.memory_mb)
        with self._lock:
            self._started = [x for x in self._started if x.alive()] + [w]
        try:
            self._warm(w, module)
        except BaseException:
            w.kill()
            raise
        return w

    def _warm(self, w: _Worker, module: str) -> None:
        w.send(("warm", module))
        try:
            msg = w.receive(None, self.startup_timeout, self.poll_s)
        except WorkerFault as e:
            raise WorkerFault("startup", f"grading worker did not start: {e}") from None
        if msg[0] != "ready":
            raise WorkerFault("startup", f"grading worker could not import {module}: {msg[1]}")
        w.warmed.add(module)

    @contextmanager
    def _worker(self, module: str) -> Iterator[_Worker]:
        w = self._slots.get()
        try:
            if w is None or not w.alive():
                w = None
                w = self._start(module)
            elif module not in w.warmed:
                self._warm(w, module)
            yield w
        except RemoteError:
            raise
        except BaseException:  # timed out, died, stalled, or the caller stopped mid-stream: never reuse it
            if w is not None:
                w.kill()
            w = None
            raise
        finally:
            self._slots.put(w)

    def _wall(self, timeout: float) -> float:
        return max(self.min_wall_s, self.wall_factor * timeout)

    def stream(self, fn: Callable[..., Iterator], *args: Any, timeout: float) -> Iterator[Any]:
        """The values `fn(*args)` yields, each within `timeout` CPU seconds of the last."""
        module, name = _where(fn)
        with self._worker(module) as w:
            w.send(("call", module, name, args, timeout))
            n = 0
            while True:
                msg = w.receive(timeout, self._wall(timeout), self.poll_s, n)
                if msg[0] == "item":
                    yield msg[1]
                    n += 1
                elif msg[0] == "done":
                    return
                else:
                    raise RemoteError(msg[1])

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        module, name = _where(fn)
        with self._worker(module) as w:
            w.send(("call", module, name, args, timeout))
            msg = w.receive(timeout, self._wall(timeout), self.poll_s)
            if msg[0] == "done":
                return msg[1]
            if msg[0] == "error":
                raise RemoteError(msg[1])
            raise TypeError(f"{module}.{name} is a generator: use stream()")

    def close(self) -> None:
        """Kill the workers (a later call starts new ones)."""
        with self._lock:
            started, self._started = self._started, []
        for w in started:
            w.kill()
